"""The SUG attack's forward weights of individuals who left (``sug.RETIRED``) kept apart from those of the release
(``sug.FORWARD``), so that a store may keep them by append and give back only those of who comes back
(``history.ARCHIVED``): judged through windows whose memo holds, of the retired weights, only what such a store
gives back, the reports equal the complete history's; the memo of the release holds its individuals only."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from dagster_privrelease.core.judge.attacks import sug
from dagster_privrelease.core.judge.history import Bound, History, IncompleteHistory

from .test_fast_judge import SEEDS, assert_same_report, random_history
from .test_sug_incremental import PROPERTY, judged_with_old_memos, random_update_sets
from .windows import complete, parquet, window


def _ids(history: History, j: int) -> set:
    snap = history.snapshot(j)
    return set(snap[history.spec.id].tolist())


def through_an_archive(history: History, cus: dict, bound: int) -> tuple[object, pd.DataFrame, list[int]]:
    """Each release judged on its window as ``pipeline.judge`` does, the memo round-tripped, the retired forward
    weights kept as an append-only store keeps a unit (a ``row``) once, and given back, with the memo of release
    n-1, only for the units with a person of release n who is not in release n-1 (what ``storage.read`` gives
    back of an ``ARCHIVED`` entry: also the stale units of such a person). Returns the last report, every
    layer's size and risk after the last release (``sug_risks``) and the rows of ``FORWARD`` per release."""
    archive = pd.DataFrame()
    memo: dict = {}
    report, risks, live = None, pd.DataFrame(), []
    ids = history.release_ids
    for at, j in enumerate(ids):
        step = window(history, j, memo)
        report = sug.sug_attack(step, Bound(values=bound), update_sets=cus)
        risks = sug.sug_risks(step, cus)[0]
        memo = {k: parquet(v) for k, v in step.memo.items() if k[1] == j}
        live.append(len(memo[(sug.FORWARD, j)]))
        recorded = memo[(sug.RETIRED, j)]
        fresh = recorded[~recorded["row"].isin(archive["row"])] if len(archive) else recorded
        archive = pd.concat([archive, fresh], ignore_index=True) if len(archive) else recorded
        if at + 1 < len(ids):
            arrived = _ids(history, ids[at + 1]) - _ids(history, j)
            given_back = archive[archive[history.spec.id].isin(arrived)] if len(archive) else archive
            memo[(sug.RETIRED, j)] = given_back.reset_index(drop=True) if len(given_back) else recorded.iloc[:0]
    return report, risks, live


@PROPERTY
@given(SEEDS, st.integers(1, 4))
def test_sug_with_retired_weights_given_back_as_an_archive_equals_the_complete_history(seed, bound):
    history = random_history(seed)
    cus = random_update_sets(seed)
    expected = sug.sug_attack(complete(history), Bound(values=bound), update_sets=cus)
    got, risks, live = through_an_archive(history, cus, bound)
    assert_same_report(got, expected)
    # every layer's risk (eq. 2), which reads the forward weights of who comes back, to the bit
    pd.testing.assert_frame_equal(risks, sug.sug_risks(complete(history), cus)[0], check_exact=True)
    assert live == [len(_ids(history, j)) for j in history.release_ids]  # FORWARD: the release's individuals


def test_a_memo_written_before_the_split_is_read_as_it_was():
    """A memo of release n-1 written before ``RETIRED`` (every individual's forward weights in ``FORWARD``, no
    ``forward`` column in ``PARAMS``) is folded into the same report as the complete history."""
    def before_the_split(memo: dict, j: int) -> None:
        retired = memo.pop((sug.RETIRED, j))  # the old layout: one entry of every individual, rows ascending
        columns = list(memo[(sug.FORWARD, j)].columns)
        both = pd.concat([memo[(sug.FORWARD, j)], retired[columns]], ignore_index=True)
        memo[(sug.FORWARD, j)] = both.iloc[np.argsort(both["row"].to_numpy(), kind="stable")].reset_index(drop=True)
        memo[(sug.PARAMS, j)] = memo[(sug.PARAMS, j)][["params"]]

    judged_with_old_memos(7, before_the_split)


def test_a_memo_lacking_who_comes_back_is_refused_then_folded_from_none():
    """When the memo of release n-1 holds no forward weights for an individual of release n seen before (a store
    that gave back too little), the window refuses (``IncompleteHistory``, the pipeline then reads the complete
    history) and the complete history with that memo is folded from none: the same report and risks as the
    complete history, never weights of zero."""
    history = random_history(3, releases=5)
    cus = random_update_sets(3)
    ids = history.release_ids
    memo: dict = {}
    refused = 0
    step = history
    for at, j in enumerate(ids):
        step = window(history, j, memo)
        try:
            sug.sug_attack(step, Bound(values=2), update_sets=cus)
        except IncompleteHistory:
            refused += 1
            step = window(history, j, memo, first=ids[0])
            sug.sug_attack(step, Bound(values=2), update_sets=cus)
        memo = {k: parquet(v) for k, v in step.memo.items() if k[1] == j}
        if at + 1 < len(ids):  # nothing of who left is given back
            memo[(sug.RETIRED, j)] = memo[(sug.RETIRED, j)].iloc[:0]
    back = [j for a, j in itertools.pairwise(ids)
            if (_ids(history, j) - _ids(history, a)) & set().union(*(_ids(history, i) for i in ids if i < a))]
    assert refused == len(back) > 0  # exactly the releases where somebody comes back
    pd.testing.assert_frame_equal(sug.sug_risks(step, cus)[0], sug.sug_risks(complete(history), cus)[0],
                                  check_exact=True)
