"""What a model produces and what it may read of the past.

A model is a function ``publish(snapshot, spec, previous, rng) -> Release`` (``core/models/base.py``'s
``Publisher``; the models are in ``core/models/``):

- ``snapshot`` is T(n), validated by ``spec.validate_snapshot`` and the spec bound to it (``Spec.bind``);
- ``previous`` is the last published release and its private side (``PreviousRelease``), or None for the
  first release. By Xiao-Tao Lemma 4 this is all an incremental model needs: T(n-1), T*(n-1) and the hosting
  groups; older releases are never read, so the cost of release n does not grow with n;
- ``rng`` is the only source of randomness (deterministic given the spec's seed and the release id).

``Release.table`` has the published columns of the DuckDB contract except ``release_id``: ``group_id``, for
each released quasi-identifier ``A``: ``A`` (readable label), ``A__lo``, ``A__hi`` (inclusive; numbers for a
numeric attribute, leaf ranks for a categorical one), the non-identifiers, the sensitive column. Counterfeit
rows (Xiao-Tao Def. 2) carry their group's box, the sensitive value, and nulls in the non-identifiers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .encoding import dense_unique, encode, narrow_integers
from .hierarchy import Taxonomy, interval_labels, widen
from .spec import BoundSpec, Spec


@dataclass
class Release:
    """One release as computed by a model, before storage gives it a release id.

    table:        published rows, shuffled (counterfeits indistinguishable).
    hosting:      private; ``(<id>, group_id)`` of every genuine tuple (its hosting group, Xiao-Tao Def. 2).
    counterfeits: published R(j) (Xiao-Tao Def. 3): ``(group_id, count)`` for groups holding counterfeits.
    attributes:   the released quasi-identifiers, in spec order.
    state:        private model state to persist beside the release (name -> frame); may be empty.
    """

    table: pd.DataFrame
    hosting: pd.DataFrame
    counterfeits: pd.DataFrame
    model: str
    params: dict[str, Any]
    attributes: tuple[str, ...]
    state: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def groups(self) -> int:
        """Number of distinct published groups (counterfeit-only groups do not exist)."""
        return int(self.table["group_id"].nunique())

    @property
    def counterfeit_count(self) -> int:
        """Counterfeit tuples in the release: the sum of R(j)."""
        return int(self.counterfeits["count"].sum()) if len(self.counterfeits) else 0


@dataclass
class PreviousRelease:
    """What a model may read of the past (Xiao-Tao Lemma 4): T(n-1), T*(n-1), R(n-1), hosting, state.

    ``earlier``: only for a model that reads every release (``ModelDescriptor.reads == "all"``, e.g. the star
    join of Wang-Fung §7): the published rows of releases 1..n-1 with their ``release_id``; None otherwise.

    ``returning`` and ``returning_groups``: only for a model that reads the lifespans of returning tuples
    (``ModelDescriptor.returning``, e.g. m-invariance, whose Def. 17 holds a signature over a whole lifespan,
    absences included); None otherwise. ``returning`` has a row per tuple of T(n) that is not in T(n-1) but
    was published by an earlier release: its id, ``release_id`` (its last release), ``group_id`` (its hosting
    group there) and its sensitive value then; ``returning_groups`` has the published rows of those groups
    (``release_id``, ``group_id``, the sensitive value; counterfeits included).
    """

    release_id: int
    snapshot: pd.DataFrame
    table: pd.DataFrame
    counterfeits: pd.DataFrame
    hosting: pd.DataFrame
    state: dict[str, pd.DataFrame] = field(default_factory=dict)
    earlier: pd.DataFrame | None = None
    returning: pd.DataFrame | None = None
    returning_groups: pd.DataFrame | None = None


def group_boxes(
    X: np.ndarray, groups: np.ndarray, spec: BoundSpec, attributes: tuple[str, ...] | None = None,
    categorical: str = "node",
) -> pd.DataFrame:
    """The generalised box of each group: for each attribute ``A``, ``A``, ``A__lo``, ``A__hi``; index group id.

    Numeric: ``[min, max]`` widened to ``min_width`` (§4.1 of Xiao-Tao). Categorical, ``categorical="node"``:
    the closure (smallest taxonomy node) of the group's leaves; ``"interval"``: the minimum interval of their
    leaf ranks in the taxonomy's left-to-right leaf order (Xiao-Tao footnote 1), labelled by the node when the
    interval is exactly one (``leaf_interval_labels``). ``X`` is ``encoding.encode``'s matrix; ``groups`` the group
    id per row.
    """
    names = attributes or tuple(spec.quasi_identifiers)
    by_group = pd.DataFrame(X, columns=list(names)).groupby(groups, sort=True)
    mins, maxs = by_group.min(), by_group.max()
    boxes = {}
    for name in names:
        lo = mins[name].to_numpy()
        hi = maxs[name].to_numpy()
        qi = spec.quasi_identifiers[name]
        if qi.numeric:
            lo, hi = widen(lo, hi, qi.min_width)
            label = interval_labels(lo, hi)
        elif categorical == "interval":
            label = leaf_interval_labels(spec.taxonomy(name), lo.astype(np.int64), hi.astype(np.int64))
        else:
            label, lo, hi = spec.taxonomy(name).generalise(lo.astype(np.int64), hi.astype(np.int64))
        boxes[name] = label
        boxes[f"{name}__lo"] = lo
        boxes[f"{name}__hi"] = hi
    return pd.DataFrame(boxes, index=mins.index.rename("group_id"))


def leaf_interval_labels(taxonomy: Taxonomy, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Readable labels of leaf-rank intervals ``lo..hi``: the name of the node covering exactly those leaves
    (a leaf's own name for a single leaf), else ``"[<first leaf>, <last leaf>]"``."""
    names, node_lo, node_hi = taxonomy.generalise(lo, hi)
    leaves = np.asarray(taxonomy.leaves, dtype=object)
    ranged = "[" + leaves[lo] + ", " + leaves[hi] + "]"
    return np.where((node_lo == lo) & (node_hi == hi), names, ranged)


def build_release(
    snapshot: pd.DataFrame,
    groups: np.ndarray,
    spec: BoundSpec,
    rng: np.random.Generator,
    counterfeits: pd.DataFrame | None = None,
    attributes: tuple[str, ...] | None = None,
    state: dict[str, pd.DataFrame] | None = None,
    categorical: str = "node",
    X: np.ndarray | None = None,
) -> Release:
    """Publish a homogeneous partition: every tuple gets its group's box (Xiao-Tao Def. 2).

    ``groups``: group id per snapshot row. ``counterfeits``: optional rows ``(group_id, <sensitive>)``, one per
    counterfeit tuple; they take their group's box, which is computed from the genuine tuples only (a counterfeit
    has no QI values). ``categorical``: how categorical values are generalised (``group_boxes``). ``X``: the
    snapshot's ``encoding.encode`` matrix when the caller has it. Rows are shuffled with ``rng`` so that position reveals
    nothing.
    """
    names = attributes or tuple(spec.quasi_identifiers)
    groups = np.asarray(groups)
    X = encode(snapshot, spec, names) if X is None else X
    boxes = group_boxes(X, groups, spec, names, categorical)
    genuine = snapshot[[*spec.non_identifiers, spec.sensitive]]
    fakes = pd.DataFrame(columns=["group_id", spec.sensitive]) if counterfeits is None else counterfeits
    fakes = fakes[["group_id", spec.sensitive]]
    rows = pd.concat([genuine, fakes.drop(columns="group_id")], ignore_index=True) if len(fakes) else genuine
    order = rng.permutation(len(rows))
    group_id = np.concatenate([groups, fakes["group_id"].to_numpy()]).astype(np.int64)
    _, at = dense_unique(group_id)  # a counterfeit's group is a genuine one: the boxes' sorted ids
    group_id, at = group_id[order], at[order]
    columns = {"group_id": group_id}
    for name in names:
        columns[name] = _per_row(boxes[name].to_numpy(), at)
        for column in (f"{name}__lo", f"{name}__hi"):
            bounds = boxes[column].to_numpy()
            columns[column] = bounds[at] if spec.quasi_identifiers[name].numeric else narrow_integers(
                bounds.astype(np.int64))[at]  # leaf ranks; the store writes them as BIGINT
    for column in rows.columns:
        columns[column] = rows[column].take(order).reset_index(drop=True)  # keeps extension dtypes
    table = pd.DataFrame(columns, copy=False)
    hosting = pd.DataFrame({spec.id: snapshot[spec.id].to_numpy(), "group_id": groups.astype(np.int64)})
    counts = (
        fakes.groupby("group_id").size().rename("count").reset_index()
        if len(fakes)
        else pd.DataFrame({"group_id": pd.Series(dtype=np.int64), "count": pd.Series(dtype=np.int64)})
    )
    counts = counts.astype({"group_id": np.int64, "count": np.int64})
    return Release(table, hosting, counts, spec.model.name, dict(spec.model.params), tuple(names), state or {})


def _per_row(labels: np.ndarray, at: np.ndarray) -> pd.Categorical:
    """The per-group ``labels`` taken for each row (``labels[at]``) as a categorical: a code of one or two bytes a
    row instead of an 8-byte pointer (10M rows, 7 attributes: 0.5 GB less); the store writes its text
    (``storage.schema.sql_type``). O(groups) hashing, O(rows) to take."""
    codes, categories = pd.factorize(labels)
    return pd.Categorical.from_codes(codes.astype(np.int32)[at], categories=categories, validate=False)


def release_rng(spec: Spec, release_id: int) -> np.random.Generator:
    """The random generator of one release: deterministic in (spec seed, release id), so re-runs are identical."""
    return np.random.default_rng([spec.seed, release_id])
