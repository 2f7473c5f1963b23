"""Releases published before this tool, recorded as they were (``pipeline.record_published``), and how the judge's
attacks treat them.

A recorded release is published by no model: its manifest row says ``model = "recorded"``, and it keeps one
private state frame, ``RECORDED`` (the columns it published), which is how the judge, reading a ``History``,
knows it (``History.states["recorded"]``: one row per published column, with ``release_id``). Recorded releases
come first in a store (``record_published`` refuses one after a release published by a model).

What they disclose on their own predates the tool and no later release can take it back: an adversary who knows
everyone's Job reads Disease off Wang-Fung's raw T2 (Example 1) whatever T1 publishes. So an attack blocks (fails)
only for what the releases the tool published add: ``discount_recorded`` runs the same attacks on the recorded
releases alone and takes out of each failed report the individuals who already had as few candidates there
(``size``) as they have now; the summary counts them (``predating``) and names the recorded releases.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ..judge.history import History, Report

#: ``published.manifest.model`` of a recorded release, and the name of its state frame.
RECORDED = "recorded"


def recorded_releases(history: History) -> list[int]:
    """The ids of the recorded releases of ``history`` (``History.states["recorded"]``), ascending. O(state rows)."""
    frame = history.states.get(RECORDED)
    return [] if frame is None else sorted(int(j) for j in frame["release_id"].unique())


def _upto(history: History, last: int) -> History:
    """``history`` restricted to releases 1..``last`` (no judge memo: each entry belongs to a longer history)."""

    def keep(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        return None if frame is None else frame[frame["release_id"] <= last].reset_index(drop=True)

    return dataclasses.replace(
        history, releases=keep(history.releases), counterfeits=keep(history.counterfeits),
        snapshots=keep(history.snapshots), hosting=keep(history.hosting),
        candidate_sets={j: s for j, s in history.candidate_sets.items() if j <= last}, memo={},
        states={n: f for n, f in ((n, keep(f)) for n, f in history.states.items()) if f is not None and len(f)},
    )


def discount_recorded(history: History, reports: Sequence[Report],
                      attack: Callable[[History], list[Report]]) -> list[Report]:
    """``reports`` (attacks over ``history``) judged for what the releases after the recorded ones add.

    When ``history`` starts with recorded releases 1..r and goes on, and a per-individual report failed (its
    violations have the spec's id and ``size``, the candidates left), ``attack`` (every attack the model is
    judged by, not only those of ``reports``) runs on releases 1..r alone; an individual's violation *predates the
    tool* when some attack there already left them at most as many candidates. Such violations are taken out; the report is ok when none is left, and its
    summary gets ``predating`` (how many were taken out) and ``recorded_releases`` (1..r). Other reports are
    returned as they are. Cost: the attacks once more over releases 1..r, only when a report failed; then, through
    a window (``History.first``, whose states hold every recorded release), ``IncompleteHistory``.
    """
    recorded = recorded_releases(history)
    ident = history.spec.id
    failed = [r for r in reports if not r.ok and {ident, "size"} <= set(r.violations.columns)]
    if not recorded or recorded[-1] >= max(history.release_ids) or not failed:
        return list(reports)
    history.require_complete("the discount of recorded releases")  # the attacks run again on releases 1..r
    sizes = [r.violations.set_index(ident)["size"] for r in attack(_upto(history, recorded[-1]))
             if len(r.violations) and {ident, "size"} <= set(r.violations.columns)]
    before = pd.concat(sizes).groupby(level=0).min() if sizes else pd.Series(dtype=np.float64)
    span = f"{recorded[0]}..{recorded[-1]}" if len(recorded) > 1 else str(recorded[0])
    out = []
    for report in reports:
        if not any(report is r for r in failed):
            out.append(report)
            continue
        violations = report.violations
        old = violations[ident].map(before).to_numpy(np.float64)
        predating = ~np.isnan(old) & (old <= violations["size"].to_numpy(np.float64))
        summary = {**report.summary, "predating": int(predating.sum()), "recorded_releases": span}
        out.append(Report(report.name, bool(predating.all()), violations[~predating].reset_index(drop=True),
                          summary))
    return out
