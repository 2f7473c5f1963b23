"""The correspondence attacks (forward, cross, backward; taxonomy Defs. 24-31, Theorems 2, 3, 5) judged release by
release (issue #12): against naive references written here from the definitions (loops over users, releases
and classes) on random small histories, and through the judge's window (releases n-1 and n with the memo of
n-1, round-tripped through Parquet as the store keeps it) against the complete history judged from scratch."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.bench_judge import history_of
from dagster_privrelease.core.judge import attacks
from dagster_privrelease.core.judge.history import Bound, History, IncompleteHistory, Report
from dagster_privrelease.core.release import build_release
from tests.budget import examples

from .test_fast_judge import SEEDS, VALUES, assert_same_report, random_spec
from .windows import complete, parquet, window

#: Hypothesis, derandomised (the same examples every run) and sized to keep this file fast.
SETTINGS = settings(max_examples=examples(25), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

CORRESPONDENCE = {"forward": attacks.forward_attack, "cross": attacks.cross_attack,
                  "backward": attacks.backward_attack}


def stream_history(seed: int, releases: int | None = None, inserts_only: bool | None = None) -> History:
    """2-6 releases of a small table whose people mostly only arrive (Defs. 24-31 assume inserts only); with
    ``inserts_only`` False (default: at random) some also leave, come back and change their value. Groups of 1-4
    at random, a counterfeit in some groups, and now and then a release whose rows lose their groups
    (non-homogeneous). Few sensitive values, so that classes of different releases often share a signature."""
    rng = np.random.default_rng(seed)
    spec = random_spec()
    total = int(rng.integers(3, 26))
    values = list(VALUES[: int(rng.integers(2, 4))])
    people = pd.DataFrame({"id": np.arange(total), "a": rng.integers(0, 5, total).astype(np.float64),
                           "b": rng.integers(0, 3, total).astype(np.float64),
                           "c": rng.choice(["x", "y", "z"], total), "s": rng.choice(values, total)})
    churn = (rng.random() < 0.3) if inserts_only is None else not inserts_only
    present = rng.random(total) < 0.5
    present[0] = True
    snapshots = []
    for _ in range(int(rng.integers(2, 7)) if releases is None else releases):
        snapshots.append(people[present].reset_index(drop=True))
        present = present | (rng.random(total) < 0.25)
        if churn:
            present = present & (rng.random(total) < 0.8)
            present[int(rng.integers(0, total))] = True
            change = rng.random(total) < 0.2
            people.loc[change, "s"] = rng.choice(values, int(change.sum()))

    def publish(snapshot, spec, rng):
        groups = rng.integers(0, max(1, len(snapshot) // 2), len(snapshot))
        hosts = np.unique(groups)
        faked = hosts[rng.random(len(hosts)) < 0.3]
        fakes = pd.DataFrame({"group_id": faked, "s": rng.choice(values, len(faked))})
        return build_release(snapshot, groups, spec, rng, counterfeits=fakes)

    history = history_of(snapshots, spec, publish)
    if rng.random() < 0.1:
        broken = int(rng.integers(1, len(snapshots) + 1))
        history.releases["group_id"] = history.releases["group_id"].astype(np.float64)
        history.releases.loc[history.releases["release_id"] == broken, "group_id"] = np.nan
    return history


# -- the window ----------------------------------------------------------------------------------------------------


def release_by_release(history: History, run: Callable[[History], Report]) -> tuple[Report, dict]:
    """``run(window)`` for each release in turn, each window with the memo its predecessor recorded (through
    Parquet): the last report and the last memo."""
    memo: dict = {}
    reports = []
    for j in history.release_ids:
        step = window(history, j, memo)
        reports.append(run(step))
        memo = {k: parquet(v) for k, v in step.memo.items() if k[1] == j}
    return reports[-1], memo


# -- references from the definitions -------------------------------------------------------------------------------


def naive_skip(history: History) -> str | None:
    """Why Defs. 24-31 do not apply (no classes, a single release, somebody left), else None."""
    if history.releases["group_id"].isna().any():
        return "non-homogeneous"
    ids = history.release_ids
    if len(ids) < 2:
        return "single release"
    assert history.snapshots is not None
    for _, seen in history.snapshots.groupby("id")["release_id"]:
        if list(seen) != list(range(min(seen), ids[-1] + 1)):
            return "incremental"
    return None


def naive_classes(history: History, j: int) -> tuple[dict, dict, dict, dict]:
    """Release j as the adversary sees it: each user's class (its hosting group), each class's box, its
    published rows per sensitive value, and its size."""
    assert history.hosting is not None
    table = history.release(j)
    host = history.hosting[history.hosting["release_id"] == j]
    of = dict(zip(host["id"], host["group_id"], strict=True))
    names = list(history.spec.quasi_identifiers)
    box, count, size = {}, {}, {}
    for group, rows in table.groupby("group_id"):
        box[group] = [(rows[f"{a}__lo"].iloc[0], rows[f"{a}__hi"].iloc[0]) for a in names]
        count[group] = rows["s"].value_counts().to_dict()
        size[group] = len(rows)
    return of, box, count, size


def naive_forward_cross(history: History, side: int) -> list[tuple]:
    """Theorems 2 (side 1) and 3 (side 2), user by user: for p in Q1 of T*_i and Q2 of T*_{i+1}, the crack size of
    the repetition subset g of Q1 (Q2) with value s is |g| - min(|g|, |g'|), g' the subset of the other class with
    s; |Q1| (|Q2|) minus their sum candidates are left. Rows ``(id, before, after, class_size, crack, size)``."""
    out = []
    for before, after in itertools.pairwise(history.release_ids):
        of1, _, count1, size1 = naive_classes(history, before)
        of2, _, count2, size2 = naive_classes(history, after)
        for person in of1:
            if person not in of2:
                continue
            q1, q2 = count1[of1[person]], count2[of2[person]]
            mine = q1 if side == 1 else q2
            crack = sum(mine[s] - min(q1[s], q2[s]) for s in VALUES if q1.get(s, 0) and q2.get(s, 0))
            size = size1[of1[person]] if side == 1 else size2[of2[person]]
            out.append((person, before, after, size, crack, size - crack))
    return out


def _meets(a: list, b: list) -> bool:
    """Two boxes intersect on every attribute (closed intervals)."""
    return all(lo1 <= hi2 and lo2 <= hi1 for (lo1, hi1), (lo2, hi2) in zip(a, b, strict=True))


def naive_backward(history: History) -> list[tuple]:
    """Theorem 5, user by user: for p new in T*_{i+1} (class Q2) and each repetition subset g2 of Q2 (value s),
    G1 = the tuples of T*_i with s in a class whose box meets Q2's, G2 = the tuples of T*_{i+1} with s in a class
    whose box meets that of a class holding a tuple of G1; crack 0 when |G2| < |g2|, else max(0, |G1| - (|G2| -
    |g2|)) capped at |g2|. Rows ``(id, before, after, class_size, crack, size)``."""
    out = []
    for before, after in itertools.pairwise(history.release_ids):
        of1, box1, count1, _ = naive_classes(history, before)
        of2, box2, count2, size2 = naive_classes(history, after)
        for person, q2 in of2.items():
            if person in of1:
                continue
            crack = 0
            for s, g2 in count2[q2].items():
                holders = [c for c in box1 if count1[c].get(s, 0) and _meets(box1[c], box2[q2])]
                big_g1 = sum(count1[c][s] for c in holders)
                big_g2 = sum(count2[c].get(s, 0) for c in box2 if any(_meets(box2[c], box1[h]) for h in holders))
                crack += 0 if big_g2 < g2 else min(g2, max(0, big_g1 - (big_g2 - g2)))
            out.append((person, before, after, size2[q2], crack, size2[q2] - crack))
    return out


def naive_report(history: History, name: str, bound: int) -> tuple[str | None, dict, list]:
    """(why skipped, summary, sorted violation rows ``(id, before, after, size)``) from the references."""
    why = naive_skip(history)
    if why is not None:
        return why, {}, []
    rows = naive_backward(history) if name == "backward" else naive_forward_cross(history, 1 if name == "forward" else 2)
    sizes = [r[5] for r in rows]
    summary = {"attacked": len(rows), "disclosed": sizes.count(1), "below_bound": sum(s < bound for s in sizes),
               "bound": bound, "min_candidates": min(sizes, default=0)}
    return None, summary, sorted((r[0], r[1], r[2], r[5]) for r in rows if r[5] < bound)


# -- tests ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CORRESPONDENCE))
@SETTINGS
@given(SEEDS, st.integers(1, 6))
def test_correspondence_attacks_follow_theorems_2_3_5(name, seed, bound):
    history = stream_history(seed)
    report = CORRESPONDENCE[name](history, Bound(tuples=bound))
    why, summary, below = naive_report(history, name, bound)
    if why is not None:
        assert why in report.summary["skipped"]
        return
    assert report.summary == summary
    got = sorted((r["id"], r["before"], r["after"], r["size"]) for _, r in report.violations.iterrows())
    assert got == below
    assert report.ok == (not below)
    if len(report.violations):
        assert (report.violations["risk"] == 1.0 / np.maximum(report.violations["size"], 1)).all()


@pytest.mark.parametrize("name", list(CORRESPONDENCE))
@SETTINGS
@given(SEEDS, st.integers(1, 6))
def test_correspondence_through_the_window_equals_the_complete_history(name, seed, bound):
    history = stream_history(seed)
    got, memo = release_by_release(history, lambda step: CORRESPONDENCE[name](step, Bound(tuples=bound)))
    assert_same_report(got, CORRESPONDENCE[name](complete(history), Bound(tuples=bound)))
    assert {k[1] for k in memo} <= {history.release_ids[-1]}


def test_the_window_reads_two_releases_and_the_memo():
    """The window holds releases n-1 and n only; the memo carries what earlier pairs disclosed: a user pushed
    below the bound in the pair (1, 2) is still reported when release 5 is judged."""
    history, early = _early_violation()
    got, _ = release_by_release(history, lambda step: attacks.forward_attack(step, Bound(tuples=4)))
    assert (got.violations["after"] == 2).sum() == (early.violations["after"] == 2).sum() > 0
    assert_same_report(got, attacks.forward_attack(complete(history), Bound(tuples=4)))


def _early_violation() -> tuple[History, Report]:
    """A 5-release inserts-only history whose pair (1, 2) pushes a user below 4 candidates (forward attack),
    and the report of releases 1-2."""
    for seed in itertools.count():
        history = stream_history(seed, releases=5, inserts_only=True)
        early = attacks.forward_attack(complete(dataclasses.replace(
            history, releases=history.releases[history.releases["release_id"] <= 2])), Bound(tuples=4))
        if "skipped" not in early.summary and not early.ok:
            return history, early
    raise AssertionError("unreachable")


def test_a_memo_kept_for_a_smaller_bound_is_not_used_through_a_window():
    """The memo keeps the rows below the bound it was judged with: a window judged against a larger bound
    refuses (``IncompleteHistory``: the complete history is read instead), and a complete history recomputes."""
    history = stream_history(3, releases=4, inserts_only=True)
    memo = memo_upto(history, 3, 2)
    assert_same_report(attacks.cross_attack(window(history, 4, memo), Bound(tuples=2)),
                       attacks.cross_attack(complete(history), Bound(tuples=2)))
    with pytest.raises(IncompleteHistory, match="cross"):
        attacks.cross_attack(window(history, 4, memo), Bound(tuples=9))
    assert_same_report(attacks.cross_attack(dataclasses.replace(complete(history), memo=dict(memo)), Bound(tuples=9)),
                       attacks.cross_attack(complete(history), Bound(tuples=9)))


def memo_upto(history: History, last: int, bound: int) -> dict:
    """The cross attack's memo of release ``last`` (through Parquet), judged from scratch with ``bound``."""
    upto = dataclasses.replace(complete(history), **{
        f: getattr(history, f)[getattr(history, f)["release_id"] <= last].reset_index(drop=True)
        for f in ("releases", "counterfeits", "snapshots", "hosting")})
    attacks.cross_attack(upto, Bound(tuples=bound))
    return {k: parquet(v) for k, v in upto.memo.items() if k[1] == last}
