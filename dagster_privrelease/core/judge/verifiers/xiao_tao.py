"""Xiao-Tao (m-invariance, SIGMOD 2007) over a history: m-invariance, counterfeit accounting, generalisation.

- ``m_invariance``: Def. 17 condition 2 in Lemma 4's incremental form (and m-uniqueness of every release);
- ``counterfeit_accounting``: Def. 3 (R(j) counts each group's counterfeits);
- ``generalisation``: Def. 2 (2) and (4) (every tuple inside its group's box, one box per group) and Def. 1.

They are publisher-side checks: they read the private hosting groups (and the snapshots), indexed by ``Hosted``;
everything is integer keys, sorts and searches. Over a history they are folded one release at a time
(``single.fold_releases``): counterfeit accounting, generalisation and m-uniqueness are properties of each
release alone, and m-invariance compares each appearance of a tuple with its previous one, which the fold keeps
as each individual's last appearance (release, group, signature as packed bits). Judging release n therefore
reads release n and that memo, never the releases before (the judge's window); the memo keeps the last
appearance of who left by append (``DEPARTED``), so it reads release n-1's individuals and who comes back:
O((n_n + n_{n-1} + returners) log(...)), not O(individuals seen). ``Hosted`` and ``publisher_side`` are shared with m-Distinct (``li_zhou``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ....errors import SpecError
from ...encoding import qi_values, unique_keys, value_codes
from ...grouping import bitsets, describe, group_keys, homogeneous, qi_groups
from ...partitioned import last_per_key, lookup, previous_per_key
from ..history import History, Report
from ..report import concat_violations, group_violations, verifier_report
from .single import State, fold_releases, m_uniqueness_of

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
    (-1 when not hosted), computed on first use. ``vocabulary`` (default: the spec's domain) comes first, the
    values outside it after, sorted (``encoding.value_codes``). Building it is O(n log n).
    """

    def __init__(self, history: History, vocabulary: Sequence[str] | None = None):
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
        known = self.spec.sensitive_values if vocabulary is None else vocabulary
        self.codes, self.vocabulary = value_codes(history.releases[self.spec.sensitive], known)
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
        """For each snapshot row, its hosting row (the first when the hosting names the tuple twice, -1 when not
        hosted): Def. 1's tuple of T(j) and its hosting group. Per release, each hosting row's id is looked up
        among the snapshot's (distinct ids: T(j) is a set of tuples) on the table's backend
        (``partitioned.lookup``, step ``hosting by individual``), so a hosting that names a tuple twice, or one not
        in T(j), is found, not refused; the look-up is turned around on the driver. O(n log n), once."""
        if self._snapshot_host is None:
            require(self.history, "snapshots")
            snap, ident = self.history.snapshots, self.spec.id
            assert snap is not None
            host_release, snap_release = (frame["release_id"].to_numpy(np.int64) for frame in (self.hosting, snap))
            self._snapshot_host = np.full(len(snap), -1, dtype=np.int64)
            for j in np.unique(host_release):
                hosts, rows = np.flatnonzero(host_release == j), np.flatnonzero(snap_release == j)
                at = lookup(self.hosting[ident].iloc[hosts], snap[ident].iloc[rows], "hosting by individual")
                found = np.flatnonzero(at >= 0)
                tuples, first = np.unique(at[found], return_index=True)  # a tuple's first hosting row
                self._snapshot_host[rows[tuples]] = hosts[found[first]]
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


# ------------------------------------------------------------------------------------------------- m-invariance


def m_invariance(history: History, m: int | None = None) -> list[Report]:
    """Xiao-Tao Def. 17 over the whole history: every release m-unique, and every tuple's generalised hosting
    groups share one signature (Def. 16), counterfeits included.

    Condition 2 is checked in Lemma 4's incremental form: each appearance of a tuple against its previous
    appearance (the latest earlier release that hosted it, also across a gap). By transitivity this is Def. 17 (2)
    over all of a tuple's appearances, also for a tuple that returns after a gap. Needs ``history.hosting``.
    Returns ``[m_uniqueness, m_invariance]``; the second names each individual whose signature changed, in
    release order. Folded one release at a time (``m_invariance_step``): O(n_j log n_j + individuals seen) per
    release j, release n alone through a window.
    """
    m = int(m if m is not None else history.spec.model.params["m"])
    return fold_releases(history, "xiao_tao.m_invariance", {"m": m},
                         lambda part, state: m_invariance_step(part, state, m, publisher=False))


def m_invariance_step(part: History, state: State, m: int, publisher: bool = True) -> tuple[list[Report], State]:
    """One release of the m-invariance verifier (``single.Step``): ``[m_uniqueness, m_invariance]`` of the
    release ``part`` alone, then (``publisher``) its counterfeit accounting and generalisation, and the state
    after it.

    The state: ``individuals``, each individual hosted by release j with that appearance (``release_id``,
    ``group_id``, ``published``: whether that group was published, ``w0..``: its signature, Def. 16, as uint64
    words, ``grouping.pack_bits``); ``departed`` (``DEPARTED``), the same of each individual seen before and not
    hosted by release j, with its last appearance; ``seen``, how many individuals were ever hosted; and
    ``vocabulary``, the values the bits stand for (the spec's domain, then values outside it in order of first
    publication). An individual absent from the previous release keeps its last appearance, so a return after a
    gap is compared with it, as Lemma 4's chain over the lifespan needs.

    ``departed`` is kept by append (``history.ARCHIVED``, a unit per person and last appearance): the store gives
    back only the rows of who comes back in the next release, and maybe earlier appearances of someone who came
    back since (stale: the latest appearance of a person is the one compared, ``last_appearances``). So one step
    reads and writes releases j-1 and j and the returners, not every individual seen:
    O((n_j + n_{j-1} + returners) log(...)); folding from the first release in memory, O(individuals seen) more.
    """
    known = state["vocabulary"]["value"].astype(str).tolist() if "vocabulary" in state else None
    indexed = Hosted(part, known)
    invariant, after = _appearances(indexed, state, m)
    reports = [m_uniqueness_of(indexed.groups, indexed.signatures, m), invariant]
    if publisher:
        reports += publisher_side(indexed)
    return reports, {**after, "vocabulary": pd.DataFrame({"value": indexed.vocabulary})}


#: The m-invariance fold's state of the individuals not hosted by the last release (``m_invariance_step``).
DEPARTED = "departed"


def last_appearances(state: State) -> pd.DataFrame | None:
    """The appearances ``stack_appearances`` compares release j with, from the m-invariance state after release
    j-1 (``m_invariance_step``): the ``departed`` rows in release order, then the ``individuals`` (release j-1's),
    so that a person's latest appearance comes last of its rows; None before release 1. A state kept before
    ``departed`` existed holds everyone in ``individuals``. O(rows given, log)."""
    live = state.get("individuals")
    gone = state.get(DEPARTED)
    if gone is None or not len(gone):
        return live
    gone = gone.sort_values("release_id", kind="stable")
    return gone if live is None else pd.concat([gone, live[list(gone.columns)]], ignore_index=True)


@dataclass
class Appearances:
    """Each individual's last appearance before release j (rows 0..P-1, the fold's state) stacked with release
    j's hosting rows (rows P..), as ``stack_appearances`` builds them for the m-invariance and m-Distinct folds.

    people, release, group_id, published, bits (its group's values as uint64 words), extra (per-row columns the
    state keeps, e.g. the group's size); rows, prev: the pairs (a hosting row of release j, the individual's
    previous appearance) where both groups are published (Lemma 4's comparison); first: release j's hosting rows
    with no earlier appearance; last: each individual's last appearance after release j.
    """

    P: int
    people: pd.Series
    release: np.ndarray
    group_id: np.ndarray
    published: np.ndarray
    bits: np.ndarray
    extra: dict[str, np.ndarray]
    rows: np.ndarray
    prev: np.ndarray
    first: np.ndarray
    last: np.ndarray

    def state(self, ident: str) -> pd.DataFrame:
        """The fold's state after release j: each individual's last appearance (``ident``, ``release_id``,
        ``group_id``, ``published``, the extra columns, ``w0..``)."""
        last = self.last
        return pd.DataFrame({ident: self.people.to_numpy()[last], "release_id": self.release[last],
                             "group_id": self.group_id[last], "published": self.published[last],
                             **{name: values[last] for name, values in self.extra.items()},
                             **{f"w{w}": self.bits[last, w] for w in range(self.bits.shape[1])}})


def stack_appearances(hosted: Hosted, last_seen: pd.DataFrame | None, sig: np.ndarray,
                      extra: dict[str, np.ndarray] | None = None) -> Appearances:
    """``Appearances`` of release j (``hosted``: that release alone; ``sig``: its groups' values as words) after
    the earlier releases' last appearances ``last_seen`` (None before release 1; narrower words are widened);
    ``extra``: per-group columns to keep (name -> value per group of ``hosted.groups``, 0 for an unpublished
    group). Each stacked row's previous appearance is a lag by person on the current backend
    (``partitioned.previous_per_key``, step "previous appearance by individual": locally one hash and one stable
    sort of the stacked ids, O((n_j + individuals seen) log(...)); on Spark a window); the last appearances follow
    those links on the driver (``partitioned.last_per_key``, O(rows x the longest chain), a few passes)."""
    host, ident, words = hosted.hosting, hosted.spec.id, sig.shape[1]
    extra = extra or {}
    before = last_seen if last_seen is not None else pd.DataFrame({
        ident: host[ident].iloc[:0], "release_id": np.zeros(0, np.int64), "group_id": np.zeros(0, np.int64),
        "published": np.zeros(0, bool), **{name: np.zeros(0, np.int64) for name in extra}})
    kept = [c for c in before.columns if c.startswith("w") and c[1:].isdigit()]
    old_bits = np.zeros((len(before), words), dtype=np.uint64)
    old_bits[:, : len(kept)] = before[kept].to_numpy(np.uint64)
    group = hosted.host_group
    found = group >= 0
    at = np.maximum(group, 0)
    P = len(before)
    people = pd.concat([before[ident], host[ident]], ignore_index=True)
    # an individual's last appearance, then this release's, in order: each row's previous one is a lag by person
    previous = previous_per_key(people, "previous appearance by individual")
    published = np.concatenate([before["published"].to_numpy(bool), found])
    now = P + np.arange(len(host))
    prev = previous[now]
    pair = (prev >= 0) & found & published[np.maximum(prev, 0)]
    return Appearances(
        P=P, people=people,
        release=np.concatenate([before["release_id"].to_numpy(np.int64), host["release_id"].to_numpy(np.int64)]),
        group_id=np.concatenate([before["group_id"].to_numpy(np.int64),
                                 np.where(found, hosted.groups["group_id"].to_numpy()[at], -1).astype(np.int64)]),
        published=published,
        bits=np.vstack([old_bits, np.where(found[:, None], sig[at], np.uint64(0))]),
        extra={name: np.concatenate([before[name].to_numpy(np.int64), np.where(found, values[at], 0)])
               for name, values in extra.items()},
        rows=now[pair], prev=prev[pair], first=(prev < 0) & found,
        last=last_per_key(previous),
    )


def _appearances(hosted: Hosted, state: State, m: int) -> tuple[Report, State]:
    """The m-invariance report of one release (``hosted``: that release alone) against the state after the
    earlier releases (``m_invariance_step``; empty before release 1), and the state after it. A hosting row is
    compared with the individual's previous hosting row (the same release's, for a tuple hosted twice) when both
    groups are published (Lemma 4). O((n_j + rows of the state) log(...))."""
    host, ident = hosted.hosting, hosted.spec.id
    last_seen = last_appearances(state)
    seen = stack_appearances(hosted, last_seen, hosted.signatures)
    bits, P = seen.bits, seen.P
    changed = (bits[seen.rows] != bits[seen.prev]).any(axis=1)
    rows, prev = seen.rows[changed], seen.prev[changed]
    violations = pd.DataFrame({
        "release_id": host["release_id"].to_numpy()[rows - P],
        ident: host[ident].to_numpy()[rows - P],
        "group_id": host["group_id"].to_numpy()[rows - P],
        "previous_release_id": seen.release[prev],
        "previous_group_id": seen.group_id[prev],
        "signature": describe(bits[rows], hosted.vocabulary),
        "previous_signature": describe(bits[prev], hosted.vocabulary),
        "rule": M_INVARIANCE_RULE,
    })
    after = seen.state(ident)
    current = seen.last >= P  # hosted by this release
    before = 0 if last_seen is None else int(last_seen[ident].nunique())
    known = int(state["seen"]["individuals"].iloc[0]) if "seen" in state else before
    individuals = known + len(after) - before  # every person stacked is in ``after`` once
    report = verifier_report(
        "m_invariance", concat_violations([violations, hosted.unpublished()]), m=m, individuals=individuals,
        republished=len(seen.rows), changed=int(changed.sum()),
    )
    return report, {"individuals": after[current].reset_index(drop=True),
                    DEPARTED: after[~current].reset_index(drop=True),
                    "seen": pd.DataFrame({"individuals": [individuals]})}


# --------------------------------------------------------------------------------------- counterfeits (Def. 3)


def counterfeit_accounting(history: History) -> Report:
    """R(j) tells the truth (Xiao-Tao Def. 3): per published group, rows minus hosted genuine tuples equals the
    group's count in R(j) (0 when absent); R(j) names only published groups, with positive counts. With the
    snapshots, also per group and sensitive value: the genuine tuples' values are all published (Def. 2 (2)), so
    the counterfeits are exactly the surplus rows. Folded one release at a time (``single.fold_releases``):
    O(n_j log n_j) per release j, release n alone through a window."""
    return fold_releases(history, "xiao_tao.counterfeit_accounting", {},
                         lambda part, state: ([counterfeit_accounting_of(Hosted(part))], state))[0]


def counterfeit_accounting_of(hosted: Hosted) -> Report:
    """``counterfeit_accounting`` on an indexed history, all its releases at once. O(n log n)."""
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
    """(group, value) pairs where more genuine tuples carry the value than published rows do; a genuine value
    outside the published vocabulary is named as the snapshot spells it. O(n log n)."""
    snap = hosted.history.snapshots
    assert snap is not None
    host = hosted.snapshot_host
    group = np.where(host >= 0, hosted.host_group[np.maximum(host, 0)], -1)
    keep = group >= 0
    genuine_codes, vocabulary = value_codes(snap[hosted.spec.sensitive][keep], hosted.vocabulary)
    width = np.int64(max(len(vocabulary), 1))
    genuine, _, _, g_count = unique_keys(group[keep] * width + genuine_codes)
    published, _, _, p_count = unique_keys(hosted.row_group * width + hosted.codes)
    at = np.minimum(np.searchsorted(published, genuine), max(len(published) - 1, 0))
    have = np.where((len(published) > 0) & (published[at] == genuine), p_count[at], 0)
    bad = g_count > have
    out = hosted.groups.loc[genuine[bad] // width].reset_index(drop=True)
    out["rule"] = "Xiao-Tao Def. 2 (2): every genuine tuple is published with its sensitive value in its group"
    value = [str(vocabulary[c]) for c in genuine[bad] % width]
    out["detail"] = [f"{g} genuine tuple(s) with {v!r}, {p} published" for g, v, p in
                     zip(g_count[bad], value, have[bad], strict=True)]
    return out


# ------------------------------------------------------------------------------------ generalisation (Def. 2)


def generalisation(history: History) -> Report:
    """Every release truthfully generalises its snapshot (Xiao-Tao Def. 2 (2) and (4)): all rows of a group
    share one box, and each hosted tuple's QI values lie inside its group's box; every tuple of T(j) is hosted
    and only those (Def. 1). Needs snapshots and hosting. Folded one release at a time (``single.fold_releases``):
    O(n_j log n_j + n_j d) per release j, release n alone through a window."""
    require(history, "snapshots", "hosting")
    return fold_releases(history, "xiao_tao.generalisation", {},
                         lambda part, state: ([generalisation_of(Hosted(part))], state))[0]


def generalisation_of(hosted: Hosted) -> Report:
    """``generalisation`` on an indexed history (with snapshots), all its releases at once. O(n log n + n d)."""
    spec, releases, snap = hosted.spec, hosted.releases, hosted.history.snapshots
    assert snap is not None
    qis = [q for q in spec.quasi_identifiers if f"{q}__lo" in releases.columns]
    lowest, highest = _group_extremes(releases, [f"{q}__{side}" for q in qis for side in ("lo", "hi")],
                                      hosted.row_group, len(hosted.groups))
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


def _group_extremes(table: pd.DataFrame, columns: list[str], group: np.ndarray,
                    count: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group (``group``: the group 0..count-1 of each row, every group non-empty) the least and the greatest
    value of each column as float64, nulls skipped (NaN when a group has only nulls): what ``groupby(group).min()``
    and ``.max()`` of the columns give, one column at a time over the rows sorted by group (``reduceat``), so that
    no float copy of every column exists at once (at 1M rows such a copy is 64 MB of bounds, and as much
    again for the group-by). O(n log n + n d); memory O(n) beyond the result."""
    lowest = np.empty((count, len(columns)))
    highest = np.empty((count, len(columns)))
    if not len(group):
        return lowest, highest
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.r_[True, group[order][1:] != group[order][:-1]])
    for k, column in enumerate(columns):
        values = table[column].astype(np.float64).to_numpy()[order]
        lowest[:, k] = np.fmin.reduceat(values, starts)
        highest[:, k] = np.fmax.reduceat(values, starts)
    return lowest, highest


def publisher_side(indexed: Hosted | None) -> list[Report]:
    """The checks that need the private side: R(j) and the hosting agree with the published groups, and (with
    snapshots) every release generalises its snapshot, over the releases ``indexed`` holds (one release, in a
    fold's step). Nothing without an index (``hosted``). O(n log n + n d)."""
    if indexed is None:
        return []
    reports = [counterfeit_accounting_of(indexed)]
    if indexed.history.snapshots is not None:
        reports.append(generalisation_of(indexed))
    return reports
