"""The one code path from a snapshot to a published release.

Four steps, each a function a Dagster asset or check calls on a ``ReleaseStore`` (``release_next`` chains them
without Dagster):

1. ``stage``: validate the snapshot T(i) and store it (a published T(i) is never replaced; an unpublished one,
   left by a refusal, is replaced by new rows, so a refusal never blocks the next release);
2. ``make_candidate``: run the spec's model on T(i), the bound spec and what it may read of release i-1
   (Xiao-Tao Lemma 4), with the release's own random generator, and stage the candidate;
3. ``judge``: the independent verifiers (``core.judge.verifiers``) and the attack suite (``core.judge.attacks``) over the
   published history with the candidate appended, as the adversary would read it after publication;
4. ``publish``: refuse (``NotPublishable``) when a blocking report failed, else publish the candidate with
   its checks and utility (``core.judge.utility.summarise``) in one transaction.

A guarantee the model promises always blocks. Attacks block only for models that claim protection across
releases (m-invariance and the later models); for the single-release baselines (k-anonymity, l-diversity) they
are reported, not blocking: showing that they disclose across releases is the point of running them.
Bad input fails in ``stage`` before anything is written, so nothing is ever half-published.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import tempfile
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .core import models
from .core.encoding import qi_values
from .core.hierarchy import interval_labels
from .core.judge.history import History, IncompleteHistory, Report
from .core.judge.run import attack_history, verify_history
from .core.judge.utility import summarise
from .core.models.base import HELD_BACK
from .core.models.recorded import RECORDED
from .core.partitioned import Backend, current, using
from .core.progress import Reporter, reporting, step
from .core.release import PreviousRelease, Release, release_rng
from .core.spec import BoundSpec, Spec, validate_snapshot
from .errors import NotPublishable, PrivReleaseError, SnapshotError, SpecError, StoreError
from .storage import ReleaseStore, frame_digest


def read_snapshot(path: str | Path, spec: Spec) -> pd.DataFrame:
    """The columns of ``spec`` in a snapshot file, in the file's order.

    A ``.csv`` file (a header row naming each column once) is read as written, as ``spec.csv`` says
    (``CsvFormat``): every cell is text (``007``, ``None``, ``NA`` are values), an empty cell or a marker of
    ``csv.missing`` is null, and the columns ``Spec.csv_type`` reads as numbers are then parsed, a column at a
    time (no Python work per row). A ``.parquet``/``.pq`` file keeps its own types.

    Every text column but the id comes back as a pandas categorical (Arrow's dictionary encoding): a code of one
    byte a cell instead of an 8-byte pointer (``_coded``), which is what the frame costs while a release of it
    runs (10M rows: 0.5 GB less). Its values, and everything published from them, are those of the text.

    Raises:
        SnapshotError: one line naming the file and the rule: it is missing, unreadable or of another format, a
            column is named twice, a column of the spec is absent, a CSV row has another number of fields than
            the header (its line), or a cell of a column read as a number is not one (the column and the row;
            never the cell or the row's id).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise SnapshotError(f"{path}: a snapshot is a .csv or .parquet file, got {suffix or 'no suffix'!r}")
    if not path.is_file():
        raise SnapshotError(f"{path}: no such snapshot file")
    return _read_csv(path, spec) if suffix == ".csv" else _read_parquet(path, spec)


def _read_parquet(path: Path, spec: Spec) -> pd.DataFrame:
    """``read_snapshot`` of a Parquet file."""
    try:
        names = pq.read_schema(path).names
    except (OSError, pa.ArrowException) as exc:
        raise SnapshotError(f"{path}: cannot read the snapshot as PARQUET (not a Parquet file, or a damaged one)"
                            ) from exc
    columns = _spec_columns(names, spec, path)
    try:
        return _coded(pq.read_table(path, columns=columns), spec).to_pandas()
    except (OSError, pa.ArrowException) as exc:
        raise SnapshotError(f"{path}: cannot read the snapshot as PARQUET (a damaged file)") from exc


def _read_csv(path: Path, spec: Spec) -> pd.DataFrame:
    """``read_snapshot`` of a CSV file: pyarrow reads every cell of the spec's columns as text, then
    ``_parsed`` parses the columns read as numbers."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), None)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise SnapshotError(f"{path}: cannot read the snapshot as CSV (its header is not UTF-8 text)") from exc
    if header is None:
        raise SnapshotError(f"{path}: cannot read the snapshot as CSV (the file is empty; a CSV snapshot starts "
                            "with a header row naming its columns)")
    columns = _spec_columns(header, spec, path)
    invalid: list[pacsv.InvalidRow] = []

    def refuse(row: pacsv.InvalidRow) -> str:
        invalid.append(row)
        return "error"

    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(use_threads=False),  # so an invalid row knows its line
            parse_options=pacsv.ParseOptions(invalid_row_handler=refuse),
            convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c in columns}, include_columns=columns,
                strings_can_be_null=True, null_values=["", *spec.csv.missing],
            ),
        )
    except (OSError, pa.ArrowException) as exc:
        if invalid:
            row = invalid[0]
            raise SnapshotError(f"{path}: line {row.number} has {row.actual_columns} field(s) where the header has "
                                f"{row.expected_columns}; every row has one field per column") from exc
        raise SnapshotError(f"{path}: cannot read the snapshot as CSV (it is not UTF-8 text, or a quoted field is "
                            "not closed)") from exc
    numeric = {c: spec.csv_type(c) for c in columns if spec.csv_type(c) != "text"}
    cast = {name: _cast(table[name], kind) for name, kind in numeric.items()}
    for name, numbers in cast.items():
        if numbers is not None:
            table = table.set_column(table.schema.get_field_index(name), name, numbers)
    frame = _coded(table, spec, keep=set(cast)).to_pandas()
    for name, numbers in cast.items():
        if numbers is None:
            frame[name] = _parsed(frame[name], numeric[name], path)
    return frame


def _coded(table: pa.Table, spec: Spec, keep: Collection[str] = ()) -> pa.Table:
    """``table`` with its text columns dictionary-encoded, but the id (a code per distinct id would cost more
    than the text) and the columns in ``keep``: ``to_pandas`` makes them categoricals. O(cells), one hash pass
    per column."""
    for i, field in enumerate(table.schema):
        if pa.types.is_string(field.type) and field.name != spec.id and field.name not in keep:
            table = table.set_column(i, field.name, pc.dictionary_encode(table.column(i)))
    return table


def _cast(text: pa.ChunkedArray, kind: str) -> pa.ChunkedArray | None:
    """A CSV column read as text, as int64 (or, for ``kind`` "number", float64) when Arrow parses every cell to a
    finite number; None otherwise, and ``_parsed`` then parses it or names the row it refuses (Arrow's cast is
    ~25 times faster than pandas' for a column that parses)."""
    for target in (pa.int64(),) if kind == "integer" else (pa.int64(), pa.float64()):
        try:
            numbers = pc.cast(text, target)
        except pa.ArrowInvalid:
            continue
        if pc.all(pc.is_finite(numbers)).as_py() is not False:
            return numbers
    return None


def _spec_columns(names: Sequence[str], spec: Spec, path: Path) -> list[str]:
    """The columns of ``spec`` among a file's column ``names``, in the file's order. SnapshotError naming a
    column the file names twice, or the spec's columns it lacks."""
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SnapshotError(f"{path}: column(s) {twice} named more than once; a snapshot names each column once")
    missing = [c for c in spec.columns if c not in names]
    if missing:
        raise SnapshotError(f"{path}: snapshot is missing column(s) {missing} named in spec {spec.name!r}")
    return [n for n in names if n in set(spec.columns)]


def _parsed(values: pd.Series, kind: str, path: Path) -> pd.Series:
    """A CSV column read as text, as ``kind`` (one of ``core.spec.CSV_TYPES``) says: as it is (text), or parsed
    as numbers (nulls stay null; an ``integer`` column without nulls as int64). SnapshotError naming the column
    and the first row whose cell is not a finite number (or not a whole one, for ``integer``)."""
    if kind == "text":
        return values
    numbers = pd.to_numeric(values, errors="coerce")
    wrong = numbers.isna() | ~np.isfinite(numbers.to_numpy(dtype=np.float64))
    if kind == "integer":
        wrong |= numbers.mod(1) != 0
    wrong &= values.notna()
    if wrong.any():
        row = int(np.flatnonzero(wrong.to_numpy())[0])
        what = "a whole number" if kind == "integer" else "a finite number"
        raise SnapshotError(f"{path}: column {values.name!r}, row {row + 1} (line {row + 2}): the cell is not {what}; "
                            f"{values.name} is read as {kind}")
    return numbers.astype(np.int64) if kind == "integer" and numbers.notna().all() else numbers


def next_release_id(store: ReleaseStore) -> int:
    """The id the next release gets: one after the last published (1 for an empty store)."""
    ids = store.release_ids()
    return ids[-1] + 1 if ids else 1


def stage(store: ReleaseStore, release_id: int, df: pd.DataFrame) -> int:
    """Validate ``df`` and store it as T(release_id); return how many rows T(release_id) has as stored
    (``ReleaseStore.stage_snapshot``: a published T(release_id) is kept as it is; an unpublished one is kept when
    ``df`` has the same rows and is replaced, with everything staged with it, when it has other rows), read back
    as a count (``staged_snapshot`` reads the rows). SnapshotError for rows the spec refuses,
    StoreError for an id out of order, SpecError for a spec whose model or parameters differ from the history's
    (``check_model``)."""
    with step("staging"):
        store.ensure_schema()
        check_model(store)
        return len(store.stage_snapshot(release_id, df, []))


def check_model(store: ReleaseStore) -> None:
    """Refuse a spec whose model or parameters differ from those the history's last release was published with
    (``published.manifest``), with which that release's own judge checked the whole history before publishing it:
    releasing m = 2 after m = 3, or k-anonymity after m-invariance, breaks what the earlier releases promised, and
    judging an m = 3 history against m = 4 would report a broken guarantee that was never promised. A parameter the
    manifest does not record (added to the model later) is not compared; releases recorded as published before the
    tool (``privrelease record``, model "recorded") were published with no model and are not compared.

    Raises:
        SpecError: naming the model, or each differing parameter with its value in the spec and in the manifest,
            and the way out: the spec the history was published with, or a new store file.
    """
    spec = store.spec
    manifest = store.manifest()
    manifest = manifest[manifest["model"] != RECORDED]
    if not len(manifest):
        return
    last = manifest.iloc[-1]
    where = f"release {last['release_id']} of {store.path} (published.manifest)"
    rule = ("a history is published and judged under one model and its parameters: use the spec it was published "
            "with ({}), or start a new history in a new store file (another --db)")
    if last["model"] != spec.model.name:
        raise SpecError(f"model.name: the spec says {spec.model.name!r}, but {where} was published with model "
                        f"{last['model']!r}; " + rule.format(f"set model.name: {last['model']}"))
    ours = json.loads(json.dumps(spec.model.params, sort_keys=True, default=str))  # tuples as lists, as stored
    published = last["params"]
    differ = [k for k in sorted(published) if ours.get(k, "absent") != published[k]]
    if differ:
        pairs = "; ".join(f"model.{k}: {k}={ours.get(k, 'absent')!r} in the spec, {k}={published[k]!r} in the "
                          "manifest" for k in differ)
        raise SpecError(f"{pairs}: {where} was published with them; "
                        + rule.format("set " + ", ".join(f"{k}: {published[k]!r}" for k in differ)))


def unchanged(store: ReleaseStore, df: pd.DataFrame, attributes: Sequence[str] | None = None) -> int | None:
    """The last published release id when ``df`` holds exactly its rows (``frame_digest`` of the validated
    snapshot) and the same attributes are asked for (None: every quasi-identifier); None otherwise, and for a
    store with no release. Publishing it again would add a release that tells nothing new, so callers report
    "unchanged" instead, which also makes a retry of a release that did publish publish nothing.
    SnapshotError when the spec refuses ``df`` and ``df`` has the ids of the last release; a ``df`` with other
    ids is None without being validated (``stage`` validates it, with the same refusals, before writing).

    Cost: what it takes to tell the snapshots apart: a count and the ids alone (``ReleaseStore.holds_ids``: the
    stored ids read as Arrow and digested), then, only when the ids are the same, ``validate_snapshot`` of
    ``df`` and the digest of the whole stored snapshot, read as Arrow (``ReleaseStore.holds_snapshot``, the ids
    not compared twice). A new release inserts or deletes
    someone, so it costs the count and the ids: neither a validation nor a read and digest of all of T(n-1).
    """
    asked = tuple(model_spec(store.spec, attributes).quasi_identifiers)  # refuses bad attributes up front
    ids = store.release_ids()
    if not ids:
        return None
    last = ids[-1]
    manifest = store.manifest().set_index("release_id")
    if tuple(manifest.loc[last, "attributes"]) != asked:
        return None
    if store.spec.id in df.columns and not store.holds_ids(last, df):  # other rows: staging validates them
        return None
    frame = validate_snapshot(df, store.spec)  # refuses a snapshot without the id column
    return last if store.holds_snapshot(last, frame, same_ids=True) else None


def model_spec(spec: Spec, attributes: Sequence[str] | None) -> Spec:
    """``spec`` restricted to the quasi-identifiers one release publishes (all of them when None or empty), in
    spec order: the one check of a release's attributes, for the library (``make_candidate``, ``unchanged``, so
    ``release_next`` and ``run_release`` refuse before anything is staged), the CLI's ``release --attributes``
    and the request sensor alike.

    SpecError for a name that is not a quasi-identifier of the spec, and for a strict subset when the spec's model
    republishes every quasi-identifier (``ModelDescriptor.vertical`` False), naming the models that publish one.
    """
    if not attributes:
        return spec
    unknown = [a for a in attributes if a not in spec.quasi_identifiers]
    if unknown:
        raise SpecError(f"attributes {unknown} are not quasi-identifiers of spec {spec.name!r} "
                            f"(they are {list(spec.quasi_identifiers)})")
    kept = {n: q for n, q in spec.quasi_identifiers.items() if n in set(attributes)}
    if len(kept) < len(spec.quasi_identifiers) and not models.descriptor(spec.model.name).vertical:
        vertical = [n for n in models.names() if models.descriptor(n).vertical]
        raise SpecError(
            f"attributes {list(kept)}: model {spec.model.name} publishes every quasi-identifier of spec "
            f"{spec.name!r} ({list(spec.quasi_identifiers)}) in every release; a subset needs a vertical model "
            f"({vertical}). Ask for every quasi-identifier (no attributes), or change the spec's model"
        )
    return dataclasses.replace(spec, quasi_identifiers=kept)


def prepare(store: ReleaseStore, release_id: int, stage: str) -> dict[str, pd.DataFrame]:
    """Run the model's stage ``stage`` (``ModelDescriptor.stages``, e.g. the possible-world set) on the staged
    T(release_id) and keep its frames privately with the release (``store.stage_state``); return them.

    Reads what the model reads of the past and ``release_rng(spec, i)``, so a re-run is identical. Reported as the
    step ``model stage <stage>`` (``core.progress``).
    """
    with step(f"model stage {stage}"):
        return _prepare(store, release_id, stage)


def _prepare(store: ReleaseStore, release_id: int, stage: str) -> dict[str, pd.DataFrame]:
    """``prepare``'s body."""
    snapshot = staged_snapshot(store, release_id)
    spec = store.bound_spec(snapshot)
    model = models.descriptor(spec.model.name)
    step = next((s for s in model.stages if s.name == stage), None)
    if step is None:
        raise SpecError(f"model {model.name} has no stage {stage!r} (its stages: {[s.name for s in model.stages]})")
    frames = step.run(snapshot, spec, previous_release(store, release_id, spec), release_rng(spec, release_id))
    store.stage_state(release_id, frames)
    return frames


def make_candidate(store: ReleaseStore, release_id: int, attributes: Sequence[str] | None = None,
                   backend: Backend | None = None) -> Release:
    """Run the spec's model on the staged T(release_id) and stage the result as the release's candidate.

    The model reads T(i), the spec bound to the stored domains and T(i) (ranks never move), what its
    descriptor says it reads of the past (``ModelDescriptor.reads``; Xiao-Tao Lemma 4: release i-1), the frames
    its stages kept for release i (``prepare``), and ``release_rng(spec, i)``, so a re-run is identical.
    ``attributes`` restricts the published quasi-identifiers (a projection request); None publishes all.
    ``backend`` runs the model's partition-parallel work (``core.partitioned``); None: the current one.
    Reported as the step ``model``, the model's own phases inside it (``core.progress``).
    """
    with step("model"):
        return _make_candidate(store, release_id, attributes, backend)


def _make_candidate(store: ReleaseStore, release_id: int, attributes: Sequence[str] | None,
                    backend: Backend | None) -> Release:
    """``make_candidate``'s body."""
    snapshot = staged_snapshot(store, release_id)
    bound = store.bound_spec(snapshot)
    spec = model_spec(bound, attributes)
    model = models.descriptor(spec.model.name)
    staged = store.staged_state(release_id) if model.stages else {}
    prepared = {s.name: staged[s.name] for s in model.stages if s.name in staged}
    missing = [s.name for s in model.stages if s.name not in prepared]
    if missing:
        raise StoreError(f"release {release_id}: stage(s) {missing} of model {model.name} have not run; prepare "
                         "them first (the Dagster assets of the same names)")
    previous = previous_release(store, release_id, bound)
    with using(current() if backend is None else backend):
        release = model.publish(snapshot, spec, previous, release_rng(spec, release_id), **prepared)
    release.state = {**prepared, **release.state}
    store.stage_candidate(release_id, release)
    return release


def previous_release(store: ReleaseStore, release_id: int, spec: BoundSpec) -> PreviousRelease | None:
    """What the model of ``spec`` reads of the release before ``release_id``: the parts its descriptor says
    (``ModelDescriptor.reads``), with only the columns it names (``ModelDescriptor.previous_columns``, from
    ``spec``) and, for a model that asks (``ModelDescriptor.returning``), the last appearance of the tuples that
    come back. Cost: the columns read (``StoreReader.previous``)."""
    model = models.descriptor(spec.model.name)
    columns = model.previous_columns(spec) if model.previous_columns is not None else None
    return store.previous(release_id, model.reads, columns, returning=model.returning)


def staged_snapshot(store: ReleaseStore, release_id: int) -> pd.DataFrame:
    """The staged T(release_id); StoreError when it was never staged."""
    snapshot = store.snapshot(release_id)
    if snapshot is None:
        raise StoreError(f"release {release_id}: no snapshot staged; stage the snapshot first")
    return snapshot


def judge(store: ReleaseStore, release_id: int) -> list[Report]:
    """The verifiers and attacks over releases 1..i-1 plus the candidate of release i.

    Each report's summary gets ``kind`` ("guarantee" or "attack") and ``blocking``: a failed guarantee always
    blocks; a disclosing attack blocks unless the model is a single-release baseline (``across_releases``).
    The judge reads a window, releases i-1 and i with the judge's memo of release i-1 (``History.first``), so
    judging release i costs what releases i-1 and i cost; when a verifier or attack needs more
    (``IncompleteHistory``: a memo is missing, or it reads every release), the complete history is read and judged
    instead. The candidate sets the attacks computed, and the judge's memo of release i, are kept in the store.
    Reported as the step ``judge``, with ``reading the history``, each verifier and attack and ``saving the
    memo`` inside it (``core.progress``).
    """
    with step("judge"):
        if release_id > 2:
            try:
                return _judge(store, _history(store, release_id, since=release_id - 1))
            except IncompleteHistory:
                pass
        return _judge(store, _history(store, release_id))


def _history(store: ReleaseStore, release_id: int, since: int = 1) -> History:
    """The history ``judge`` reads (``ReleaseStore.history``), as the step ``reading the history``."""
    with step("reading the history"):
        return store.history(candidate=release_id, since=since)


def _judge(store: ReleaseStore, history: History) -> list[Report]:
    """``judge`` over ``history`` (a window or the complete history); keeps what the judge computed only when
    every verifier and attack ran (``IncompleteHistory`` propagates before anything is saved)."""
    release_id = history.release_ids[-1]
    kept = dict(history.candidate_sets)  # read back from the store: only sets computed now are saved
    model = models.descriptor(history.spec.model.name)
    reports = []
    for kind, found in (("guarantee", verify_history(history)), ("attack", attack_history(history))):
        for report in found:
            report.summary["kind"] = kind
            report.summary["blocking"] = kind == "guarantee" or model.across_releases
            reports.append(report)
    with step("saving the memo"):
        store.save_candidate_sets({j: css for j, css in history.candidate_sets.items() if kept.get(j) is not css})
        store.save_judge_memo({key: frame for key, frame in history.memo.items() if key[1] == release_id})
    return reports


def blocking_failures(reports: Sequence[Report]) -> list[Report]:
    """The failed reports that forbid publication (a report without a ``blocking`` flag blocks)."""
    return [r for r in reports if not r.ok and r.summary.get("blocking", True)]


def refusal(release_id: int, failed: Sequence[Report]) -> str:
    """Why release ``release_id`` is not published: each ``failed`` blocking report, its violation count and the
    release and group of its first violation, never an individual (``_failure``)."""
    return f"release {release_id} is not published: " + "; ".join(map(_failure, failed))


def publish(store: ReleaseStore, release_id: int, reports: Sequence[Report]) -> dict:
    """Publish the staged candidate of ``release_id`` with its checks and utility; return its summary.

    Refuses (NotPublishable naming each failed report, its violation count and the release and group of its
    first violation, never an individual) when a blocking report failed. The summary: release_id, model, rows
    (counterfeits included), groups, counterfeits, inserts, deletes, updates, held_back (``release_changes``),
    checks (name -> passed) and utility (``core.judge.utility.summarise``). Reported as the step ``publication``
    (``core.progress``).
    """
    failed = blocking_failures(reports)
    if failed:
        raise NotPublishable(refusal(release_id, failed))
    with step("publication"):
        return _publish(store, release_id, reports)


def _publish(store: ReleaseStore, release_id: int, reports: Sequence[Report]) -> dict:
    """``publish``'s body, once no blocking report failed: the utility summary over the columns it reads, as codes
    (``StoreReader.candidate_measures``), then the candidate published inside DuckDB
    (``StoreWriter.publish_candidate``): the release's labels never reach Python."""
    table, counterfeits, snapshot = store.candidate_measures(release_id)
    utility = summarise(table, counterfeits, store.staged_bound_spec(release_id), snapshot=snapshot)
    del table, snapshot
    checks = {r.name: bool(r.ok) for r in reports}
    published = store.publish_candidate(release_id, checks, utility, verdicts(reports))
    delta = release_changes(store, release_id)
    return {
        "release_id": release_id,
        "model": published["model"],
        "rows": published["rows"],
        "groups": published["groups"],
        "counterfeits": published["counterfeits"],
        **delta,
        "checks": checks,
        "utility": utility,
    }


def verdicts(reports: Sequence[Report]) -> pd.DataFrame:
    """The judge's ``reports`` as ``published.verdict`` keeps them, one row each: ``name``, ``kind`` ("guarantee",
    "attack", or "expectations" for Great Expectations' suite), ``blocking``, ``passed``, ``violations`` (how many
    rows its violations frame has: individuals, groups or pairs, as the report counts them) and ``summary``, the
    report's summary as JSON (counts, bounds, a skipped attack's reason: ``Report.summary`` holds no individual).
    O(reports)."""
    return pd.DataFrame({
        "name": [r.name for r in reports],
        "kind": [str(r.summary.get("kind", "expectations")) for r in reports],
        "blocking": [bool(r.summary.get("blocking", True)) for r in reports],
        "passed": [bool(r.ok) for r in reports],
        "violations": pd.array([len(r.violations) for r in reports], dtype="int64"),
        "summary": [json.dumps({k: v for k, v in r.summary.items() if k not in ("kind", "blocking")},
                               sort_keys=True, default=_scalar) for r in reports],
    })


def _scalar(value: object) -> object:
    """A numpy scalar of a report's summary as a Python one, for ``json.dumps``; anything else as text."""
    return value.item() if isinstance(value, np.generic) else str(value)


def release_changes(store: ReleaseStore, release_id: int) -> dict[str, int]:
    """What release ``release_id`` changes in the published history: inserts, deletes and updates of the tuples
    it publishes against those release ``release_id - 1`` published (T(j) less the tuples held back, state
    ``HELD_BACK``; every tuple is an insert in the first release), and ``held_back``, how many tuples of T(j) it
    holds back. A tuple held back is so counted, then an insert when a later release publishes it, never an
    insert then a delete. The tuples held back are known once the candidate is made (before that, none).
    Counted inside DuckDB over the staged snapshots (``StoreReader.snapshot_changes``); only the held-back ids
    are read."""
    held = {j: _held_back(store, j) for j in (release_id, release_id - 1) if j >= 1}
    return {**store.snapshot_changes(release_id, held), HELD_BACK: len(held[release_id])}


def _held_back(store: ReleaseStore, release_id: int) -> pd.Series:
    """The ids release ``release_id`` holds back (its state ``HELD_BACK``, published or staged)."""
    frame = store.state(release_id, HELD_BACK)
    return frame[store.spec.id] if frame is not None else pd.Series([], dtype=object)


def release_next(
    store: ReleaseStore,
    df: pd.DataFrame,
    attributes: Sequence[str] | None = None,
    progress: Reporter | None = None,
) -> dict:
    """Stage, make the candidate, judge and publish ``df`` as the next release; return ``publish``'s summary with
    ``outcome`` "published". ``progress`` hears each step as it runs (``core.progress``; default: silent).

    When ``df`` holds the rows of the last published release (``unchanged``), publishes nothing and returns that
    release's manifest row with ``outcome`` "unchanged". A snapshot staged earlier for the next release and never
    published (a refusal) is replaced by ``df`` (``stage``): fixing the data is all a refusal asks for.
    """
    with store.session(), reporting(progress):
        last = unchanged(store, df, attributes)
        if last is not None:
            row = store.manifest().set_index("release_id").loc[last].to_dict()
            return {"release_id": last, "outcome": "unchanged", **row}
        release_id = next_release_id(store)
        stage(store, release_id, df)
        for step in models.descriptor(store.spec.model.name).stages:
            prepare(store, release_id, step.name)
        make_candidate(store, release_id, attributes)
        reports = judge(store, release_id)
        return {**publish(store, release_id, reports), "outcome": "published"}


def preview(store: ReleaseStore, df: pd.DataFrame, attributes: Sequence[str] | None = None) -> dict:
    """What publishing ``df`` as the next release would publish, without publishing it or touching the store.

    The release is made as ``release_next`` makes it (stage, the model's stages, the candidate, the judge: the
    verifiers and the attacks), on a copy of the store in a temporary folder (``StoreConnection.copy_to``), which
    is then deleted: the store's published and staged sides stay as they were, byte for byte, so nothing a
    preview does can block the next release. A store file that does not exist is not created (the preview runs on
    a new store in the temporary folder). The outcome:

    - ``outcome`` "unchanged": ``df`` holds the rows of the last published release (``unchanged``), with
      ``release_id`` that release;
    - "publishable": with ``release_id``, ``model``, ``rows`` (counterfeits included), ``groups``, ``counterfeits``,
      ``inserts``, ``deletes``, ``updates``, ``held_back`` (``release_changes``), ``utility``
      (``core.judge.utility.summarise``, as ``publish`` computes it) and ``reports`` (the judge's);
    - "refused": ``reason``, the message ``release_next`` would raise (NotPublishable: the model's own refusal,
      which says what would make the snapshot publishable, or the failed blocking reports, by count, release and
      group, never an individual), with ``reports`` when the judge ran (empty when the model refused).

    The Great Expectations suite of the Dagster release (schema and values of the candidate) is not run.

    Raises:
        SnapshotError, SpecError, StoreError: as ``release_next`` does, for rows, attributes or a spec it refuses
            before making the release, naming the store (never its temporary copy); nothing is written then either.

    Cost: a copy of the store's file, then what ``release_next`` costs without the publication.
    """
    exists = store.path.exists()
    if exists:
        with store.session():
            last = unchanged(store, df, attributes)
            if last is not None:
                return {"release_id": last, "outcome": "unchanged"}
    with tempfile.TemporaryDirectory(prefix="privrelease-preview-") as folder:
        path = Path(folder) / store.path.name
        trial = ReleaseStore(store.copy_to(path) if exists else path, store.spec)
        try:
            with trial.session():
                return _trial(trial, df, attributes)
        except PrivReleaseError as exc:  # the store named as the user knows it, not as its temporary copy
            raise type(exc)(str(exc).replace(str(path), str(store.path))) from exc


def _trial(store: ReleaseStore, df: pd.DataFrame, attributes: Sequence[str] | None) -> dict:
    """``preview``'s release made on ``store``, a copy thrown away afterwards."""
    release_id = next_release_id(store)
    stage(store, release_id, df)
    snapshot = staged_snapshot(store, release_id)
    try:
        for step in models.descriptor(store.spec.model.name).stages:
            prepare(store, release_id, step.name)
        release = make_candidate(store, release_id, attributes)
    except NotPublishable as exc:
        return {"release_id": release_id, "outcome": "refused", "reason": str(exc), "reports": []}
    reports = judge(store, release_id)
    failed = blocking_failures(reports)
    if failed:
        return {"release_id": release_id, "outcome": "refused", "reason": refusal(release_id, failed),
                "reports": reports}
    spec = store.bound_spec(snapshot)
    return {
        "release_id": release_id,
        "outcome": "publishable",
        "model": release.model,
        "rows": len(release.table),
        "groups": release.groups,
        "counterfeits": release.counterfeit_count,
        **release_changes(store, release_id),
        "utility": summarise(release.table, release.counterfeits, spec, snapshot=snapshot),
        "reports": reports,
    }


#: The columns of a violations frame that may leave the ``private`` schema: pointers to a release and a group
#: (the published tables hold them anyway; ``first``/``last`` and ``before``/``after`` are the releases an attack
#: spans), the kind of violation, the rule broken, the candidates left (``size``), and Great Expectations'
#: findings on the candidate table (which has no identifier column). Any other column (an individual's id, the
#: ids of a class, a candidate set, a value) is dropped by ``public_violations``.
PUBLIC_COLUMNS = (
    "release_id", "group_id", "previous_release_id", "previous_group_id", "release_a", "group_a", "release_b",
    "group_b", "first", "last", "before", "after", "kind", "rule", "size", "expectation", "column", "unexpected",
    "observed",
)


def public_violations(report: Report) -> pd.DataFrame:
    """``report``'s violations as they may be shown outside the ``private`` schema: one row per distinct
    combination of the ``PUBLIC_COLUMNS`` it has (a release, a group, the rule) with ``violations``, how many
    violation rows (individuals, groups or pairs, as the report counts them) point there; a single ``violations``
    row when it has none of them; no row for a report without violations. Nothing in it names an individual.
    O(rows log rows); only object columns holding other than text are mapped cell by cell."""
    frame = report.violations
    if frame is None or len(frame) == 0:
        return pd.DataFrame({"violations": pd.Series([], dtype="int64")})
    keep = [c for c in PUBLIC_COLUMNS if c in frame.columns]
    if not keep:
        return pd.DataFrame({"violations": [len(frame)]})
    cells = frame[keep].copy()
    for column in keep:  # a non-scalar cell (a tuple) is grouped as its text
        if cells[column].dtype == np.dtype(object) and pd.api.types.infer_dtype(cells[column]) != "string":
            cells[column] = cells[column].map(lambda v: v if v is None or np.isscalar(v) else str(v))
    grouped = cells.groupby(keep, dropna=False, sort=True).size().rename("violations").reset_index()
    return grouped.sort_values("violations", ascending=False, kind="stable", ignore_index=True)


def _failure(report: Report) -> str:
    """``name failed (n violation(s), first: {release, group, rule})`` for a NotPublishable message: it points at
    a release and a group, never at an individual (``public_violations``)."""
    violations = report.violations
    if violations is None or len(violations) == 0:
        return f"{report.name} failed"
    first = public_violations(report).drop(columns="violations").head(1)
    where = {k: (v.item() if hasattr(v, "item") else v) for k, v in first.iloc[0].items()} if first.shape[1] else {}
    return f"{report.name} failed ({len(violations)} violation(s)" + (f", first: {where})" if where else ")")


def record_published(store: ReleaseStore, df: pd.DataFrame, attributes: Sequence[str]) -> dict:
    """Record, as the next release, a release the organisation published before it used this tool, as it was:
    the projection of ``df`` (the table as it was then, every column of the spec) on ``attributes``, ungeneralised.

    Contract. ``attributes`` names the published columns: quasi-identifiers, non-identifiers and the sensitive
    column. Each named quasi-identifier ``A`` is published as its value (label = the value, ``A__lo == A__hi`` =
    its rank, or the number); the others are null, as in any release that does not publish them; a non-identifier
    or the sensitive column is its value when named, null otherwise (xy_privacy's ``publish_sensitive: false``
    publishes a null sensitive column the same way). ``group_id`` is null: the rows form no group. The manifest
    row says ``model = "recorded"`` (``RECORDED``: not protected by any model), ``params = {"published":
    attributes}``, ``attributes`` = the named quasi-identifiers, empty ``checks`` and ``utility``: no model ran
    and no judge ran, there is nothing to refuse, it is already public. The snapshot is kept privately like any
    release's, so the judge of a later release knows who the recorded rows are, and the private state frame
    ``recorded`` (the published columns) marks the release as recorded for the judge (``core.models.recorded``).

    Later releases of the spec's model read it through ``PreviousRelease.earlier`` and are judged against it: the
    model's guarantee over every release, recorded ones included; the attacks for what the later releases add
    to what the recorded ones disclose alone (``recorded.discount_recorded``). Recording is therefore refused (SpecError) unless the spec's model reads every earlier release
    (``ModelDescriptor.reads == "all"``, e.g. ``xy_privacy``), and (StoreError) once a release published by a
    model is in the store: recorded releases come first. SpecError for a name that is not a column of the spec
    (the id is never published), SnapshotError for a snapshot the spec refuses (``stage``). Staging and
    publication run under one lock (``store.session()``); the publication is one transaction, so a failure leaves
    at most a staged, unpublished snapshot, replaced by the next release. Recording the same rows and attributes
    again publishes nothing (``outcome`` "unchanged"). Returns ``{"release_id", "outcome": "recorded" |
    "unchanged", "model", "rows", "attributes"}``.
    """
    spec = store.spec
    model = models.descriptor(spec.model.name)
    if model.reads != "all":
        readers = [n for n in models.names() if models.descriptor(n).reads == "all"]
        raise SpecError(f"model.name: model {spec.model.name} reads only {model.reads!r} of the earlier releases, so "
                        f"it could not take a recorded release into account; recording needs a model that reads "
                        f"every earlier release ({readers})")
    columns = [*spec.quasi_identifiers, *spec.non_identifiers, spec.sensitive]
    unknown = [a for a in attributes if a not in columns]
    if unknown or not attributes:
        raise SpecError(f"attributes {list(unknown or attributes)}: a recorded release publishes columns of spec "
                        f"{spec.name!r} ({columns}; never the id {spec.id!r}), at least one")
    named = set(attributes)
    qis = tuple(a for a in spec.quasi_identifiers if a in named)
    with store.session():
        manifest = store.manifest()
        by_model = manifest[manifest["model"] != RECORDED]
        if len(by_model):
            raise StoreError(f"{store.path}: release {int(by_model['release_id'].iloc[0])} was published by model "
                             f"{by_model['model'].iloc[0]}; a release published before this tool is recorded before "
                             "the first release the tool publishes")
        if len(manifest):
            last = manifest.iloc[-1]
            stored = store.snapshot(int(last["release_id"]))
            if (list(last["params"].get("published", [])) == list(attributes) and stored is not None
                    and frame_digest(validate_snapshot(df, spec)) == frame_digest(stored)):
                return {"release_id": int(last["release_id"]), "outcome": "unchanged", "model": RECORDED,
                        "rows": int(last["rows"]), "attributes": list(attributes)}
        release_id = next_release_id(store)
        stage(store, release_id, df)
        snapshot = staged_snapshot(store, release_id)
        bound = store.bound_spec(snapshot)
        order = snapshot.reset_index(drop=True)
        table = pd.DataFrame({"group_id": pd.array([pd.NA] * len(order), dtype="Int64")})
        for name, qi in bound.quasi_identifiers.items():
            if name not in named:
                table[name], table[f"{name}__lo"], table[f"{name}__hi"] = None, np.nan, np.nan
            else:
                values = qi_values(order[name], bound, name)  # a number, or a categorical value's leaf rank
                label = interval_labels(values, values) if qi.numeric else order[name].astype(str)
                table[name], table[f"{name}__lo"], table[f"{name}__hi"] = label, values, values
        for name in [*spec.non_identifiers, spec.sensitive]:
            table[name] = order[name] if name in named else None
        release = Release(
            table=table,
            hosting=pd.DataFrame({spec.id: order[spec.id], "group_id": table["group_id"]}),
            counterfeits=pd.DataFrame({"group_id": pd.Series(dtype=np.int64), "count": pd.Series(dtype=np.int64)}),
            model=RECORDED, params={"published": list(attributes)}, attributes=qis,
            state={RECORDED: pd.DataFrame({"published": list(attributes)})},
        )
        store.publish(release_id, release, {}, {})
    return {"release_id": release_id, "outcome": "recorded", "model": RECORDED, "rows": len(table),
            "attributes": list(attributes)}
