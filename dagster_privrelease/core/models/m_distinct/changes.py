"""m-Distinct's snapshot diff (Li-Zhou Defs. 1-2): T(n) against T(n-1) by id into insertions, deletions and
internal updates, and the refusal of an update outside the CUS of the old value (Def. 12): no release could hide it,
since the adversary prunes every path of its SUG through it (Def. 11).

Lifespans are one interval of releases (Def. 1): an id deleted and inserted again is a new record here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ....errors import NotPublishable
from ...encoding import sensitive_codes
from ...spec import BoundSpec


@dataclass(frozen=True)
class Changes:
    """T(n) against T(n-1) by id (Defs. 1-2).

    previous_row:      per row of T(n), the row of T(n-1) with the same id; -1 for an insertion.
    deleted:           how many ids of T(n-1) are not in T(n) (deletions).
    qi_updated:        per row of T(n), some QI value changed (Def. 2 (1)); False for an insertion.
    sensitive_updated: per row of T(n), the sensitive value changed (Def. 2 (2)); False for an insertion.
    """

    previous_row: np.ndarray
    deleted: int
    qi_updated: np.ndarray
    sensitive_updated: np.ndarray

    @property
    def inserted(self) -> np.ndarray:
        """Per row of T(n): an insertion (Def. 1 (2))."""
        return self.previous_row < 0

    @property
    def updated(self) -> np.ndarray:
        """Per row of T(n): an internal update (Def. 2)."""
        return self.qi_updated | self.sensitive_updated


def diff(before: pd.DataFrame, after: pd.DataFrame, spec: BoundSpec) -> Changes:
    """Insertions, deletions and internal updates turning the validated T(n-1) ``before`` into T(n) ``after``.
    One hash look-up of the ids, then one vectorised comparison per QI and the sensitive column. O(n·d)."""
    where = pd.Index(before[spec.id]).get_indexer(after[spec.id])
    old = np.flatnonzero(where >= 0)
    qi = np.zeros(len(after), dtype=bool)
    for name, attribute in spec.quasi_identifiers.items():
        kind = np.float64 if attribute.numeric else str
        was = before[name].to_numpy().astype(kind)[where[old]]
        qi[old] |= was != after[name].to_numpy().astype(kind)[old]
    sensitive = np.zeros(len(after), dtype=bool)
    was = before[spec.sensitive].astype(str).to_numpy()[where[old]]
    sensitive[old] = was != after[spec.sensitive].astype(str).to_numpy()[old]
    return Changes(where, len(before) - len(old), qi, sensitive)


def refuse_illegal_updates(before: pd.DataFrame, after: pd.DataFrame, changes: Changes, spec: BoundSpec,
                           C: np.ndarray) -> None:
    """NotPublishable when a record's sensitive value changed to a value outside CUS(old value) (Def. 12): the
    adversary, who knows the CUS, would prune every path of its SUG through the old value (Def. 11). The message
    names each (old, new) value pair and how many rows made it, never an id (the rows are private)."""
    rows = np.flatnonzero(changes.sensitive_updated)
    if not len(rows):
        return
    old = sensitive_codes(before.iloc[changes.previous_row[rows]], spec)
    new = sensitive_codes(after.iloc[rows], spec)
    bad = (old < 0) | ~C[np.maximum(old, 0), new]
    if not bad.any():
        return
    values = np.asarray(spec.sensitive_values, dtype=object)
    pairs = pd.DataFrame({"old": before[spec.sensitive].astype(str).to_numpy()[changes.previous_row[rows[bad]]],
                          "new": values[new[bad]]}).value_counts(sort=False).sort_index()
    listed = "; ".join(f"{a!r} -> {b!r} in {n} row(s)" for (a, b), n in pairs.items())
    raise NotPublishable(
        f"{int(bad.sum())} record(s) changed {spec.sensitive!r} to a value outside the candidate update set of the "
        f"old value (Li-Zhou Def. 12; model.update_sets): {listed}. No release can hide such an update from an "
        f"adversary who knows the CUS; add the new value to CUS(old value) if the update is possible, or correct "
        f"the source"
    )
