"""Great Expectations suites on hand-written release tables (independent of any model's output), and the screen
(``screen_suite``) against ``release_suite`` validated as before it, on mutated tables."""

import itertools

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.orchestration.expectations import (
    _candidates,
    _validate,
    release_suite,
    screen_suite,
    validate_release,
)
from tests.budget import examples

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


# --- the screen: a pass of ``screen_suite`` is a pass of ``release_suite``, a failure defers to it -------------

def test_hi_below_the_domain_is_caught_by_the_order_in_the_screen():
    """The screen has no lower bound on ``A__hi``: ``A__hi >= A__lo >= low`` says it. The report is still
    ``release_suite``'s, naming both rules."""
    table = _release()
    table.loc[0, ["age__lo", "age__hi"]] = [20.0, 19.0]  # 19 < the snapshot's min age 20
    table.loc[1, ["sex__lo", "sex__hi"]] = [0, -1]  # no leaf of rank -1
    report = validate_release(table, SPEC, SNAPSHOT, ATTRS)
    assert _broken(report) == {
        ("expect_column_pair_values_a_to_be_greater_than_b", "age__hi, age__lo"),
        ("expect_column_values_to_be_between", "age__hi"),
        ("expect_column_pair_values_a_to_be_greater_than_b", "sex__hi, sex__lo"),
        ("expect_column_values_to_be_between", "sex__hi"),
    }
    assert not _screen_passes(table, SPEC)


def test_lo_above_the_domain_is_caught_by_the_order_in_the_screen():
    """A categorical ``A__lo`` has no upper bound in the screen: ``A__lo <= A__hi <= top`` says it."""
    table = _release()
    table.loc[2, "sex__lo"] = 2  # above sex__hi = 0 and above the last rank 1
    report = validate_release(table, SPEC, SNAPSHOT, ATTRS)
    assert _broken(report) == {
        ("expect_column_pair_values_a_to_be_greater_than_b", "sex__hi, sex__lo"),
        ("expect_column_values_to_be_between", "sex__lo"),
    }
    assert report.violations.set_index("column").loc["sex__lo", "unexpected"] == 1


def test_a_numeric_lo_above_the_snapshot_max_fails_even_when_below_top():
    """``A__lo`` in ``(max, max + min_width]`` breaks ``release_suite`` but not the order nor ``A__hi <= top``:
    the screen keeps ``max(A__lo) <= max``."""
    table = _release()
    table.loc[[2, 3], ["age__lo", "age__hi"]] = [34.5, 35.0]  # lo above the max 34, hi = top 35
    report = validate_release(table, SPEC, SNAPSHOT, ATTRS)
    assert _broken(report) == {("expect_column_values_to_be_between", "age__lo")}
    assert not _screen_passes(table, SPEC)


def test_what_the_screen_refuses_but_release_suite_accepts_passes():
    """Rows whose two bounds are null, and an empty release: ``release_suite`` ignores them (its rules skip
    nulls and hold on no rows); the screen fails (a null never compares, an empty column has no min), defers to
    it, and the report is its pass."""
    nulls = _release()
    nulls.loc[0, ["age__lo", "age__hi"]] = float("nan")
    for table in (nulls, _release().iloc[:0]):
        assert not _screen_passes(table, SPEC)
        report = validate_release(table, SPEC, SNAPSHOT, ATTRS)
        assert report.ok and report.summary == {"expectations": 10, "failed": 0} and report.violations.empty


def test_a_correct_release_passes_the_screen_twice():
    """A correct release passes on the screen alone, and the cached suites give the same report again."""
    assert _screen_passes(_release(), SPEC)
    first, again = (validate_release(_release(), SPEC, SNAPSHOT, ATTRS) for _ in range(2))
    assert first.ok and again.ok and first.summary == again.summary == {"expectations": 10, "failed": 0}


#: The same spec with ``min_width`` 0: the screen drops ``max(age__lo) <= max`` (then ``high == top``).
SPEC_NARROW = parse_spec({
    "name": "patients_narrow",
    "id": "id",
    "sensitive": {"name": "disease", "values": ["flu", "gastritis"]},
    "quasi_identifiers": {
        "age": {"type": "numeric", "min_width": 0},
        "sex": {"type": "categorical", "hierarchy": {"Any": ["F", "M"]}},
    },
    "non_identifiers": ["visits"],
    "model": {"name": "k_anonymity", "k": 2},
}).bind(SNAPSHOT)

#: Bound values around each domain edge: below, on and above them (age: snapshot 20..34, so top 35 with
#: min_width 1 and 34 with 0; sex: ranks 0..1). Null bounds: ``test_what_the_screen_refuses_but_release_suite_
#: accepts_passes`` and ``_mutated``.
_EDGES = [
    ("age", SPEC, [19.0, 20.0, 34.5, 35.0, 36.0]),
    ("age", SPEC_NARROW, [19.0, 20.0, 34.0, 34.5]),
    ("sex", SPEC, [-1, 0, 1, 2]),
]


@pytest.mark.parametrize(("name", "spec", "edges"), _EDGES, ids=["age, min_width 1", "age, min_width 0", "sex"])
def test_the_screen_agrees_with_release_suite_on_every_pair_of_bounds(name, spec, edges):
    """Every ``(A__lo, A__hi)`` of ``edges`` on a row of a correct release: the screen passes exactly when
    ``release_suite`` does (GE's verdicts, ``BOOLEAN_ONLY``)."""
    release, screen = _suites(spec)
    for lo, hi in itertools.product(edges, repeat=2):
        table = _release()
        table.loc[0, [f"{name}__lo", f"{name}__hi"]] = [lo, hi]
        assert _passes(table, screen) == _passes(table, release), (lo, hi)


#: Values a cell may take in a mutated release: in and out of each column's domain, null.
_CELLS = {
    "group_id": [0, 1, 7],
    "age": ["[20, 21]", None],
    "age__lo": [19.0, 20.0, 21.0, 30.0, 34.0, 34.5, 35.0, float("nan")],
    "age__hi": [19.0, 20.0, 21.0, 34.0, 34.5, 35.0, 36.0, float("nan")],
    "sex": ["Any", "F", None],
    "sex__lo": [-1, 0, 1, 2],
    "sex__hi": [-1, 0, 1, 2],
    "disease": ["flu", "gastritis", "cancer", None],
}


@st.composite
def _mutated(draw) -> pd.DataFrame:
    """A release of 0-6 rows drawn from the correct one, then up to 3 cells set to any value of ``_CELLS``, and
    now and then a column added or dropped (a checked one: GE then fails the expectations that read it)."""
    rows = draw(st.lists(st.integers(0, 3), max_size=6))
    table = _release().iloc[rows].reset_index(drop=True)
    for _ in range(draw(st.integers(0, 3)) if rows else 0):
        column = draw(st.sampled_from(sorted(_CELLS)))
        table.loc[draw(st.integers(0, len(rows) - 1)), column] = draw(st.sampled_from(_CELLS[column]))
    change = draw(st.sampled_from(["none"] * 6 + ["add id", "drop visits", "drop sex__hi"]))
    if change == "add id":
        table = table.assign(id=range(len(table)))
    elif change != "none":
        table = table.drop(columns=change.removeprefix("drop "))
    return table


def _reference(table: pd.DataFrame, spec) -> tuple[bool, list[tuple[str, dict, int]], int]:
    """``release_suite`` validated by GE as the check did before the screen: ``Batch.validate``, default result
    format. (success, [(expectation, kwargs, unexpected count) of each failure], expectations)."""
    result = _candidates().get_batch(batch_parameters={"dataframe": table}).validate(_suites(spec)[0])
    failed = [(r.expectation_config.type, r.expectation_config.kwargs, r.result.get("unexpected_count") or 0)
              for r in result.results if not r.success and r.expectation_config is not None]
    return bool(result.success), failed, len(result.results)


def _same_report(table: pd.DataFrame, spec) -> bool:
    """Assert that ``validate_release`` says what ``release_suite`` alone says (``_reference``): same verdict,
    the same failed expectations on the same columns with the same counts, and that the screen never passes
    where ``release_suite`` fails. Returns ``release_suite``'s verdict."""
    ok, failed, count = _reference(table, spec)
    report = validate_release(table, spec, SNAPSHOT, ATTRS)
    assert report.ok == ok and report.summary == {"expectations": count, "failed": len(failed)}
    assert list(report.violations["expectation"]) == [name for name, _, _ in failed]
    assert list(report.violations["column"]) == [
        ", ".join(kwargs[k] for k in ("column", "column_A", "column_B") if kwargs.get(k)) or "(table)"
        for _, kwargs, _ in failed
    ]
    assert list(report.violations["unexpected"]) == [int(n) for _, _, n in failed]
    assert ok or not _screen_passes(table, spec)
    return ok


#: The other changes of one cell of a correct release (a null label, a sensitive value outside the domain or
#: null, a group id no other row has), and of its columns.
_CHANGES = [
    ("group_id", 7), ("age", None), ("sex", None), ("disease", "cancer"), ("disease", None),
    ("add id", None), ("drop visits", None), ("drop sex__hi", None), ("drop age", None),
]


def test_every_change_of_one_cell_or_column_gets_release_suites_report():
    """Each change of ``_CHANGES``: ``validate_release``'s report is ``release_suite``'s, and the screen passes
    exactly when ``release_suite`` does (no bound is null)."""
    for change, value in _CHANGES:
        table = _release()
        if change == "add id":
            table = table.assign(id=[1, 2, 3, 4])
        elif change.startswith("drop "):
            table = table.drop(columns=change.removeprefix("drop "))
        else:
            table.loc[0, change] = value
        assert _same_report(table, SPEC) == _screen_passes(table, SPEC), (change, value)


@settings(max_examples=examples(10), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(table=_mutated(), narrow=st.booleans())
def test_the_report_is_release_suites_report(table, narrow):
    """On releases changed in several cells at once, ``validate_release``'s report is ``release_suite``'s."""
    _same_report(table, SPEC_NARROW if narrow else SPEC)


def _screen_passes(table: pd.DataFrame, spec) -> bool:
    return _passes(table, _suites(spec)[1])


def _passes(table: pd.DataFrame, suite) -> bool:
    """Whether GE passes ``suite`` on ``table`` (``BOOLEAN_ONLY``)."""
    return bool(_validate(suite, table, "BOOLEAN_ONLY").success)


_SUITES: dict[str, tuple] = {}


def _suites(spec) -> tuple:
    """``(release_suite, screen_suite)`` of ``spec`` on ``SNAPSHOT``, built once per test session."""
    if spec.name not in _SUITES:
        _SUITES[spec.name] = (release_suite(spec, SNAPSHOT, ATTRS), screen_suite(spec, SNAPSHOT, ATTRS))
    return _SUITES[spec.name]


def test_the_suites_are_built_once_and_every_release_is_held_to_its_own_snapshots_bounds():
    """The suites are cached per table with the snapshot's bounds as suite parameters: a release judged after
    another one of a wider snapshot is still held to its own snapshot's domain, and the suites are not built
    again for it."""
    from dagster_privrelease.orchestration import expectations

    wide = SNAPSHOT.assign(age=[20.0, 21.0, 30.0, 60.0])
    table = _release()
    table.loc[[2, 3], "age__hi"] = 50.0  # inside [20, 61] of ``wide``, above 35 of ``SNAPSHOT``
    assert validate_release(table, SPEC, wide, ATTRS).ok
    built = expectations._suites.cache_info().misses
    report = validate_release(table, SPEC, SNAPSHOT, ATTRS)
    assert expectations._suites.cache_info().misses == built
    assert _broken(report) == {("expect_column_values_to_be_between", "age__hi")}
    assert report.violations["unexpected"].tolist() == [2]
    assert validate_release(_release(), SPEC, SNAPSHOT, ATTRS).ok
