"""Issue #11 item 3: a column whose kind of value changes between releases is refused (StoreError naming the
column, its old and new type and what to do), before anything is staged; the benign cases stay allowed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dagster_privrelease.errors import StoreError

from .conftest import publish, snapshot


def drifted(**columns) -> pd.DataFrame:
    rows = snapshot(range(10, 20), seed=3)
    for name, change in columns.items():
        rows[name] = change(rows[name])
    return rows


@pytest.mark.parametrize(("columns", "message"), [
    ({"sex": lambda s: np.where(s == "F", 0, 1)},  # the Parquet: sex became 0/1
     r"type drift in column 'sex' \(categorical quasi-identifier\): it held text values .* holds integer values "
     r"now; .*new values beside the earlier ones\. Give sex its earlier type \(text\)"),
    ({"age": lambda s: s.astype(str)},  # a numeric age stored as text
     r"type drift in column 'age' \(numeric quasi-identifier\): it held integer values .* holds text values now"
     r"; .*Give age its earlier type \(integer\)"),
    ({"age": lambda s: s + 0.5},
     r"column 'age' \(numeric quasi-identifier\): it held integer values .* float values now"),
    ({"disease": lambda s: pd.Series(pd.factorize(s)[0])},
     r"type drift in column 'disease' \(sensitive column\): it held text values .* integer values now"),
    ({"sex": lambda s: s == "F"},
     r"column 'sex' \(categorical quasi-identifier\): it held text values .* boolean values now"),
])
def test_a_column_whose_type_changed_is_refused(store, columns, message):
    publish(store, 1, snapshot(range(10)))
    with pytest.raises(StoreError, match=message):
        store.stage_snapshot(2, drifted(**columns))
    assert store.snapshot(2) is None and store.release_ids() == [1]  # nothing staged
    assert len(store.stage_snapshot(2, drifted())) == 10  # the same rows with their earlier types: accepted


def test_a_categorical_of_integers_read_as_floats_is_refused(store):
    """``1`` and ``1.0`` are two leaves of a flat taxonomy: integers that arrive as whole floats are not benign
    for a categorical (they are for a numeric quasi-identifier, below)."""
    first = snapshot(range(10)).assign(sex=lambda f: np.where(f["sex"] == "F", 1, 2))
    publish(store, 1, first)
    with pytest.raises(StoreError, match=r"'sex' \(categorical quasi-identifier\): it held integer .* float"):
        store.stage_snapshot(2, snapshot(range(10, 20)).assign(sex=1.0))


def test_benign_changes_of_type_are_accepted(store):
    publish(store, 1, snapshot(range(10)))
    whole = drifted(age=lambda s: s.astype(np.float64))  # integers read as floats (e.g. a column that had a null)
    assert len(store.stage_snapshot(2, whole)) == 10
    store.discard(2)
    categories = drifted(sex=lambda s: s.astype("category"), disease=lambda s: s.astype("string"))
    assert len(store.stage_snapshot(2, categories)) == 10  # a Parquet dictionary column is still text
    store.discard(2)
    holes = drifted()
    holes["visits"] = holes["visits"].where(holes["pid"] != 14)  # a non-identifier: its SQL type is compared
    assert store.stage_snapshot(2, holes)["visits"].isna().sum() == 1


def test_the_kinds_are_recorded_with_the_first_release(store):
    publish(store, 1, snapshot(range(10)).assign(age=lambda f: f["age"].astype(np.float64)))
    with store.connect() as con:
        kinds = dict(con.execute("SELECT column_name, kind FROM private.columns").fetchall())
    assert kinds == {"pid": None, "age": "float", "sex": "text", "region": "text", "visits": None,
                     "disease": "text"}
    assert len(store.stage_snapshot(2, drifted())) == 10  # float recorded, integers now: widening, accepted


def test_a_replaced_first_snapshot_records_its_own_kinds(store):
    """A first snapshot staged but never published (its release was refused) binds no type: the corrected
    snapshot that replaces it records its own, so a refused first release never changes what the next does."""
    store.stage_snapshot(1, snapshot(range(10)).assign(sex=lambda f: np.where(f["sex"] == "F", 0, 1)))
    assert len(store.stage_snapshot(1, snapshot(range(10, 20)))) == 10
    with pytest.raises(StoreError, match=r"'sex' .*held text values"):
        store.stage_snapshot(2, drifted(sex=lambda s: np.where(s == "F", 0, 1)))


def test_a_store_named_like_its_schemas_is_refused(tmp_path):
    """Found while testing faults: ``published.duckdb`` made every query fail with DuckDB's binder error."""
    from dagster_privrelease.core.spec import parse_spec
    from dagster_privrelease.storage import ReleaseStore

    from .conftest import SPEC

    for name in ("published.duckdb", "private.db"):
        with pytest.raises(StoreError, match=rf"cannot be named {name}: .*e\.g\. clinic_{name.split('.')[0]}\."):
            ReleaseStore(tmp_path / name, parse_spec(SPEC))
    assert not list(tmp_path.iterdir())
