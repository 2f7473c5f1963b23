"""What the judge's window tests share: a history cut as ``pipeline.judge`` reads it from the store (releases n-1
and n, ``History.first``, and the memo of release n-1 after its Parquet round trip), the complete history judged
from scratch, and a run release by release through windows."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from typing import Any

import pandas as pd

from dagster_privrelease.core.judge.history import History, IncompleteHistory


def window(history: History, last: int, memo: dict, first: int | None = None, scramble: bool = False) -> History:
    """Releases ``first`` (default: the release before ``last``, or ``last`` itself when it is the first) ..``last``
    of ``history``, states included, with the memo of release ``last - 1``; with ``scramble``, release
    ``last - 1``'s rows left out: what a fold must not read."""
    if first is None:
        first = max([j for j in history.release_ids if j < last], default=last)

    def cut(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame[frame["release_id"].between(first, last)]
        if scramble and last > 2:
            frame = frame[frame["release_id"] != last - 1]
        return frame.reset_index(drop=True)

    assert history.snapshots is not None
    return dataclasses.replace(
        history, releases=cut(history.releases), counterfeits=cut(history.counterfeits),
        snapshots=cut(history.snapshots), hosting=None if history.hosting is None else cut(history.hosting),
        states={name: cut(frame) for name, frame in history.states.items()}, candidate_sets={},
        memo={k: v for k, v in memo.items() if k[1] == last - 1}, first=first,
    )


def parquet(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` after the store's round trip (``StoreWriter.save_judge_memo``)."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return pd.read_parquet(io.BytesIO(buffer.getvalue()))


def complete(history: History) -> History:
    """The complete history, judged from scratch (no memo, no kept candidate sets)."""
    return dataclasses.replace(history, memo={}, candidate_sets={}, first=1)


def through_windows(history: History, run: Callable[[History], Any]) -> tuple[Any, int]:
    """``run`` on each release in turn as ``pipeline.judge`` does: on its window carrying the memo its predecessor
    recorded, or, on ``IncompleteHistory``, on the complete history 1..j with that memo. Returns the last
    release's result and how many releases fell back."""
    memo: dict = {}
    result = None
    fallbacks = 0
    for j in history.release_ids:
        step = window(history, j, memo)
        try:
            result = run(step)
        except IncompleteHistory:
            fallbacks += 1
            step = window(history, j, memo, first=history.release_ids[0])
            result = run(step)
        memo = {k: parquet(v) for k, v in step.memo.items() if k[1] == j}
    return result, fallbacks
