"""The verifiers folded one release at a time (issue #12): the m-invariance verifier and the single-release ones
against naive references written here from Xiao-Tao's definitions (loops over releases, groups and individuals)
on random small histories, m-invariant ones made by the model and broken ones (a changed signature, a
counterfeit count that lies, a group that is not m-unique, a tuple outside its box); and judged through the
judge's window (releases n-1 and n and the memo of n-1) against the complete history."""

from __future__ import annotations

import dataclasses
import itertools
from typing import cast

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

from dagster_privrelease.core.judge.history import History, IncompleteHistory
from dagster_privrelease.core.judge.run import verify_history
from dagster_privrelease.core.judge.verifiers.xiao_tao import counterfeit_accounting, generalisation, m_invariance
from dagster_privrelease.core.models import m_invariance as model
from dagster_privrelease.core.release import PreviousRelease
from dagster_privrelease.core.spec import BoundSpec
from dagster_privrelease.errors import NotPublishable
from tests.budget import examples

from .test_fast_judge import SEEDS, VALUES, assert_same_report, random_history, random_spec
from .windows import parquet, window

M = 2
#: Fewer examples than ``test_fast_judge``'s: each runs several verifiers, release by release.
PROPERTY = settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: Windowed against complete runs every verifier release by release (``test_window`` runs more examples).
WINDOWED = settings(PROPERTY, max_examples=examples(12))

# -- random histories: made m-invariant by the model, then (sometimes) broken ---------------------------------------


def _stamp(frame: pd.DataFrame, release_id: int) -> pd.DataFrame:
    return frame.assign(release_id=np.int64(release_id))


def invariant_history(seed: int, returns: bool = False) -> History | None:
    """1-5 releases of 6-20 people published by the m-invariance model (m = 2; values never change), up to the
    first release the model refuses. Each person's lifespan is one interval of releases (Xiao-Tao Def. 5), unless
    ``returns``: then people leave and come back, and the model, given no ``PreviousRelease.returning`` here, may
    give a returning one another signature (``core.models.m_invariance``), which the verifier must see. None when
    the model refuses release 1 (its new tuples are not m-eligible)."""
    rng = np.random.default_rng(seed)
    spec = cast(BoundSpec, random_spec({"name": "m_invariance", "m": M}))
    total = int(rng.integers(6, 21))
    people = pd.DataFrame({"id": np.arange(total), "a": rng.integers(0, 6, total).astype(np.float64),
                           "b": rng.integers(0, 4, total).astype(np.float64), "c": rng.choice(["x", "y", "z"], total),
                           "s": rng.choice(VALUES, total)})
    tables, counterfeits, snapshots, hosting = [], [], [], []
    previous = None
    start, end = rng.integers(1, 4, total), rng.integers(1, 7, total)
    for j in range(1, int(rng.integers(1, 6)) + 1):
        present = rng.random(total) < 0.75 if returns else (start <= j) & ((j <= end) | (start > end))
        snapshot = people[present].reset_index(drop=True)
        try:
            release = model.publish(snapshot, spec, previous, np.random.default_rng([seed, j]))
        except NotPublishable:
            break
        previous = PreviousRelease(j, snapshot, release.table, release.counterfeits, release.hosting)
        tables.append(_stamp(release.table, j))
        counterfeits.append(_stamp(release.counterfeits, j))
        snapshots.append(_stamp(snapshot, j))
        hosting.append(_stamp(release.hosting, j))
    if not tables:
        return None
    return History(spec, *(pd.concat(f, ignore_index=True) for f in (tables, counterfeits, snapshots, hosting)))


def broken(history: History, seed: int) -> History:
    """``history`` with a few of: an R(j) count that lies, a published value changed (a changed signature, or a
    group no longer m-unique), a tuple hosted in another group or in one never published, a snapshot value moved
    out of its box, a tuple missing from the snapshot."""
    rng = np.random.default_rng([seed, 99])
    releases, counterfeits = history.releases.copy(), history.counterfeits.copy()
    assert history.snapshots is not None and history.hosting is not None
    snapshots, hosting = history.snapshots.copy(), history.hosting.copy()
    if rng.random() < 0.4 and len(counterfeits):
        counterfeits.loc[int(rng.integers(len(counterfeits))), "count"] += int(rng.choice([-1, 1]))
    if rng.random() < 0.3:
        row = releases.iloc[int(rng.integers(len(releases)))]
        counterfeits = pd.concat([counterfeits, pd.DataFrame(
            {"release_id": [row["release_id"]], "group_id": [row["group_id"]], "count": [1]})], ignore_index=True)
    if rng.random() < 0.5:
        releases.loc[int(rng.integers(len(releases))), "s"] = str(rng.choice(VALUES))
    if rng.random() < 0.4:
        at = int(rng.integers(len(hosting)))
        same = releases[releases["release_id"] == hosting.loc[at, "release_id"]]["group_id"].unique()
        hosting.loc[at, "group_id"] = int(rng.choice(same)) if rng.random() < 0.8 else 999
    if rng.random() < 0.3:
        snapshots.loc[int(rng.integers(len(snapshots))), "a"] = 50.0
    if rng.random() < 0.2:
        snapshots = snapshots.drop(index=int(rng.integers(len(snapshots)))).reset_index(drop=True)
    return dataclasses.replace(history, releases=releases, counterfeits=counterfeits, snapshots=snapshots,
                               hosting=hosting)


def some_history(seed: int) -> History:
    """Half as the model published them, half broken; a third with tuples that return after a gap, a fifth
    random (values change, groups at random)."""
    history = None if seed % 5 == 0 else invariant_history(seed, returns=seed % 3 == 0)
    if history is None:
        history = random_history(seed, model={"name": "m_invariance", "m": M})
    return broken(history, seed) if seed % 2 else history


# -- references from the definitions ---------------------------------------------------------------------------------


def signatures(history: History) -> dict[tuple[int, int], frozenset]:
    """Def. 16: the set of sensitive values of each published group (counterfeits included)."""
    out: dict[tuple[int, int], set] = {}
    for rid, gid, value in history.releases[["release_id", "group_id", "s"]].itertuples(index=False):
        out.setdefault((int(rid), int(gid)), set()).add(str(value))
    return {key: frozenset(v) for key, v in out.items()}


def naive_m_uniqueness(history: History, m: int) -> set[tuple[int, int]]:
    """Def. 17 (1): the groups with fewer than m rows or two rows of one value."""
    rows: dict[tuple[int, int], list] = {}
    for rid, gid, value in history.releases[["release_id", "group_id", "s"]].itertuples(index=False):
        rows.setdefault((int(rid), int(gid)), []).append(value)
    return {key for key, v in rows.items() if len(v) < m or len(set(v)) < len(v)}


def naive_m_invariance(history: History) -> tuple[list[tuple[int, int]], list[tuple[int, int]], set[int]]:
    """Def. 17 (2) in Lemma 4's chain: every appearance of a tuple (its hosting rows in release order) against the
    one before, both groups published: ``(changed, unpublished, literal)``, the (release, id) of each appearance
    whose signature differs from the previous one, the (release, id) of each hosting row naming a group that was
    not published, and the ids whose published hosting groups carry more than one signature (Def. 17 (2) read
    literally)."""
    assert history.hosting is not None
    sig = signatures(history)
    seen: dict[int, list[tuple[int, frozenset | None]]] = {}
    for rid, ident, gid in history.hosting[["release_id", "id", "group_id"]].itertuples(index=False):
        seen.setdefault(int(ident), []).append((int(rid), sig.get((int(rid), int(gid)))))
    changed, unpublished, literal = [], [], set()
    for ident, appearances in seen.items():
        appearances.sort(key=lambda a: a[0])  # stable: a release hosting a tuple twice keeps the hosting order
        unpublished += [(rid, ident) for rid, s in appearances if s is None]
        for (_, before), (rid, now) in itertools.pairwise(appearances):
            if before is not None and now is not None and before != now:
                changed.append((rid, ident))
        if len({s for _, s in appearances if s is not None}) > 1:
            literal.add(ident)
    return sorted(changed), sorted(unpublished), literal


def naive_counterfeits(history: History) -> int:
    """Def. 3 and Def. 2 (2): violations of R(j): groups whose rows less hosted tuples differ from R(j)'s count,
    R(j) rows naming no published group or a count below 1, (group, value) pairs with more genuine tuples than
    published rows."""
    assert history.hosting is not None and history.snapshots is not None
    rows: dict[tuple[int, int], list] = {}
    for rid, gid, value in history.releases[["release_id", "group_id", "s"]].itertuples(index=False):
        rows.setdefault((int(rid), int(gid)), []).append(str(value))
    hosted: dict[tuple[int, int], int] = {}
    where = {}
    for rid, ident, gid in history.hosting[["release_id", "id", "group_id"]].itertuples(index=False):
        hosted[(int(rid), int(gid))] = hosted.get((int(rid), int(gid)), 0) + 1
        where[(int(rid), int(ident))] = (int(rid), int(gid))
    declared: dict[tuple[int, int], int] = {}
    bad = 0
    for rid, gid, count in history.counterfeits[["release_id", "group_id", "count"]].itertuples(index=False):
        if (int(rid), int(gid)) not in rows or count <= 0:
            bad += 1
        if (int(rid), int(gid)) in rows:
            declared[(int(rid), int(gid))] = declared.get((int(rid), int(gid)), 0) + int(count)
    bad += sum(len(v) - hosted.get(key, 0) != declared.get(key, 0) for key, v in rows.items())
    genuine: dict[tuple[tuple[int, int], str], int] = {}
    for rid, ident, value in history.snapshots[["release_id", "id", "s"]].itertuples(index=False):
        group = where.get((int(rid), int(ident)))
        if group in rows:
            genuine[(group, str(value))] = genuine.get((group, str(value)), 0) + 1
    return bad + sum(n > rows[group].count(value) for (group, value), n in genuine.items())


def naive_generalisation(history: History) -> int:
    """Def. 1 and Def. 2 (2), (4): groups with more than one box, snapshot tuples without a hosting row, hosting
    rows without a snapshot tuple, and (tuple, QI) pairs whose value lies outside the box of its group."""
    assert history.hosting is not None and history.snapshots is not None
    spec: BoundSpec = history.spec
    bounds = [f"{q}__{side}" for q in ("a", "b", "c") for side in ("lo", "hi")]
    boxes: dict[tuple[int, int], set] = {}
    for row in history.releases[["release_id", "group_id", *bounds]].itertuples(index=False):
        boxes.setdefault((int(row[0]), int(row[1])), set()).add(tuple(row[2:]))
    bad = sum(len(b) > 1 for b in boxes.values())
    where = {(int(r), int(i)): (int(r), int(g)) for r, i, g in
             history.hosting[["release_id", "id", "group_id"]].itertuples(index=False)}
    snap = {(int(r), int(i)) for r, i in history.snapshots[["release_id", "id"]].itertuples(index=False)}
    bad += sum(key not in where for key in snap) + sum(key not in snap for key in where)
    leaves = list(spec.taxonomy("c").leaves)
    for rid, ident, a, b, c in history.snapshots[["release_id", "id", "a", "b", "c"]].itertuples(index=False):
        group = where.get((int(rid), int(ident)))
        if group not in boxes:
            continue
        box = sorted(boxes[group])[0] if len(boxes[group]) == 1 else None
        if box is None:  # a torn group: the verifier tests against the union of its boxes
            lows = [min(x[2 * q] for x in boxes[group]) for q in range(3)]
            highs = [max(x[2 * q + 1] for x in boxes[group]) for q in range(3)]
        else:
            lows, highs = list(box[0::2]), list(box[1::2])
        for q, value in enumerate((a, b, float(leaves.index(c)))):
            bad += not (lows[q] <= value <= highs[q])
    return bad


# -- the fast verifiers against the references ------------------------------------------------------------------------


@PROPERTY
@given(SEEDS)
def test_m_invariance_against_xiao_tao_definitions(seed):
    history = some_history(seed)
    unique, invariant = m_invariance(history, m=M)
    assert set(zip(unique.violations["release_id"], unique.violations["group_id"], strict=True)) == (
        naive_m_uniqueness(history, M))
    assert unique.summary["violating_groups"] == len(naive_m_uniqueness(history, M))
    changed, unpublished, literal = naive_m_invariance(history)
    found = invariant.violations
    by_rule = found["rule"].str.startswith("Xiao-Tao Def. 17")
    assert sorted(zip(found["release_id"][by_rule], found["id"][by_rule], strict=True)) == changed
    assert sorted(zip(found["release_id"][~by_rule], found["id"][~by_rule], strict=True)) == unpublished
    assert invariant.summary["changed"] == len(changed)
    assert invariant.ok == (not changed and not unpublished)
    if not unpublished:
        assert set(found["id"]) == literal
    assert history.hosting is not None
    assert invariant.summary["individuals"] == history.hosting["id"].nunique()
    assert counterfeit_accounting(history).ok == (naive_counterfeits(history) == 0)
    assert len(counterfeit_accounting(history).violations) == naive_counterfeits(history)
    assert len(generalisation(history).violations) == naive_generalisation(history)


@PROPERTY
@given(SEEDS)
def test_the_models_own_histories_verify(seed):
    """What the model publishes is m-invariant, R(j) true, every tuple in its box: every report ok."""
    history = invariant_history(seed)
    if history is None:
        return
    for report in verify_history(history):
        assert report.ok, (report.name, report.violations)


# -- through the window -----------------------------------------------------------------------------------------------


def release_by_release(history: History, run, scramble: bool = False) -> list:
    memo: dict = {}
    reports: list = []
    for j in history.release_ids:
        step = window(history, j, memo, scramble)
        reports = run(step)
        memo = {k: parquet(v) for k, v in step.memo.items() if k[1] == j}
    return reports


VERIFIERS = {
    "m_invariance": lambda h: m_invariance(h, M),
    "counterfeit_accounting": lambda h: [counterfeit_accounting(h)],
    "generalisation": lambda h: [generalisation(h)],
    "model": verify_history,
}


@WINDOWED
@given(SEEDS)
def test_windowed_equals_complete(seed):
    """Every verifier of m-invariance, release by release through the window (release n-1's rows dropped from
    the window now and then: the fold must not read them) against the complete history from scratch."""
    history = some_history(seed)
    for name, run in VERIFIERS.items():
        expected = run(dataclasses.replace(history, memo={}))
        got = release_by_release(history, run, scramble=bool(seed % 3 == 0))
        assert [r.name for r in got] == [r.name for r in expected], name
        for a, b in zip(got, expected, strict=True):
            assert_same_report(a, b)


@WINDOWED
@given(SEEDS)
def test_single_release_models_windowed_equal_complete(seed):
    """k-anonymity and l-diversity (and their publisher-side checks) through the window, release n-1's rows
    dropped from it, against the complete history."""
    for params in ({"name": "k_anonymity", "k": 2}, {"name": "l_diversity", "l": 2}):
        history = broken(random_history(seed, model=params), seed)
        expected = verify_history(dataclasses.replace(history, memo={}))
        got = release_by_release(history, verify_history, scramble=True)
        assert [r.name for r in got] == [r.name for r in expected]
        for a, b in zip(got, expected, strict=True):
            assert_same_report(a, b)


def _returning() -> History:
    """Three releases of two groups of two; tuple 0 leaves after release 1 and comes back in release 3 in a group
    of another signature."""
    spec = cast(BoundSpec, random_spec({"name": "m_invariance", "m": M}))
    box = {"a": "[0, 5]", "a__lo": 0.0, "a__hi": 5.0, "b": "[0, 3]", "b__lo": 0.0, "b__hi": 3.0, "c": "*",
           "c__lo": 0.0, "c__hi": 2.0}
    groups = {1: [(1, "v0"), (1, "v1"), (2, "v2"), (2, "v3")], 2: [(1, "v0"), (1, "v4"), (2, "v2"), (2, "v3")],
              3: [(1, "v0"), (1, "v4"), (2, "v2"), (2, "v3")]}
    hosts = {1: [(0, 1), (1, 1), (2, 2), (3, 2)], 2: [(4, 1), (2, 2), (3, 2)], 3: [(4, 1), (2, 2), (3, 2), (0, 1)]}
    releases = pd.DataFrame([{"release_id": j, "group_id": g, **box, "s": v} for j, rows in groups.items()
                             for g, v in rows])
    hosting = pd.DataFrame([(j, i, g) for j, rows in hosts.items() for i, g in rows],
                           columns=["release_id", "id", "group_id"])
    counterfeits = pd.DataFrame({"release_id": [2, 3], "group_id": [1, 1], "count": [1, 1]})
    snapshots = hosting[["release_id", "id"]].assign(a=1.0, b=1.0, c="x",
                                                     s=lambda f: np.where(f["id"] == 0, "v1", "v0"))
    return History(spec, releases, counterfeits, snapshots=snapshots, hosting=hosting)


def test_a_tuple_back_after_a_gap_is_compared_with_its_last_appearance():
    """Tuple 0 is in group {v0, v1} in release 1, absent from release 2 and back in group {v0, v4} in release 3:
    the window of release 3 (releases 2 and 3) holds no trace of it, the memo does."""
    history = _returning()
    got = release_by_release(history, lambda h: m_invariance(h, M))
    violations = got[1].violations
    assert list(zip(violations["release_id"], violations["id"], violations["previous_release_id"],
                    strict=True)) == [(3, 0, 1)]
    assert violations["previous_signature"].iloc[0] == "{v0, v1}"
    assert violations["signature"].iloc[0] == "{v0, v4}"


def test_a_window_without_the_memo_or_with_another_m_refuses():
    history = _returning()
    memo: dict = {}
    for j in (1, 2):
        step = window(history, j, memo)
        m_invariance(step, M)
        memo = dict(step.memo)
    with pytest.raises(IncompleteHistory):
        m_invariance(window(history, 3, {}), M)
    with pytest.raises(IncompleteHistory):  # the memo of m = 2 says nothing of m = 3
        m_invariance(window(history, 3, memo), 3)
    assert not m_invariance(window(history, 3, memo), M)[1].ok
    # a complete history with a memo of other parameters folds every release again
    complete = dataclasses.replace(history, memo={k: v for k, v in memo.items() if k[1] == 2})
    assert [r.summary for r in m_invariance(complete, 3)] == [r.summary for r in m_invariance(history, 3)]
