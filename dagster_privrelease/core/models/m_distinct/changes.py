"""m-Distinct's refusal of an internal update (Li-Zhou Def. 2) outside the CUS of the old value (Def. 12): no
release could hide it, since the adversary prunes every path of its SUG through it (Def. 11). A record's old value
is the one of its previous version, whenever it was published (``kernels.hosts.last_groups``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ....errors import NotPublishable
from ...spec import BoundSpec


def refuse_illegal_updates(was: np.ndarray, now: np.ndarray, spec: BoundSpec, C: np.ndarray) -> None:
    """NotPublishable when a record's sensitive value changed from ``was`` (its previous version's value, as text)
    to ``now`` (as text; both in the same row order, one row per record published before) to a value outside
    CUS(old value) (Def. 12): the adversary, who knows the CUS, would prune every path of its SUG through the old
    value (Def. 11). The message names each (old, new) value pair and how many rows made it, never an id (the
    rows are private). O(rows)."""
    changed = was != now
    if not changed.any():
        return
    index = pd.Index([str(v) for v in spec.sensitive_values])
    old, new = index.get_indexer(was[changed]), index.get_indexer(now[changed])
    bad = (old < 0) | (new < 0) | ~C[np.maximum(old, 0), np.maximum(new, 0)]
    if not bad.any():
        return
    pairs = pd.DataFrame({"old": was[changed][bad], "new": now[changed][bad]}).value_counts(sort=False).sort_index()
    listed = "; ".join(f"{a!r} -> {b!r} in {n} row(s)" for (a, b), n in pairs.items())
    raise NotPublishable(
        f"{int(bad.sum())} record(s) changed {spec.sensitive!r} to a value outside the candidate update set of the "
        f"old value (Li-Zhou Def. 12; model.update_sets): {listed}. No release can hide such an update from an "
        f"adversary who knows the CUS; add the new value to CUS(old value) if the update is possible, or correct "
        f"the source"
    )
