"""The groups that last hosted the tuples of T(n) (Xiao-Tao Def. 2): in T*(n-1) or, for a tuple that comes back
after an absence, in the release that last published it (``PreviousRelease.returning``). m-invariance binds a
tuple to the signature of that group (Def. 17); m-Distinct to its update-set signature (Li-Zhou Def. 15).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ....errors import NotPublishable
from ...encoding import dense_unique, sensitive_codes
from ...partitioned import lookup
from ...release import PreviousRelease
from ...spec import BoundSpec

__all__ = ["LastGroups", "last_groups"]


@dataclasses.dataclass(frozen=True)
class LastGroups:
    """The groups that last hosted the tuples of T(n) (Def. 2): in T*(n-1) or, for a tuple coming back after an
    absence, in the release that last published it (``PreviousRelease.returning``), with their published rows.

    host:        per row of T(n), the index (0..g-1) of that group; -1 for a tuple never published (S−).
    was:         per row of T(n), its sensitive value when last published, as text ("" where ``host`` is -1).
    row_group:   per published row of those groups (counterfeits included, Def. 16), its group index.
    codes:       per published row, its sensitive code (an index of ``spec.sensitive_values``).
    release_ids: per group index, the release it was published in.
    group_ids:   per group index, its group id in that release.
    """

    host: np.ndarray
    was: np.ndarray
    row_group: np.ndarray
    codes: np.ndarray
    release_ids: np.ndarray
    group_ids: np.ndarray


def last_groups(snapshot: pd.DataFrame, spec: BoundSpec, previous: PreviousRelease) -> LastGroups:
    """``LastGroups`` of the validated T(n) ``snapshot``: T*(n-1)'s groups (all of them, with the index of each id
    hosted there) and the groups that last hosted the returning tuples. NotPublishable when a published row holds
    a value the spec's sensitive domain no longer has. O(|T(n)| + |T*(n-1)|) plus the returning tuples' groups.
    The joins of T(n)'s ids with T*(n-1)'s hosting and T(n-1) (Lemma 4) run on the current backend
    (``partitioned.lookup``)."""
    ids = snapshot[spec.id]
    where = lookup(ids, previous.hosting[spec.id], "previous hosting by individual")
    old = where >= 0
    before = lookup(ids[old], previous.snapshot[spec.id], "previous values by individual")
    was = np.full(len(snapshot), "", dtype=object)
    was[old] = previous.snapshot[spec.sensitive].astype(str).to_numpy()[before]
    rows = [(np.full(len(previous.table), previous.release_id, dtype=np.int64), previous.table)]
    hosts = [(np.flatnonzero(old), previous.release_id, previous.hosting["group_id"].to_numpy()[where[old]])]
    back, earlier = previous.returning, previous.returning_groups
    if back is not None and earlier is not None and len(back):
        at = pd.Index(ids).get_indexer(back[spec.id])
        was[at] = back[spec.sensitive].astype(str).to_numpy()
        rows.append((earlier["release_id"].to_numpy(dtype=np.int64), earlier))
        hosts.append((at, back["release_id"].to_numpy(dtype=np.int64), back["group_id"].to_numpy()))
    # no copy of T*(n-1) when nobody comes back (the common case)
    table = rows[0][1] if len(rows) == 1 else pd.concat([t[["group_id", spec.sensitive]] for _, t in rows],
                                                        ignore_index=True)
    codes = sensitive_codes(table, spec)
    if (codes < 0).any():
        raise NotPublishable(
            f"{int((codes < 0).sum())} published row(s) hold a {spec.sensitive!r} value that the spec's sensitive "
            "domain no longer has; a running history cannot drop a value from the domain"
        )
    release_of = np.concatenate([r for r, _ in rows])
    group_keys = _group_keys(release_of, table["group_id"].to_numpy())
    host_keys = np.concatenate([_group_keys(np.broadcast_to(r, len(g)), g) for _, r, g in hosts])
    keys, inverse = dense_unique(np.concatenate([group_keys, host_keys]))
    host = np.full(len(snapshot), -1, dtype=np.int64)
    host[np.concatenate([at for at, _, _ in hosts])] = inverse[len(group_keys):]
    return LastGroups(host=host, was=was, row_group=inverse[: len(group_keys)], codes=codes,
                      release_ids=keys >> 40, group_ids=keys & ((1 << 40) - 1))


def _group_keys(release_ids: np.ndarray, group_ids: np.ndarray) -> np.ndarray:
    """One int64 key per (release, group): the release in the high bits, the group id (below 2**40) in the low."""
    return (np.asarray(release_ids, dtype=np.int64) << 40) | np.asarray(group_ids, dtype=np.int64)
