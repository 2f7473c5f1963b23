"""The fast judge against the definitions: naive references written here from the papers (loops over individuals,
releases and groups) on random small histories, and incremental runs (release by release, through the judge's
memo) against runs from scratch."""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.bench_judge import history_of
from dagster_privrelease.core import intervals
from dagster_privrelease.core.encoding import encode
from dagster_privrelease.core.grouping import pack_bits, unpack_bits
from dagster_privrelease.core.intervals import contained_union
from dagster_privrelease.core.judge import attacks
from dagster_privrelease.core.judge.history import Bound, History
from dagster_privrelease.core.release import build_release
from dagster_privrelease.core.spec import Spec, parse_spec
from tests.budget import examples

VALUES = ("v0", "v1", "v2", "v3", "v4")
SEEDS = st.integers(0, 2**32 - 1)
PROPERTY = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def random_spec(model: dict | None = None) -> Spec:
    """Two numeric QIs, a flat categorical one and five sensitive values, bound; ``model`` (default: distinct
    2-diversity) is the spec's model section."""
    raw = {"name": "random", "id": "id", "sensitive": "s",
           "quasi_identifiers": {"a": {"type": "numeric"}, "b": {"type": "numeric"}, "c": {"type": "categorical"}},
           "model": model or {"name": "l_diversity", "l": 2, "form": "distinct"}}
    domain = pd.DataFrame({"id": range(5), "a": 0.0, "b": 0.0, "c": ["x", "y", "z", "x", "y"], "s": list(VALUES)})
    return parse_spec(raw).bind(domain)


def random_history(seed: int, releases: int | None = None, model: dict | None = None) -> History:
    """1-5 releases of 2-25 people (some leave, some arrive, some change their value), grouped at random into
    groups of 1-4, so that boxes overlap freely; ``model`` as in ``random_spec`` (what the verifiers check)."""
    rng = np.random.default_rng(seed)
    spec = random_spec(model)
    total = int(rng.integers(2, 30))
    people = pd.DataFrame({"id": np.arange(total), "a": rng.integers(0, 6, total).astype(np.float64),
                           "b": rng.integers(0, 4, total).astype(np.float64),
                           "c": rng.choice(["x", "y", "z"], total),
                           "s": rng.choice(VALUES[: int(rng.integers(2, 6))], total)})
    snapshots = []
    for _ in range(int(rng.integers(1, 6)) if releases is None else releases):
        present = people[rng.random(total) < 0.7]
        if not len(present):
            present = people.iloc[:1]
        snapshots.append(present.reset_index(drop=True))
        change = rng.random(total) < 0.15
        people.loc[change, "s"] = rng.choice(VALUES, int(change.sum()))

    def publish(snapshot, spec, rng):
        groups = rng.integers(0, max(1, len(snapshot) // 2), len(snapshot))
        return build_release(snapshot, groups, spec, rng)

    return history_of(snapshots, spec, publish)


# -- references from the definitions -------------------------------------------------------------------------------


def naive_candidate_sets(history: History, release_id: int) -> np.ndarray:
    """Xiao-Tao Def. 15: CSS(j) of each individual of T(j), in snapshot order = the union of the sensitive values
    of every group of T*(j) whose box contains the individual's QI values."""
    spec = history.spec
    values = list(spec.sensitive_values or ())
    snap, table = history.snapshot(release_id), history.release(release_id)
    names = list(spec.quasi_identifiers)
    points = encode(snap, spec, tuple(names))
    out = np.zeros((len(snap), len(values)), dtype=bool)
    for i in range(len(snap)):
        for _, group in table.groupby("group_id"):
            first = group.iloc[0]
            if all(first[f"{a}__lo"] <= points[i, k] <= first[f"{a}__hi"] for k, a in enumerate(names)):
                for value in group[spec.sensitive]:
                    out[i, values.index(value)] = True
    return out


def naive_runs(history: History) -> list[list]:
    """Taxonomy Def. 13 / Xiao-Tao Lemmas 1-2: per individual and maximal run of releases with one sensitive value
    (an absence does not end it), ``[id, first, last, value, intersection of its CSS]``, in order of the
    individual's first appearance, then of the run's."""
    seen: dict = {}
    for j in history.release_ids:
        snap = history.snapshot(j)
        css = naive_candidate_sets(history, j)
        for i, row in snap.iterrows():
            seen.setdefault(row["id"], []).append((j, row["s"], css[i]))
    runs = []
    for person, visits in seen.items():
        current = None
        for j, value, css in visits:
            if current is not None and current[3] == value:
                current[2], current[4] = j, current[4] & css
            else:
                current = [person, j, j, value, css.copy()]
                runs.append(current)
    return runs


def naive_intersection(history: History, bound: int) -> tuple[dict, set]:
    """``naive_runs``' summary counts and the (id, first, last, size) of its runs below ``bound``."""
    values = list(history.spec.sensitive_values or ())
    runs = naive_runs(history)
    sizes = [int(r[4].sum()) for r in runs]
    summary = {"attacked": len(runs), "disclosed": sizes.count(1), "below_bound": sum(s < bound for s in sizes),
               "min_candidates": min(sizes),
               "true_value_missed": sum(not r[4][values.index(r[3])] for r in runs)}
    below = {(r[0], r[1], r[2], s) for r, s in zip(runs, sizes, strict=True) if s < bound}
    return summary, below


# -- the kernels ---------------------------------------------------------------------------------------------------


@PROPERTY
@given(SEEDS)
def test_contained_union_is_the_or_over_containing_boxes(seed):
    rng = np.random.default_rng(seed)
    n, g, d, s = int(rng.integers(0, 60)), int(rng.integers(0, 1200)), int(rng.integers(0, 4)), int(rng.integers(1, 70))
    points = rng.integers(0, 6, (n, d)).astype(np.float64)
    lo = rng.integers(0, 6, (g, d)).astype(np.float64)
    hi = lo + rng.integers(0, 4, (g, d))
    sets = rng.random((g, s)) < 0.1
    expected = np.zeros((n, s), dtype=bool)
    for i in range(n):
        for j in range(g):
            if all(lo[j, k] <= points[i, k] <= hi[j, k] for k in range(d)):
                expected[i] |= sets[j]
    got = unpack_bits(contained_union(points, lo, hi, pack_bits(sets)), s)
    np.testing.assert_array_equal(got, expected)


#: ``intervals.contained_union``'s knobs, small enough that a random history's few boxes take every path of its
#: sweep (many blocks, no widest pass, every bit common or every bit rare); the defaults ({"_BOX_BLOCK": 1024}) too.
SWEEP_KNOBS = st.sampled_from([{"_BOX_BLOCK": 1024}, {"_BOX_BLOCK": 2, "_WIDEST": 0, "_RARE": 0.3, "_POINT_CHUNK": 3},
                               {"_BOX_BLOCK": 1, "_WIDEST": 1, "_RARE": 1.1}, {"_BOX_BLOCK": 3, "_RARE": 0.0}])


@PROPERTY
@given(SEEDS, SWEEP_KNOBS)
def test_candidate_sets_follow_definition_15(seed, knobs):
    history = random_history(seed)
    with mock.patch.multiple(intervals, **knobs):
        for j in history.release_ids:
            _, css = attacks.candidate_sets(history, j)
            assert css.dtype == bool and css.flags.c_contiguous
            np.testing.assert_array_equal(css, naive_candidate_sets(history, j))


@PROPERTY
@given(SEEDS, st.integers(1, 4))
def test_intersection_attack_follows_lemmas_1_and_2(seed, bound):
    history = random_history(seed)
    report = attacks.intersection_attack(history, Bound(values=bound))
    summary, below = naive_intersection(history, bound)
    assert {k: report.summary[k] for k in summary} == summary
    got = {(r["id"], r["first"], r["last"], r["size"]) for _, r in report.violations.iterrows()}
    assert got == below
    assert report.ok == (not below)


# -- incremental = from scratch ------------------------------------------------------------------------------------


def prefix(history: History, upto: int, memo: dict) -> History:
    """Releases 1..``upto`` of ``history``, with the judge's ``memo`` carried from judging release ``upto - 1``."""
    def cut(frame):
        return frame[frame["release_id"] <= upto].reset_index(drop=True)

    assert history.snapshots is not None and history.hosting is not None
    return History(history.spec, cut(history.releases), cut(history.counterfeits), cut(history.snapshots),
                   cut(history.hosting), memo={k: v for k, v in memo.items() if k[1] == upto - 1})


def assert_same_report(a, b):
    assert a.name == b.name and a.ok == b.ok and a.summary == b.summary
    pd.testing.assert_frame_equal(a.violations.reset_index(drop=True), b.violations.reset_index(drop=True),
                                  check_dtype=False)


@PROPERTY
@given(SEEDS, st.integers(1, 4))
def test_intersection_release_by_release_equals_from_scratch(seed, bound):
    history = random_history(seed)
    memo: dict = {}
    report = None
    for j in history.release_ids:
        step = prefix(history, j, memo)
        assert j == 1 or ("intersection", j - 1) in step.memo
        report = attacks.intersection_attack(step, Bound(values=bound))
        memo = step.memo
    assert report is not None
    assert_same_report(report, attacks.intersection_attack(prefix(history, history.release_ids[-1], {}),
                                                           Bound(values=bound)))


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SEEDS)
def test_intersection_runs_kept_release_by_release_are_the_runs_of_the_definition(seed):
    """The memo the intersection attack keeps (``intersection_runs``), folded one release at a time over 12
    releases of people who leave, come back and change their value, holds ``naive_runs`` row for row and in its
    order, each individual's last run marked latest; folding a release leaves the memo it started from as it was."""
    history = random_history(seed, releases=12)
    memo: dict = {}
    for j in history.release_ids:
        step = prefix(history, j, memo)
        before = {k: v.copy() for k, v in step.memo.items()}
        runs = attacks.intersection.intersection_runs(step)
        for key, frame in before.items():
            pd.testing.assert_frame_equal(step.memo[key], frame)
        memo = step.memo
    values = list(history.spec.sensitive_values or ())
    expected = naive_runs(history)
    assert runs[["id", "first", "last", "value"]].to_numpy().tolist() == [
        [r[0], r[1], r[2], values.index(r[3])] for r in expected]
    words = runs[[c for c in runs.columns if c.startswith("w")]].to_numpy(np.uint64)
    np.testing.assert_array_equal(unpack_bits(words, len(values)), np.array([r[4] for r in expected]))
    last = {r[0]: i for i, r in enumerate(expected)}
    assert runs["latest"].tolist() == [last[r[0]] == i for i, r in enumerate(expected)]
    assert runs["person"].is_monotonic_increasing


def naive_critical(history: History) -> tuple[int, set]:
    """Taxonomy Def. 17 from its statement: per consecutive pair, the published counts per value; when the
    decreases add up to the departures (counterfeits of the earlier release included) each departed individual's
    candidates are its CSS in the earlier release restricted to the decreased values; additions alike. Returns
    how many were attacked and the (id, release, kind, size) of each."""
    spec = history.spec
    values = list(spec.sensitive_values or ())
    ids = history.release_ids
    found = set()
    for before, after in itertools.pairwise(ids):
        count = {j: history.release(j)[spec.sensitive].value_counts() for j in (before, after)}
        change = {v: count[after].get(v, 0) - count[before].get(v, 0) for v in values}
        fakes = history.counterfeits.groupby("release_id")["count"].sum()
        for kind, release, other, sign in (("absence", before, after, -1), ("addition", after, before, 1)):
            snap, others = history.snapshot(release), set(history.snapshot(other)["id"])
            movers = [i for i, p in enumerate(snap["id"]) if p not in others]
            delta = {v: max(0, sign * c) for v, c in change.items()}
            if not movers and not fakes.get(release, 0):
                continue
            if sum(delta.values()) != len(movers) + fakes.get(release, 0):
                continue
            css = naive_candidate_sets(history, release)
            for i in movers:
                size = sum(css[i, k] and delta[v] > 0 for k, v in enumerate(values))
                found.add((snap["id"][i], release, kind, size))
    return len(found), found


@PROPERTY
@given(SEEDS, st.integers(1, 3))
def test_critical_attack_follows_definition_17(seed, bound):
    history = random_history(seed)
    report = attacks.critical_attack(history, Bound(values=bound))
    if len(history.release_ids) < 2:
        assert "skipped" in report.summary
        return
    attacked, found = naive_critical(history)
    assert report.summary["attacked"] == attacked
    got = {(r["id"], r["release_id"], r["kind"], r["size"]) for _, r in report.violations.iterrows()}
    assert got == {f for f in found if f[3] < bound}


@PROPERTY
@given(SEEDS, st.integers(1, 3))
def test_critical_and_equivalence_release_by_release_equal_from_scratch(seed, bound):
    history = random_history(seed)
    memo: dict = {}
    got = []
    for j in history.release_ids:
        step = prefix(history, j, memo)
        got = [attacks.critical_attack(step, Bound(values=bound)), attacks.equivalence_attack(step, Bound(values=bound))]
        memo = step.memo
    scratch = prefix(history, history.release_ids[-1], {})
    for a, b in zip(got, [attacks.critical_attack(scratch, Bound(values=bound)),
                          attacks.equivalence_attack(scratch, Bound(values=bound))], strict=True):
        assert_same_report(a, b)
