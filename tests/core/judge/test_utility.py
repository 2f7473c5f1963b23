"""Utility metrics on hand-computed tiny tables (exact values) and a counterfeit-corrected query estimate."""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.core.encoding import encode, sensitive_codes
from dagster_privrelease.core.grouping import qi_classes
from dagster_privrelease.core.judge import utility
from dagster_privrelease.core.models.kernels.compiled import references
from dagster_privrelease.core.spec import parse_spec
from tests.budget import examples
from tests.fixtures import xiao_tao

from .test_fast_judge import random_history


def _spec():
    raw = {
        "name": "tiny", "id": "id",
        "sensitive": {"name": "disease", "values": ["a", "b"]},
        "quasi_identifiers": {"age": {"type": "numeric"},
                              "sex": {"type": "categorical", "hierarchy": {"Any": {"M": ["m"], "F": ["f", "x"]}}}},
        "model": {"name": "l_diversity", "l": 2},
    }
    return parse_spec(raw).bind(_snapshot())


def _snapshot():
    return pd.DataFrame({"id": [1, 2, 3, 4], "age": [20.0, 30.0, 40.0, 40.0], "sex": ["f", "x", "m", "m"],
                         "disease": ["a", "b", "a", "a"]})


def _table(counterfeit: bool = False):
    """Group 1: age [20, 30], sex F (leaf ranks 1..2), diseases a, b (+ a counterfeit a); group 2: age 40, sex m."""
    rows = [(1, 20, 30, "F", 1, 2, "a"), (1, 20, 30, "F", 1, 2, "b"), (2, 40, 40, "m", 0, 0, "a"),
            (2, 40, 40, "m", 0, 0, "a")]
    if counterfeit:
        rows.append((1, 20, 30, "F", 1, 2, "a"))
    frame = pd.DataFrame(rows, columns=["group_id", "age__lo", "age__hi", "sex", "sex__lo", "sex__hi", "disease"])
    frame.insert(1, "age", [f"[{a}, {b}]" for a, b in zip(frame["age__lo"], frame["age__hi"], strict=True)])
    return frame.astype({"age__lo": float, "age__hi": float, "sex__lo": float, "sex__hi": float})


def test_loss_metric_exact():
    # rows 1-2: age 10/20, sex (2 - 1)/(3 - 1); rows 3-4: 0. Mean over 8 entries: (0.5 + 0.5) * 2 / 8.
    assert utility.loss_metric(_table(), _spec()) == pytest.approx(0.25)
    assert utility.loss_metric(_table(), _spec(), attributes=("age",)) == pytest.approx(0.25)
    assert utility.loss_metric(_table(), _spec(), domains={"age": 40}) == pytest.approx((0.25 + 0.5) * 2 / 8)


def test_loss_metric_bounds_and_suppressed_entries():
    spec = _spec()
    exact = _table().assign(age__hi=lambda f: f["age__lo"], sex__lo=[1.0, 2.0, 0.0, 0.0],
                            sex__hi=[1.0, 2.0, 0.0, 0.0])
    assert utility.loss_metric(exact, spec) == 0.0
    full = _table().assign(age__lo=20.0, age__hi=40.0, sex__lo=0.0, sex__hi=2.0)
    assert utility.loss_metric(full, spec) == 1.0
    # an attribute a (vertical) release leaves out is not averaged in (Shmueli-Tassa §6)
    no_sex = _table().assign(sex=None, sex__lo=np.nan, sex__hi=np.nan)
    assert utility.loss_metric(no_sex, spec) == pytest.approx(0.25)


def test_ncp_exact():
    # rows 1-2: (10/20 + 2/3) / 2 = 7/12; rows 3-4: 0
    assert utility.ncp(_table(), _spec()) == pytest.approx(7 / 24)
    assert utility.ncp(_table(), _spec(), weights={"age": 1.0, "sex": 0.0}) == pytest.approx(0.25)


def test_entropy_measure_exact():
    # age [20, 30] holds 20 and 30 (1/4 each): 1 bit; sex F holds f and x (1/4 each): 1 bit; group 2: 0 bits.
    assert utility.entropy_measure(_table(), _snapshot(), _spec()) == pytest.approx(0.5)


def test_discernibility_exact():
    assert utility.discernibility(_table(), _spec()) == 8.0  # 2^2 + 2^2
    assert utility.discernibility(_table(), _spec(), k=3) == 16.0  # both classes small: 4 * 2 + 4 * 2


def test_discernibility_non_homogeneous_classes_are_identical_boxes():
    table = _table().assign(group_id=pd.array([pd.NA] * 4, dtype="Int64"))
    assert utility.discernibility(table, _spec()) == 8.0


def test_kl_divergence_exact():
    # p = (1/4, 1/4, 1/2); p* = (1/16, 1/16, 1/2): rows 1-2 spread 1/4 over 2 ages x 2 sexes.
    assert utility.kl_divergence(_table(), _snapshot(), _spec()) == pytest.approx(math.log(2))


def test_counterfeit_corrected_query_estimate():
    """Xiao-Tao §5.2: group 1 has |QI*| = 3 with c3 = 1 counterfeit; query age in [20, 25], any sex, disease a:
    c1 = 5/10, c2 = 2/3, so (3 - 1) * 1/2 * 2/3 = 2/3 (without R(j) it would be 1)."""
    lo, hi = np.array([[20.0, 0.0, 0.0]]), np.array([[25.0, 2.0, 0.0]])
    counterfeits = pd.DataFrame({"group_id": [1], "count": [1]})
    spec = _spec()
    est = utility.query_estimate(_table(counterfeit=True), counterfeits, spec, lo, hi)
    assert est == pytest.approx([2 / 3])
    naive = utility.query_estimate(_table(counterfeit=True), counterfeits.iloc[:0], spec, lo, hi)
    assert naive == pytest.approx([1.0])
    assert utility.query_actual(_snapshot(), spec, lo, hi).tolist() == [1]


def test_random_queries_have_the_papers_range_length():
    spec = _spec()
    lo, hi = utility.random_queries(_snapshot(), spec, 0.1, 50, np.random.default_rng(3))
    frac = 0.1 ** (1 / 3)
    assert np.allclose(hi[:, 0] - lo[:, 0], 20 * frac)  # age domain 20..40
    assert (hi[:, 1] - lo[:, 1] + 1 == round(3 * frac)).all()  # 3 leaves
    assert (lo[:, 0] >= 20).all() and (hi[:, 0] <= 40).all()


def test_query_error_is_deterministic_and_zero_without_generalisation():
    snap = xiao_tao.table_1a()
    spec = xiao_tao.spec().bind(snap)
    table = xiao_tao.table_1b()
    none = xiao_tao.table_1b().iloc[:0][["group_id"]].assign(count=[])
    e1 = utility.query_error(table, snap, none, spec, rng=np.random.default_rng(7))
    e2 = utility.query_error(table, snap, none, spec, rng=np.random.default_rng(7))
    assert e1 == e2 and e1 > 0
    exact = pd.DataFrame({"group_id": np.arange(len(snap)), "age": snap["age"], "age__lo": snap["age"],
                          "age__hi": snap["age"], "zipcode": snap["zipcode"], "zipcode__lo": snap["zipcode"],
                          "zipcode__hi": snap["zipcode"], "disease": snap["disease"]})
    assert utility.query_error(exact, snap, none, spec, rng=np.random.default_rng(7)) == 0.0


def test_summarise_reports_the_manifest_figures():
    spec = xiao_tao.spec().bind(xiao_tao.table_2a())
    out = utility.summarise(xiao_tao.table_3a(), xiao_tao.table_3b(), spec, snapshot=xiao_tao.table_2a())
    assert set(out) == {"lm", "ncp", "discernibility", "query_error", "rows", "groups", "counterfeits"}
    assert (out["rows"], out["groups"], out["counterfeits"]) == (13.0, 6.0, 2.0)
    assert out["discernibility"] == 3 * 4 + 1 * 9 + 2 * 4 + 0  # groups of sizes 2, 2, 3, 2, 2, 2
    assert 0 < out["lm"] < 1 and not math.isnan(out["query_error"])
    assert math.isnan(utility.summarise(xiao_tao.table_3a(), xiao_tao.table_3b(), spec)["query_error"])


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.1, 0.5, 0.9]))
def test_query_actual_counts_the_tuples_inside_every_range(seed, theta):
    """``query_actual`` (distinct points with their multiplicity) against a loop over tuples and ranges."""
    history = random_history(seed)
    spec, snap = history.spec, history.snapshot(history.release_ids[-1])
    names = tuple(spec.quasi_identifiers)
    lo, hi = utility.random_queries(snap, spec, theta, 30, np.random.default_rng(seed), names)
    points = np.column_stack([encode(snap, spec, names), sensitive_codes(snap, spec)])
    expected = [sum(all(lo[q][k] <= p[k] <= hi[q][k] for k in range(points.shape[1])) for p in points)
                for q in range(len(lo))]
    assert utility.query_actual(snap, spec, lo, hi, names).tolist() == expected


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.1, 0.5, 0.9]))
def test_query_estimate_follows_xiao_tao_5_2(seed, theta):
    """``query_estimate`` against a loop over groups and queries written from Xiao-Tao §5.2: the sum over groups of
    (|QI*| - c3) * c1 * c2, c1 the share of the group's box inside the ranges, c2 the share of its rows whose
    sensitive value is inside."""
    history = random_history(seed)
    spec, last = history.spec, history.release_ids[-1]
    table, snap = history.release(last), history.snapshot(last)
    names = tuple(spec.quasi_identifiers)
    lo, hi = utility.random_queries(snap, spec, theta, 20, np.random.default_rng(seed), names)
    codes = sensitive_codes(table, spec)
    expected = []
    for q in range(len(lo)):
        total = 0.0
        for _, rows in table.groupby("group_id"):
            c1 = 1.0
            for k, a in enumerate(names):
                glo, ghi = rows[f"{a}__lo"].iloc[0], rows[f"{a}__hi"].iloc[0]
                discrete = not spec.quasi_identifiers[a].numeric
                extent = ghi - glo + (1 if discrete else 0)
                inside = min(ghi, hi[q][k]) - max(glo, lo[q][k]) + (1 if discrete else 0)
                c1 *= max(inside, 0) / extent if extent > 0 else float(lo[q][k] <= glo <= hi[q][k])
            mine = codes[rows.index.to_numpy()]
            c2 = np.mean((mine >= lo[q][-1]) & (mine <= hi[q][-1]))
            total += len(rows) * c1 * c2
        expected.append(total)
    got = utility.query_estimate(table, history.counterfeits.iloc[:0], spec, lo, hi, names)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


def _estimate_over_the_cube(table, counterfeits, spec, lo, hi, names):
    """``query_estimate`` as the direct product over the (queries, groups, attributes) array: the same §5.2
    operations per entry, c1 the product over the attributes in order, then the sum over groups; the fast path
    must give exactly these figures (it computes c1 per distinct interval and gathers it)."""
    classes, first, size = qi_classes(table, names, by_release=False)
    codes = sensitive_codes(table, spec)
    size = size.astype(np.float64)
    c3 = np.zeros(len(size))
    if len(counterfeits):
        gid = table["group_id"].to_numpy()[first]
        c3 = pd.Series(gid).map(counterfeits.groupby("group_id")["count"].sum()).fillna(0).to_numpy(np.float64)
    glo = np.column_stack([table[f"{a}__lo"].to_numpy(np.float64)[first] for a in names])
    ghi = np.column_stack([table[f"{a}__hi"].to_numpy(np.float64)[first] for a in names])
    discrete = np.array([not spec.quasi_identifiers[a].numeric for a in names])
    ext = np.where(discrete, ghi - glo + 1, ghi - glo)
    values = len(spec.sensitive_values)
    hist = np.zeros((len(size), values))
    np.add.at(hist, (classes[codes >= 0], codes[codes >= 0]), 1)
    cum = np.zeros((len(size), values + 1))
    cum[:, 1:] = np.cumsum(hist, axis=1)
    qlo, qhi = lo[:, None, :-1], hi[:, None, :-1]
    overlap = np.minimum(ghi, qhi) - np.maximum(glo, qlo)
    overlap = np.where(discrete, overlap + 1, overlap)
    point_in = (glo >= qlo) & (glo <= qhi)
    c1 = np.where(ext > 0, np.clip(overlap, 0, None) / np.where(ext > 0, ext, 1), point_in).prod(axis=2)
    vlo = np.clip(np.ceil(lo[:, -1]), 0, values).astype(np.int64)
    vhi = np.clip(np.floor(hi[:, -1]) + 1, 0, values).astype(np.int64)
    c2 = np.clip(cum[:, vhi] - cum[:, vlo], 0, None).T / size
    return ((size - c3) * c1 * c2).sum(axis=1)


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.1, 0.5, 0.9]))
def test_query_estimate_gives_exactly_the_figures_of_the_direct_product(seed, theta):
    """Same figures, bit for bit, as the (queries, groups, attributes) product: query_error's median does not move."""
    history = random_history(seed)
    spec, last = history.spec, history.release_ids[-1]
    table, snap = history.release(last), history.snapshot(last)
    names = tuple(spec.quasi_identifiers)
    lo, hi = utility.random_queries(snap, spec, theta, 25, np.random.default_rng(seed), names)
    counterfeits = history.counterfeits.iloc[:0]
    expected = _estimate_over_the_cube(table, counterfeits, spec, lo, hi, names)
    for numba_loaded in (False, True):  # the numpy reference of the terms, then their compiled pass
        with mock.patch.object(utility, "kernels_loaded", lambda loaded=numba_loaded: loaded):
            got = utility.query_estimate(table, counterfeits, spec, lo, hi, names)
        assert np.array_equal(got, expected)


@settings(max_examples=examples(20), deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_summarise_shares_the_classes_and_gives_each_metrics_own_figure(seed):
    """``summarise`` finds the QI classes once for the discernibility, the estimates and the groups: its figures
    are those of each metric computed alone, on random homogeneous releases."""
    history = random_history(seed)
    spec, last = history.spec, history.release_ids[-1]
    table, snap = history.release(last), history.snapshot(last)
    counterfeits = history.counterfeits[history.counterfeits["release_id"] == last].drop(columns="release_id")
    out = utility.summarise(table, counterfeits, spec, snapshot=snap)
    workload = spec.utility
    alone = utility.query_error(table, snap, counterfeits, spec, workload.selectivity, workload.queries)
    assert out["query_error"] == alone or (math.isnan(alone) and math.isnan(out["query_error"]))
    assert out["discernibility"] == utility.discernibility(table, spec)
    assert out["groups"] == table["group_id"].nunique()  # a homogeneous release: a class per group


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_compiled_estimate_terms_are_the_references_bit_for_bit(seed):
    """``_estimate_terms`` compiled against its numpy reference on random blocks: fractions with zeros and ones,
    repeated intervals, sensitive ranges empty, reversed or whole, counterfeits making a weight zero."""
    rng = np.random.default_rng(seed)
    q, g, d, u, v = (int(rng.integers(1, 7)), int(rng.integers(1, 60)), int(rng.integers(0, 5)),
                     int(rng.integers(1, 9)), int(rng.integers(1, 6)))
    fracs = np.where(rng.random((q, d * u)) < 0.3, rng.integers(0, 2, (q, d * u)), rng.random((q, d * u)))
    inverse = (rng.integers(0, u, (g, d)) + np.arange(d) * u).astype(np.int64)
    size = rng.integers(1, 9, g).astype(np.float64)
    weight = size - rng.integers(0, 2, g) * size
    cum = np.zeros((g, v + 1))
    cum[:, 1:] = np.cumsum(rng.integers(0, 3, (g, v)), axis=1)
    vlo, vhi = rng.integers(0, v + 1, q), rng.integers(0, v + 1, q)
    got, expected = np.full((q, g), np.nan), np.full((q, g), np.nan)
    utility._estimate_terms(fracs, inverse, weight, cum, vlo, vhi, size, got)
    with references():
        utility._estimate_terms(fracs, inverse, weight, cum, vlo, vhi, size, expected)
    assert np.array_equal(got, expected)
    if d:  # and the definition, entry by entry
        i, k = int(rng.integers(0, q)), int(rng.integers(0, g))
        share = max(cum[k, vhi[i]] - cum[k, vlo[i]], 0.0) / size[k]
        assert got[i, k] == pytest.approx(weight[k] * np.prod(fracs[i, inverse[k]]) * share)


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0, utility._BITSET_BUDGET]))
def test_count_inside_counts_rows_inside_every_range_with_nan_and_ties(seed, budget):
    """The rank look-up of ``query_actual``, by bitsets (the default budget) and byte by byte (budget 0), against
    the direct comparison of every row with every range: repeated rows (multiplicities up to a few hundred, so
    several bit planes), NaN (inside no range), ranges whose bounds fall on values, between them, outside the data
    or reversed."""
    rng = np.random.default_rng(seed)
    n, k, q = int(rng.integers(0, 400)), int(rng.integers(1, 4)), int(rng.integers(1, 12))
    rows = rng.integers(-2, 4, (n, k)).astype(np.float64) / 2
    rows[rng.random((n, k)) < 0.1] = np.nan
    lo = rng.integers(-6, 8, (q, k)) / 4
    hi = lo + rng.integers(-1, 8, (q, k)) / 4
    expected = ((rows[None] >= lo[:, None]) & (rows[None] <= hi[:, None])).all(axis=2).sum(axis=1)
    assert utility._count_inside(rows, lo, hi, budget).tolist() == expected.tolist()


def test_query_error_of_the_papers_table_is_pinned():
    """query_error of T*(2) = Table 3a, R(2) = Table 3b against T(2) = Table 2a for seed 0, as computed before
    the rank look-up of the exact answers and the per-interval c1 of the estimates (the same figures)."""
    args = (xiao_tao.table_3a(), xiao_tao.table_2a(), xiao_tao.table_3b())
    spec = xiao_tao.spec().bind(args[1])
    assert utility.query_error(*args, spec, 0.1, 200) == 0.33333333333333337
    assert utility.query_error(*args, spec, 0.5, 200) == 0.0991134066190735
    names = tuple(spec.quasi_identifiers)  # with R(2)'s counterfeits (c3) too, bit for bit
    lo, hi = utility.random_queries(xiao_tao.table_2a(), spec, 0.5, 100, np.random.default_rng(3), names)
    got = utility.query_estimate(args[0], args[2], spec, lo, hi, names)
    assert np.array_equal(got, _estimate_over_the_cube(args[0], args[2], spec, lo, hi, names))


def test_summarise_measures_the_query_error_on_the_spec_workload():
    """The spec's ``utility`` sets the workload: the figure is ``query_error`` at that selectivity and count."""
    import dataclasses

    from dagster_privrelease.core.spec import Workload

    snapshot, table, counterfeits = xiao_tao.table_2a(), xiao_tao.table_3a(), xiao_tao.table_3b()
    base = xiao_tao.spec().bind(snapshot)
    for selectivity, queries in ((0.1, 200), (0.6, 40)):
        spec = dataclasses.replace(base, utility=Workload(selectivity, queries))
        out = utility.summarise(table, counterfeits, spec, snapshot=snapshot)["query_error"]
        assert out == utility.query_error(table, snapshot, counterfeits, spec, selectivity, queries)
    wide = dataclasses.replace(base, utility=Workload(0.6, 40))
    assert utility.summarise(table, counterfeits, wide, snapshot=snapshot)["query_error"] != \
        utility.summarise(table, counterfeits, base, snapshot=snapshot)["query_error"]


def test_the_utility_summary_of_a_small_release_does_not_import_numba():
    """A process whose model ran no kernel (here none at all) summarises a release without importing numba: the
    estimates' compiled pass would not pay for the import (``utility._COMPILE_WORK``)."""
    import subprocess
    import sys

    code = ("import sys; from dagster_privrelease.core.judge import utility; from tests.fixtures import xiao_tao; "
            "spec = xiao_tao.spec().bind(xiao_tao.table_2a()); "
            "out = utility.summarise(xiao_tao.table_3a(), xiao_tao.table_3b(), spec, snapshot=xiao_tao.table_2a()); "
            "assert out['query_error'] == out['query_error'] and 'numba' not in sys.modules, sorted(sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
