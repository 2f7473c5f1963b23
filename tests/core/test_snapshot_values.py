"""Issue #11 item 4: non-finite numbers in a numeric quasi-identifier are refused by ``validate_snapshot``, naming
the column and the row's id, whatever the snapshot's format delivered (a float, a text spelling read from CSV)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from dagster_privrelease.core.spec import column_kind, parse_spec, validate_snapshot
from dagster_privrelease.errors import SnapshotError

SPEC = parse_spec({
    "name": "clinic", "id": "pid", "sensitive": "disease",
    "quasi_identifiers": {"age": {"type": "numeric", "min_width": 1}, "sex": {"type": "categorical"}},
    "model": {"name": "k_anonymity", "k": 2},
})


def rows(age: list) -> pd.DataFrame:
    return pd.DataFrame({"pid": [11, 12, 13], "age": age, "sex": ["F", "M", "F"], "disease": ["flu", "hiv", "flu"]})


@pytest.mark.parametrize(("age", "message"), [
    ([30.0, np.inf, 40.0], r"column 'age': non-finite value \(inf or -inf\) in row 2; .*finite"),
    ([30.0, 35.0, -np.inf], r"column 'age': non-finite value \(inf or -inf\) in row 3;"),
    (["30", "inf", "40"], r"column 'age': non-finite value \(inf or -inf\) in row 2;"),  # text, as a Parquet may hold
    ([30.0, np.nan, 40.0], r"column 'age': null value in row 2;"),
    (["30", "nan", "40"], r"column 'age': non-numeric value in row 2;"),
])
def test_non_finite_numbers_are_refused_with_the_column_and_the_row(age, message):
    with pytest.raises(SnapshotError, match=message):
        validate_snapshot(rows(age), SPEC)


def test_infinity_read_from_a_csv_is_refused():
    """``pandas.read_csv`` reads ``inf`` as a float: the case of the issue (published, with numpy warning)."""
    frame = pd.read_csv(io.StringIO("pid,age,sex,disease\n1,30,F,flu\n2,inf,M,hiv\n3,-Infinity,F,flu\n"))
    with pytest.raises(SnapshotError, match=r"'age': non-finite value \(inf or -inf\) in rows 2, 3; .*set a finite age"):
        validate_snapshot(frame, SPEC)
    assert len(validate_snapshot(frame[frame["pid"] == 1], SPEC)) == 1


def test_column_kind_is_the_kind_of_value_before_normalisation():
    kinds = {
        "text": pd.Series(["F", "M"]), "integer": pd.Series([0, 1]), "float": pd.Series([1.5, None]),
        "boolean": pd.Series([True, False]), "mixed": pd.Series(["F", 1], dtype=object),
    }
    for kind, values in kinds.items():
        assert column_kind(values) == kind, kind
    assert column_kind(pd.Series(pd.Categorical(["F", "M"]))) == "text"  # a Parquet dictionary column
    assert column_kind(pd.Series([1, None], dtype="Int64")) == "integer"
