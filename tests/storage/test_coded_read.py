"""The judge's window reads text as categoricals (issue #12's memory): the same rows and values as the plain read,
and the kernels that read them (``encoding``, ``grouping.qi_groups``) give what they give on the plain text."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pandas.testing as pdt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.core import encoding, grouping
from dagster_privrelease.core.judge.history import History
from dagster_privrelease.storage import read
from tests.budget import examples

WORDS = ["", "a", "b", "B", "flu", "hiv", "None", "nan", "é"]

text_cells = st.one_of(st.none(), st.sampled_from(WORDS))
rows = st.lists(st.tuples(st.integers(1, 3), text_cells, text_cells, st.one_of(st.none(), st.integers(-5, 5)),
                          st.integers(0, 3)), max_size=40)


def _store(published: list[tuple], candidate: list[tuple]) -> duckdb.DuckDBPyConnection:
    """An in-memory store with a published table (releases 1..3) and a candidate table (release 4) of the
    window's kinds of columns: ids, text with nulls, a nullable integer, an integer bound."""
    con = duckdb.connect()
    con.execute("CREATE SCHEMA p")
    for name, data in (("rel", published), ("cand", candidate)):
        con.execute(f"CREATE TABLE p.{name} (release_id BIGINT, label VARCHAR, value VARCHAR, n BIGINT, "
                    "a__lo BIGINT)")
        if data:
            con.executemany(f"INSERT INTO p.{name} VALUES (?, ?, ?, ?, ?)", data)
    return con


@settings(max_examples=examples(60), deadline=None)
@given(rows, rows, st.integers(1, 7))
def test_the_coded_read_holds_the_plain_reads_values(published, candidate, batch):
    candidate = [(4, *r[1:]) for r in candidate]
    con = _store(published, candidate)
    plain = read._rows_upto(con, "p.rel", 1, 3, "p.cand", 4, coded=False)
    old = read._BATCH_ROWS
    read._BATCH_ROWS = batch  # several batches, each with its own dictionary
    try:
        coded = read._rows_upto(con, "p.rel", 1, 3, "p.cand", 4, coded=True)
    finally:
        read._BATCH_ROWS = old
    for name in ("label", "value"):
        assert isinstance(coded[name].dtype, pd.CategoricalDtype)
        categories = list(coded[name].cat.categories)
        assert categories == sorted(categories), "categories sort as the text does"
        assert set(categories) == set(plain[name].dropna())
    if len(plain):
        pdt.assert_frame_equal(coded.apply(encoding.plain_text), plain, check_exact=True)
        for name in ("label", "value"):  # sorting by the codes orders the rows as sorting the text does
            pdt.assert_series_equal(coded[name].sort_values(kind="stable").pipe(encoding.plain_text),
                                    plain[name].sort_values(kind="stable"))
    else:
        assert list(coded.columns) == list(plain.columns)


def test_state_tables_are_read_as_plain_text():
    con = _store([(1, "x", "y", 1, 0)], [])
    con.execute("CREATE SCHEMA private")
    con.execute("CREATE TABLE private.state_s AS SELECT * FROM p.rel")
    frame = read._rows_upto(con, "private.state_s", 1, 1, None, None)
    assert frame["label"].dtype == object and frame["label"].tolist() == ["x"]


@settings(max_examples=examples(80), deadline=None)
@given(st.lists(text_cells, max_size=60), st.lists(st.sampled_from(WORDS), max_size=5, unique=True))
def test_codes_of_a_categorical_are_those_of_its_text(cells, domain):
    text = pd.Series(cells, dtype=object)
    coded = pd.Series(pd.Categorical(cells, categories=sorted({c for c in cells if c is not None})))
    assert encoding.codes_in(coded, domain).tolist() == encoding.codes_in(text, domain).tolist()
    codes, vocabulary = encoding.value_codes(coded, domain)
    expected, expected_vocabulary = encoding.value_codes(text, domain)
    assert vocabulary == expected_vocabulary and codes.tolist() == expected.tolist()
    pdt.assert_series_equal(encoding.plain_text(coded), text)


@pytest.mark.parametrize("null_label", [False, True])
def test_qi_groups_name_groups_with_the_plain_labels(null_label):
    rng = np.random.default_rng(3)
    n = 50
    table = pd.DataFrame({
        "release_id": rng.integers(1, 3, n), "group_id": rng.integers(1, 6, n),
        "sex": rng.choice(["F", "M", "*"], n).astype(object), "sex__lo": rng.integers(0, 2, n),
        "sex__hi": rng.integers(0, 2, n), "disease": rng.choice(["flu", "hiv"], n).astype(object),
    })
    if null_label:
        table.loc[::3, "sex"] = None
    coded = table.assign(sex=table["sex"].astype("category"), disease=table["disease"].astype("category"))
    index, groups = grouping.qi_groups(table)
    coded_index, coded_groups = grouping.qi_groups(coded)
    assert index.tolist() == coded_index.tolist()
    pdt.assert_frame_equal(coded_groups, groups, check_exact=True)


def assert_same_judgement(found: History, expected: History) -> None:
    """Every verifier and attack reports the same on both histories: names, verdicts, summaries, violations."""
    from dagster_privrelease.core.judge.run import attack_history, verify_history

    for reports, wanted in ((verify_history(found), verify_history(expected)),
                            (attack_history(found), attack_history(expected))):
        assert [r.name for r in reports] == [r.name for r in wanted]
        for a, b in zip(reports, wanted, strict=True):
            assert a.ok == b.ok and a.summary == b.summary, a.name
            pdt.assert_frame_equal(a.violations, b.violations, check_exact=True)


@pytest.mark.parametrize("case", ["l_diversity", "m_invariance", "m_distinct", "sequential_l_diversity"])
def test_the_judge_reports_the_same_on_a_coded_history(tmp_path, monkeypatch, case):
    """Every verifier and attack of each builtin model (the window test's streams) reports the same, dtypes
    included, on the history read with categorical text as on the history read as plain text."""
    from dagster_privrelease.core.judge.verifiers.single import k_anonymity
    from tests.test_judge_window import CASES, staged

    attributes = CASES[case][2]
    store, n = staged(tmp_path / "c.duckdb", case)
    coded = store.history(candidate=n)
    rows_upto = read._rows_upto
    monkeypatch.setattr(read, "_rows_upto", lambda *args, **kwargs: rows_upto(*args, **{**kwargs, "coded": False}))
    plain = store.history(candidate=n)
    assert any(isinstance(t, pd.CategoricalDtype) for t in coded.releases.dtypes)
    assert not any(isinstance(t, pd.CategoricalDtype) for t in plain.releases.dtypes)
    assert_same_judgement(coded, plain)
    strict = [k_anonymity(h.releases, 10**6) for h in (coded, plain)]  # every group violates: named by its labels
    assert len(strict[1].violations) and set(attributes[-1] if attributes else ["sex"]) <= set(strict[1].violations)
    pdt.assert_frame_equal(strict[0].violations, strict[1].violations, check_exact=True)


@pytest.mark.parametrize("case", ["l_diversity", "m_invariance", "m_distinct", "sequential_l_diversity"])
def test_the_judge_reports_the_same_on_narrowed_bounds(tmp_path, monkeypatch, case):
    """The window's integer bounds read as int16 (``read._narrowed``) give every verifier and attack of each
    builtin model the reports the 8-byte bounds give, violations and their dtypes included."""
    from tests.test_judge_window import staged

    store, n = staged(tmp_path / "c.duckdb", case)
    narrowed = store.history(candidate=n)
    monkeypatch.setattr(read, "_narrowed", lambda column: column)
    wide = store.history(candidate=n)
    bounds = [c for c in wide.releases.columns if c.endswith(("__lo", "__hi"))]
    assert bounds
    for c in bounds:  # leaf ranks: int16; the bounds of a vertical release (nulls) stay float64
        assert narrowed.releases[c].dtype == (np.int16 if wide.releases[c].dtype == np.int64
                                              else wide.releases[c].dtype), c
    pdt.assert_frame_equal(narrowed.releases, wide.releases, check_dtype=False, check_exact=True)
    assert_same_judgement(narrowed, wide)


@pytest.mark.parametrize(("values", "kind"), [
    ([0, 5, 8191, -8191], np.int16),
    ([0, 8192], np.int32),
    ([-(2**29 - 1), 3], np.int32),
    ([0, 2**29], np.int64),
    ([2**40], np.int64),
])
def test_narrowed_keeps_the_values_in_the_narrowest_safe_width(values, kind):
    column = pd.Series(values, dtype=np.int64, name="a__lo", index=range(10, 10 + len(values)))
    out = read._narrowed(column)
    assert out.dtype == kind
    pdt.assert_series_equal(out, column, check_dtype=False, check_exact=True)


@pytest.mark.parametrize("column", [pd.Series([1.0, np.nan]), pd.Series([1.5, 2.0]), pd.Series([], dtype=np.int64),
                                    pd.Series([1, None], dtype="Int64"), pd.Series([1, 2], dtype=np.int16)])
def test_narrowed_leaves_floats_nulls_and_narrow_columns_alone(column):
    assert read._narrowed(column) is column
