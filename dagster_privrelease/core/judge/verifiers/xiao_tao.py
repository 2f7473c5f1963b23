"""Xiao-Tao (m-invariance, SIGMOD 2007) over a history: m-invariance, counterfeit accounting, generalisation.

- ``m_invariance``: Def. 17 condition 2 in Lemma 4's incremental form (and m-uniqueness of every release);
- ``counterfeit_accounting``: Def. 3 (R(j) counts each group's counterfeits);
- ``generalisation``: Def. 2 (2) and (4) (every tuple inside its group's box, one box per group) and Def. 1.

They are publisher-side checks: they read the private hosting groups (and the snapshots), indexed once by
``Hosted``; everything is integer keys, sorts and searches, O(n log n) in the published and hosting rows.
``Hosted``, ``consecutive_appearances`` and ``appearance_violations`` are shared with m-Distinct (``li_zhou``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ....errors import SpecError
from ...encoding import codes_in, qi_values, unique_keys, value_codes
from ...grouping import bitsets, describe, group_keys, homogeneous, qi_groups
from ..history import History, Report
from ..report import concat_violations, group_violations, verifier_report
from .single import m_uniqueness_of

M_INVARIANCE_RULE = "Xiao-Tao Def. 17 (2) / Lemma 4: a tuple's generalised hosting groups have the same signature"


def require(history: History, *parts: str) -> None:
    """SpecError unless ``history`` has the private ``parts`` (e.g. ``"hosting"``, ``"snapshots"``). O(1)."""
    missing = [p for p in parts if getattr(history, p) is None]
    if missing:
        raise SpecError(f"history: the verifier needs the private {missing} (publisher-side verification)")


class Hosted:
    """A homogeneous history indexed once for the publisher-side verifiers (Xiao-Tao Defs. 1-3).

    ``row_group``: group index (into ``groups``, the ``qi_groups`` frame) of each published row; ``host_group``:
    group index of each hosting row (-1 when the hosting names a group that was not published); ``codes`` and
    ``vocabulary``: the published sensitive values as integer codes (spec domain first); ``signatures``: the
    signature (Def. 16) of every group as a bitset row. ``snapshot_host``: for each snapshot row, its hosting row
    (-1 when not hosted), computed on first use. Building it is O(n log n).
    """

    def __init__(self, history: History):
        require(history, "hosting")
        if not homogeneous(history.releases):
            raise SpecError("history: publisher-side verification needs homogeneous releases (integer group_id)")
        assert history.hosting is not None
        self.history = history
        self.spec = history.spec
        self.releases = history.releases
        self.hosting = history.hosting.reset_index(drop=True)
        self.row_group, self.groups = qi_groups(history.releases)
        self.group_key = group_keys(self.groups["release_id"].to_numpy(), self.groups["group_id"].to_numpy())
        self.host_group = self.find_groups(self.hosting["release_id"].to_numpy(), self.hosting["group_id"].to_numpy())
        self.codes, self.vocabulary = value_codes(history.releases[self.spec.sensitive], self.spec.sensitive_values)
        self.signatures = bitsets(self.row_group, self.codes, len(self.groups), len(self.vocabulary))
        self._snapshot_host: np.ndarray | None = None

    def find_groups(self, release_id: np.ndarray, group_id: np.ndarray) -> np.ndarray:
        """Index of each ``(release_id, group_id)`` in ``groups``, -1 when not published. O(n log groups)."""
        keys = group_keys(release_id, np.nan_to_num(np.asarray(group_id, dtype=np.float64), nan=-1))
        at = np.minimum(np.searchsorted(self.group_key, keys), len(self.group_key) - 1)
        found = len(self.group_key) > 0 and self.group_key[at] == keys
        return np.where(found, at, -1)

    @property
    def snapshot_host(self) -> np.ndarray:
        """For each snapshot row, its hosting row (-1 when not hosted). O(n log n), once."""
        if self._snapshot_host is None:
            require(self.history, "snapshots")
            snap, ident = self.history.snapshots, self.spec.id
            assert snap is not None
            codes, uniques = pd.factorize(pd.concat([self.hosting[ident], snap[ident]], ignore_index=True))
            host_key = self.hosting["release_id"].to_numpy(np.int64) * len(uniques) + codes[: len(self.hosting)]
            snap_key = snap["release_id"].to_numpy(np.int64) * len(uniques) + codes[len(self.hosting):]
            order = np.argsort(host_key, kind="stable")
            at = np.minimum(np.searchsorted(host_key[order], snap_key), max(len(order) - 1, 0))
            found = (len(order) > 0) & (host_key[order][at] == snap_key)
            self._snapshot_host = np.where(found, order[at], -1)
        return self._snapshot_host

    def unpublished(self) -> pd.DataFrame:
        """Hosting rows naming a group that is not in the published release (Def. 2 (2)). O(n)."""
        bad = self.hosting[self.host_group < 0]
        return bad[["release_id", self.spec.id, "group_id"]].assign(
            rule="Xiao-Tao Def. 2 (2): every tuple of T(j) has a generalised tuple in its hosting group of T*(j)",
            detail="hosting group not in the published release",
        )


def hosted(history: History) -> Hosted | None:
    """The history indexed for publisher-side checks, or None without hosting or for non-homogeneous releases.
    O(n log n) (``Hosted``)."""
    return Hosted(history) if history.hosting is not None and homogeneous(history.releases) else None


def previous_appearance(hosting: pd.DataFrame, ident: str) -> tuple[np.ndarray, np.ndarray]:
    """``(order, prev)``: hosting rows sorted by (individual, release) and, for each, the position in ``order``
    of the same individual's previous appearance (-1 for a first appearance). O(n log n)."""
    ids = pd.factorize(hosting[ident])[0]
    order = np.lexsort((hosting["release_id"].to_numpy(), ids))
    same = np.r_[False, ids[order][1:] == ids[order][:-1]]
    prev = np.where(same, np.arange(len(order)) - 1, -1)
    return order, prev


def consecutive_appearances(hosted: Hosted) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of consecutive appearances of one individual, both in published groups (Lemma 4):
    ``(rows, now, before)`` with the hosting row of the later appearance and the two group indices. O(n log n)."""
    order, prev = previous_appearance(hosted.hosting, hosted.spec.id)
    group = hosted.host_group[order]
    pair = (prev >= 0) & (group >= 0)
    pair[pair] &= group[prev[pair]] >= 0
    at = np.flatnonzero(pair)
    return order[at], group[at], group[prev[at]]


def appearance_violations(hosted: Hosted, rows: np.ndarray, now: np.ndarray, before: np.ndarray,
                          rule: str, **columns) -> pd.DataFrame:
    """Violations naming the individual, the release and group, the previous release and group, then
    ``columns`` (e.g. the two signatures) and the rule. O(violations)."""
    ident = hosted.spec.id
    host = hosted.hosting.iloc[rows]
    return pd.DataFrame({
        "release_id": host["release_id"].to_numpy(),
        ident: host[ident].to_numpy(),
        "group_id": host["group_id"].to_numpy(),
        "previous_release_id": hosted.groups["release_id"].to_numpy()[before],
        "previous_group_id": hosted.groups["group_id"].to_numpy()[before],
        **columns,
        "rule": rule,
    })


# ------------------------------------------------------------------------------------------------- m-invariance


def m_invariance(history: History, m: int | None = None) -> list[Report]:
    """Xiao-Tao Def. 17 over the whole history: every release m-unique, and every tuple's generalised hosting
    groups share one signature (Def. 16), counterfeits included.

    Condition 2 is checked in Lemma 4's incremental form: each appearance of a tuple against its previous
    appearance (the predecessor release when the tuple was in it). By transitivity this is Def. 17 (2) over all
    of a tuple's appearances, also for a tuple that returns after a gap. Needs ``history.hosting``.
    Returns ``[m_uniqueness, m_invariance]``; the second names each individual whose signature changed.
    O(n log n) in the number of published and hosting rows.
    """
    return m_invariance_reports(Hosted(history), m if m is not None else history.spec.model.params["m"])


def m_invariance_reports(hosted: Hosted, m: int) -> list[Report]:
    """``m_invariance`` on an indexed history (same cost)."""
    sig = hosted.signatures
    rows, now, before = consecutive_appearances(hosted)
    changed = (sig[now] != sig[before]).any(axis=1)
    violations = appearance_violations(
        hosted, rows[changed], now[changed], before[changed], M_INVARIANCE_RULE,
        signature=describe(sig[now[changed]], hosted.vocabulary),
        previous_signature=describe(sig[before[changed]], hosted.vocabulary))
    invariant = verifier_report(
        "m_invariance", concat_violations([violations, hosted.unpublished()]), m=m,
        individuals=int(hosted.hosting[hosted.spec.id].nunique()), republished=len(rows), changed=int(changed.sum()),
    )
    return [m_uniqueness_of(hosted.groups, sig, m), invariant]


# --------------------------------------------------------------------------------------- counterfeits (Def. 3)


def counterfeit_accounting(history: History) -> Report:
    """R(j) tells the truth (Xiao-Tao Def. 3): per published group, rows minus hosted genuine tuples equals the
    group's count in R(j) (0 when absent); R(j) names only published groups, with positive counts. With the
    snapshots, also per group and sensitive value: the genuine tuples' values are all published (Def. 2 (2)), so
    the counterfeits are exactly the surplus rows. O(n log n)."""
    return counterfeit_accounting_of(Hosted(history))


def counterfeit_accounting_of(hosted: Hosted) -> Report:
    """``counterfeit_accounting`` on an indexed history (same cost)."""
    groups, r = hosted.groups, hosted.history.counterfeits.reset_index(drop=True)
    genuine = np.bincount(hosted.host_group[hosted.host_group >= 0], minlength=len(groups))
    at = hosted.find_groups(r["release_id"].to_numpy(), r["group_id"].to_numpy())
    declared = np.zeros(len(groups), dtype=np.int64)
    np.add.at(declared, at[at >= 0], r["count"].to_numpy(np.int64)[at >= 0])
    surplus = groups["size"].to_numpy() - genuine
    bad = surplus != declared
    detail = (
        f"{s} published row(s) - {g} hosted genuine tuple(s) = {s - g}, but R(j) says {d}"
        for s, g, d in zip(groups["size"][bad], genuine[bad], declared[bad], strict=True)
    )
    parts = [group_violations(groups, bad, "Xiao-Tao Def. 3: R(j) counts the counterfeits of each group", detail)]
    stray = r[(at < 0) | (r["count"].to_numpy() <= 0)]
    parts.append(stray[["release_id", "group_id"]].assign(
        rule="Xiao-Tao Def. 3: R(j) has one row <g, c> per published group holding c >= 1 counterfeits",
        detail=[f"count {c} for group {g}" for g, c in zip(stray["group_id"], stray["count"], strict=True)],
    ))
    if hosted.history.snapshots is not None:
        parts.append(_missing_genuine_values(hosted))
    return verifier_report("counterfeit_accounting", concat_violations(parts), counterfeits=int(declared.sum()),
                           groups_with_counterfeits=int((declared > 0).sum()))


def _missing_genuine_values(hosted: Hosted) -> pd.DataFrame:
    """(group, value) pairs where more genuine tuples carry the value than published rows do."""
    snap = hosted.history.snapshots
    assert snap is not None
    host = hosted.snapshot_host
    group = np.where(host >= 0, hosted.host_group[np.maximum(host, 0)], -1)
    keep = group >= 0
    vocabulary = pd.Index(hosted.vocabulary)
    genuine_codes = codes_in(snap[hosted.spec.sensitive], hosted.vocabulary)[keep]
    width = np.int64(len(vocabulary) + 1)
    genuine, _, _, g_count = unique_keys(group[keep] * width + genuine_codes)
    published, _, _, p_count = unique_keys(hosted.row_group * width + hosted.codes)
    at = np.minimum(np.searchsorted(published, genuine), max(len(published) - 1, 0))
    have = np.where((len(published) > 0) & (published[at] == genuine), p_count[at], 0)
    bad = g_count > have
    out = hosted.groups.loc[genuine[bad] // width].reset_index(drop=True)
    out["rule"] = "Xiao-Tao Def. 2 (2): every genuine tuple is published with its sensitive value in its group"
    value = [str(vocabulary[c]) if c >= 0 else "an unknown value" for c in genuine[bad] % width]
    out["detail"] = [f"{g} genuine tuple(s) with {v!r}, {p} published" for g, v, p in
                     zip(g_count[bad], value, have[bad], strict=True)]
    return out


# ------------------------------------------------------------------------------------ generalisation (Def. 2)


def generalisation(history: History) -> Report:
    """Every release truthfully generalises its snapshot (Xiao-Tao Def. 2 (2) and (4)): all rows of a group
    share one box, and each hosted tuple's QI values lie inside its group's box; every tuple of T(j) is hosted
    and only those (Def. 1). Needs snapshots and hosting. O(n log n + n d)."""
    require(history, "snapshots", "hosting")
    return generalisation_of(Hosted(history))


def generalisation_of(hosted: Hosted) -> Report:
    """``generalisation`` on an indexed history (with snapshots; same cost)."""
    spec, releases, snap = hosted.spec, hosted.releases, hosted.history.snapshots
    assert snap is not None
    qis = [q for q in spec.quasi_identifiers if f"{q}__lo" in releases.columns]
    bounds = releases[[f"{q}__{side}" for q in qis for side in ("lo", "hi")]].astype(np.float64)
    by_group = bounds.groupby(hosted.row_group, sort=True)
    lowest, highest = by_group.min().to_numpy(), by_group.max().to_numpy()
    torn = (lowest != highest).any(axis=1)
    parts = [group_violations(hosted.groups, torn, "Xiao-Tao Def. 2 (4): one box per QI group",
                              (f"{int(n)} rows with different boxes" for n in hosted.groups["size"][torn]))]
    host = hosted.snapshot_host
    group = np.where(host >= 0, hosted.host_group[np.maximum(host, 0)], -1)
    at = np.flatnonzero(group >= 0)
    unhosted = snap.iloc[np.flatnonzero(host < 0)]
    parts.append(unhosted[["release_id", spec.id]].assign(
        rule="Xiao-Tao Def. 1: every tuple of T(j) has a hosting group", detail="no hosting row"))
    stray = hosted.hosting.drop(index=host[host >= 0])
    parts.append(stray[["release_id", spec.id, "group_id"]].assign(
        rule="Xiao-Tao Def. 1: a hosting group holds tuples of T(j) only", detail="hosted tuple not in the snapshot"))
    for j, q in enumerate(qis):
        value = qi_values(snap[q].iloc[at], spec, q)
        lo, hi = lowest[group[at], 2 * j], highest[group[at], 2 * j + 1]
        outside = ~((lo <= value) & (value <= hi))
        rows = snap.iloc[at[outside]]
        parts.append(pd.DataFrame({
            "release_id": rows["release_id"].to_numpy(), spec.id: rows[spec.id].to_numpy(),
            "group_id": hosted.groups["group_id"].to_numpy()[group[at[outside]]],
            "rule": f"Xiao-Tao Def. 2 (2): the published interval of {q} covers the tuple's value",
            "detail": [f"{q}={v:g} outside [{a:g}, {b:g}]" for v, a, b in
                       zip(value[outside], lo[outside], hi[outside], strict=True)],
        }))
    return verifier_report("generalisation", concat_violations(parts), tuples=len(at))


def publisher_side(indexed: Hosted | None) -> list[Report]:
    """The checks that need the private side: R(j) and the hosting agree with the published groups, and (with
    snapshots) every release generalises its snapshot. Nothing without an index (``hosted``). O(n log n + n d)."""
    if indexed is None:
        return []
    reports = [counterfeit_accounting_of(indexed)]
    if indexed.history.snapshots is not None:
        reports.append(generalisation_of(indexed))
    return reports
