"""Great Expectations suites on hand-written release tables (independent of any model's output)."""

import pandas as pd

from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.orchestration.expectations import validate_release

SNAPSHOT = pd.DataFrame({"id": [1, 2, 3, 4], "age": [20.0, 21.0, 30.0, 34.0], "sex": ["F", "M", "F", "F"],
                         "visits": [1, 2, 3, 4], "disease": ["flu", "gastritis", "flu", "gastritis"]})
SPEC = parse_spec({
    "name": "patients",
    "id": "id",
    "sensitive": {"name": "disease", "values": ["flu", "gastritis"]},
    "quasi_identifiers": {
        "age": {"type": "numeric", "min_width": 1},
        "sex": {"type": "categorical", "hierarchy": {"Any": ["F", "M"]}},
    },
    "non_identifiers": ["visits"],
    "model": {"name": "k_anonymity", "k": 2},
}).bind(SNAPSHOT)
ATTRS = ("age", "sex")


def _release() -> pd.DataFrame:
    """Groups {1, 2} and {3, 4}: ages [20, 21] and [30, 34], sexes Any (ranks 0..1) and F (rank 0)."""
    return pd.DataFrame({
        "group_id": [0, 0, 1, 1],
        "age": ["[20, 21]", "[20, 21]", "[30, 34]", "[30, 34]"],
        "age__lo": [20.0, 20.0, 30.0, 30.0], "age__hi": [21.0, 21.0, 34.0, 34.0],
        "sex": ["Any", "Any", "F", "F"], "sex__lo": [0, 0, 0, 0], "sex__hi": [1, 1, 0, 0],
        "visits": [1, 2, 3, 4], "disease": ["flu", "gastritis", "flu", "gastritis"],
    })


def _broken(report) -> set[tuple[str, str]]:
    return set(zip(report.violations["expectation"], report.violations["column"], strict=True))


def test_a_correct_release_passes():
    report = validate_release(_release(), SPEC, SNAPSHOT, ATTRS)
    assert report.ok and report.summary["failed"] == 0 and report.summary["expectations"] > 8


def test_a_published_identifier_fails():
    report = validate_release(_release().assign(id=[1, 2, 3, 4]), SPEC, SNAPSHOT, ATTRS)
    assert not report.ok
    assert _broken(report) == {("expect_table_columns_to_match_set", "(table)")}
    assert "'id'" in report.violations["observed"].iloc[0]


def test_reversed_and_out_of_domain_bounds_fail():
    table = _release()
    table.loc[0, "age__lo"] = 25.0  # above its upper bound 21
    table.loc[2, "sex__hi"] = 2  # no leaf of rank 2
    table.loc[3, "age__hi"] = 36.0  # above the snapshot's max age 34 + min_width 1
    report = validate_release(table, SPEC, SNAPSHOT, ATTRS)
    assert _broken(report) == {
        ("expect_column_pair_values_a_to_be_greater_than_b", "age__hi, age__lo"),
        ("expect_column_values_to_be_between", "sex__hi"),
        ("expect_column_values_to_be_between", "age__hi"),
    }


def test_a_sensitive_value_outside_the_domain_fails():
    report = validate_release(_release().assign(disease=["flu", "gastritis", "flu", "cancer"]), SPEC, SNAPSHOT, ATTRS)
    assert _broken(report) == {("expect_column_values_to_be_in_set", "disease")}
    assert "cancer" in report.violations["observed"].iloc[0]
