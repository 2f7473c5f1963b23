"""Building the judge's ``Report``s: the one home of the report builders of the verifiers and of the attacks.

A verifier's report (``verifier_report``) is ok when its violations frame is empty; the frame is stacked from
per-rule parts (``concat_violations``), a part naming groups comes from ``group_violations``. An attack's report
(``attack_report``) has one row per individual (or class) and is ok when nobody fell below the model's bound
(``history.Bound``); ``skipped`` and ``nobody_attacked`` are the reports of an attack that had nothing to do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .history import Report

# ----------------------------------------------------------------------------------------------------- verifiers


def verifier_report(name: str, violations: pd.DataFrame, **summary: Any) -> Report:
    """The report of a verifier: ok iff ``violations`` has no row; the frame re-indexed 0..n-1. O(violations)."""
    return Report(name, len(violations) == 0, violations.reset_index(drop=True), summary)


def concat_violations(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The non-empty violation frames stacked; when none has a row, the first frame emptied (its columns), or a
    frame of ``release_id, group_id, rule, detail`` without parts. O(violations)."""
    found = [p for p in parts if len(p)]
    if not found:
        return parts[0].iloc[:0] if parts else pd.DataFrame(columns=["release_id", "group_id", "rule", "detail"])
    return pd.concat(found, ignore_index=True)


def group_violations(groups: pd.DataFrame, bad: np.ndarray, rule: str, detail: Iterable[str]) -> pd.DataFrame:
    """The rows of ``groups`` (``grouping.qi_groups``) selected by ``bad``, each with the ``rule`` broken (the
    paper's definition) and its ``detail``. O(violations)."""
    out = groups.loc[bad].copy()
    out["rule"] = rule
    out["detail"] = list(detail)
    return out.reset_index(drop=True)


# ------------------------------------------------------------------------------------------------------- attacks


def candidate_tuples(matrix: np.ndarray, values: Sequence[str]) -> list[tuple[str, ...]]:
    """Each boolean row (a candidate set over ``values``) as the tuple of the values it selects. O(set bits)."""
    rows, cols = np.nonzero(matrix)
    grouped = pd.Series(np.asarray(values, dtype=object)[cols]).groupby(rows).agg(tuple)
    return [grouped.get(r, ()) for r in range(len(matrix))]


def attack_report(
    name: str, frame: pd.DataFrame, size: np.ndarray, bound: int, values: Sequence[str],
    candidates: np.ndarray | None, extra: dict[str, Any] | None = None,
) -> Report:
    """A per-individual attack report: rows of ``frame`` whose ``size`` (candidates left) is below ``bound``
    become the violations, with their ``candidates`` rows (a boolean matrix over ``values``) when given. The
    summary counts the individuals ``attacked``, ``disclosed`` (one candidate left), ``below_bound``, and gives
    ``bound`` and ``min_candidates``, then ``extra``. O(rows)."""
    below = size < bound
    violations = frame[below].reset_index(drop=True)
    if candidates is not None:
        violations["candidates"] = candidate_tuples(candidates[below], values)
    summary = {
        "attacked": len(frame),
        "disclosed": int((size == 1).sum()),
        "below_bound": int(below.sum()),
        "bound": int(bound),
        "min_candidates": int(size.min()) if len(size) else 0,
    }
    summary.update(extra or {})
    return Report(name, not below.any(), violations, summary)


def nobody_attacked(name: str, bound: int) -> Report:
    """The report of an attack that found nobody to attack (its preconditions hold, no individual qualifies).
    O(1)."""
    return Report(name, True, pd.DataFrame(), {"attacked": 0, "disclosed": 0, "below_bound": 0, "bound": bound,
                                               "min_candidates": 0})


def skipped(name: str, reason: str) -> Report:
    """The report of an attack whose preconditions the history lacks: ok, with the reason in the summary. O(1)."""
    return Report(name, True, pd.DataFrame(), {"skipped": reason})


# ------------------------------------------------------------------------------------------------------- figures

#: Significant digits of every figure the package shows (Dagster metadata, the certificate, the CLI's tables).
DIGITS = 4


def rounded(value: float | int) -> float | int:
    """``value`` as it is shown: ints as they are, floats to ``DIGITS`` significant digits. O(1)."""
    return value if isinstance(value, int) else float(f"{value:.{DIGITS}g}")


def figure_text(value: Any) -> str:
    """A figure as text (``rounded``): ``-`` for a missing (None) or non-finite number, a bool or a text as it
    is. O(1)."""
    if value is None:
        return "-"
    if isinstance(value, bool | str):
        return str(value)
    if isinstance(value, float | np.floating):
        return f"{value:.{DIGITS}g}" if np.isfinite(value) else "-"
    return str(value)
