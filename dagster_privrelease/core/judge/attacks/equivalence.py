"""The value-equivalence attack (taxonomy Defs. 18-22, Examples 7-9) for the instances ``W = e_a - e_b``.

Classes of all releases are rows of a person matrix S (who is in each class, from the hosting groups) and of a
value matrix U (published value counts); a W with ``W . U = 0`` links the persons only on one side to those only
on the other (the same multiset of values). A link discloses when, for e = 1, the two people's lifetime
candidate sets (``intersection``) share fewer values than the bound (the interior attack, Def. 22).

Judged release by release: the pairs of classes (a, b) with b in release n are found from release
n and the attack's memo of release n-1 (``_State``), and the cost of judging release n is that of release n and
of the classes it can still pair with, not that of the history:

- only the *live* classes are worked on: those with a member in release n-1, kept whole (every member, also
  those who left). A class none of whose members is in release n-1 (a *cold* class) pairs with a class b of
  release n only through a person of b who was in it, so only when somebody comes back (``_pull_returners``,
  proof there). Its rows are kept by append (``history.ARCHIVED``): the store keeps each retired class once and
  gives back, with the memo of release n-1, only the classes of a person of release n who was not in release
  n-1, so judging release n reads nothing of the classes of people who left and stay away.
- the 1-equivalences keep the size of their people's lifetime candidate sets, judged again only for the links
  of a person of release n, the only people whose lifetime sets release n narrows (``_judge_links``).
- the report spells out the persons of the 1-equivalences only (the linked people of Example 9, and every
  disclosure); a linked pair of e > 1 is listed with how many real persons are only on each side
  (``n_only_a``, ``n_only_b``), which the classes' sizes give without reading a member (``equivalence_attack``).

The window of ``pipeline.judge`` (releases n-1 and n) suffices.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ...encoding import dense_unique, sensitive_codes, unique_rows
from ...grouping import group_keys, popcount
from ...partitioned import lookup
from ..history import ARCHIVED, Bound, History, Report
from ..report import skipped
from .intersection import NO_DISCLOSURE, intersection_runs

if TYPE_CHECKING:
    from collections.abc import Sequence

#: The memo names of the attack (``History.memo``): the rows of the live classes, those of the cold classes (kept
#: by append, ``ARCHIVED``), the signatures, the 1-equivalences, the linked pairs of the last release and the
#: counts of linked pairs per e with the status. (Stores written before the cold classes were archived hold
#: ``equivalence.cold``/``equivalence.gone`` instead: without a ``RETIRED`` entry the memo is missing, and the
#: history is folded from scratch once.)
LIVE, RETIRED, SIGNATURES, LINKS, RECENT, TALLY = (
    "equivalence.live", "equivalence.retired", "equivalence.signatures", "equivalence.ones", "equivalence.new",
    "equivalence.tally")
NAMES = (LIVE, RETIRED, SIGNATURES, LINKS, RECENT, TALLY)
assert ARCHIVED[RETIRED] == ("release_id", "group_id"), "a cold class is a unit of the archive"

#: ``_State.status``: every release so far homogeneous, or one was not (the attack is skipped from then on).
OK, NON_HOMOGENEOUS = 0, 1

_NON_HOMOGENEOUS = "non-homogeneous release: Defs. 18-20 are stated over classes"

#: The columns of a member row (``_State.live``, ``_State.cold``) besides the person's id.
_MEMBER_COLUMNS = ("release_id", "group_id", "sig", "size", "real")
#: The keys of a pair of classes.
_KEYS = ["release_a", "group_a", "release_b", "group_b"]


@dataclass
class _State:
    """What the attack keeps of releases 1..j (its memo of release j), a function of those releases alone.

    live:       one row per hosting row (a genuine tuple in its class) of every class with a member in release j:
                ``id, release_id, group_id, sig`` (its class's signature, a row of ``signatures``), ``size`` (the
                class's published rows, counterfeits included), ``real`` (its genuine tuples); sorted by class
                (``release_id, group_id``). A class is entirely here or entirely in ``cold``.
    cold:       the same rows of the other classes (none of their members is in release j), in the order they
                went cold: all of them (a history folded in memory), or, as the store gives them back
                (``ARCHIVED``), at least those of every class with a person of release j+1 who is not in release j,
                and those retired by release j.
    signatures: the distinct value-count rows U_k of the classes seen (signatures x ``spec.sensitive_values``).
    links:      the 1-equivalences found (``release_a, group_a, release_b, group_b, person_a, person_b``: the one
                person only in class a, and the one only in class b; ``combined``: the size of the intersection of
                their lifetime candidate sets after release j, 1 without snapshots).
    recent:     the linked pairs release j added (``release_a, group_a, release_b, group_b, e, n_only_a,
                n_only_b``; release_b = j; ``n_only_a``: the real persons only in class a).
    e:          ``e[k]``: how many linked pairs (both sides holding a real person, ``0 < e``) have e = k.
    status:     ``OK`` or ``NON_HOMOGENEOUS`` (then the frames are empty).
    """

    live: pd.DataFrame
    cold: pd.DataFrame
    signatures: np.ndarray
    links: pd.DataFrame
    recent: pd.DataFrame
    e: np.ndarray
    status: int


def _empty_state(history: History, status: int = OK) -> _State:
    """The state before release 1 (or of a history the attack is skipped on). O(1)."""
    ident = history.spec.id
    kind = history.hosting[ident].dtype if history.hosting is not None else np.dtype(object)
    ints = {c: pd.Series([], dtype=np.int64) for c in _MEMBER_COLUMNS}
    members = pd.DataFrame({ident: pd.Series([], dtype=kind), **ints})
    links = pd.DataFrame({**{c: pd.Series([], dtype=np.int64) for c in _KEYS},
                          "person_a": pd.Series([], dtype=kind), "person_b": pd.Series([], dtype=kind),
                          "combined": pd.Series([], dtype=np.int64)})
    recent = pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in (*_KEYS, "e", "n_only_a", "n_only_b")})
    width = len(history.spec.sensitive_values)
    return _State(members, members.copy(), np.zeros((0, width), dtype=np.int64), links, recent,
                  np.zeros(1, dtype=np.int64), status)


def _signature_codes(known: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The signature code of each row of ``counts`` among the ``known`` signatures (row i has code i), new rows
    getting the next codes in order of first appearance; returns ``(codes, known with the new rows appended)``.
    One ``_row_labels`` over both: O((signatures + classes) x values)."""
    if not len(counts):
        return np.zeros(0, dtype=np.int64), known
    inverse = _row_labels(np.vstack([known, counts]))
    code = np.full(int(inverse.max()) + 1, -1, dtype=np.int64)
    code[inverse[: len(known)]] = np.arange(len(known))
    mine = inverse[len(known):]
    fresh = np.flatnonzero(code[mine] < 0)
    if len(fresh):
        distinct, first = np.unique(mine[fresh], return_index=True)
        order = np.argsort(first, kind="stable")
        code[distinct[order]] = len(known) + np.arange(len(distinct))
        known = np.vstack([known, counts[fresh[first[order]]]])
    return code[mine], known


#: Fixed odd 64-bit multipliers of ``_row_labels``' hash (deterministic: a seed, not the process's hash salt).
_MULTIPLIERS = np.random.default_rng(12).integers(1, 2**63, 4096, dtype=np.int64).astype(np.uint64) | np.uint64(1)


def _row_labels(rows: np.ndarray) -> np.ndarray:
    """A label per row of an integer matrix, equal labels exactly for equal rows (what ``unique_rows``' inverse
    tells, up to the labels' order). Each row is hashed to one word (a dot product with fixed odd multipliers,
    modulo 2^64), the words factorised, and every row compared with the first row of its label: a collision
    (two different rows, one word) falls back to ``unique_rows``. O(rows x columns) time, O(rows) memory, against the
    O(rows log rows x columns) of ``np.unique(axis=0)``, which sorts the rows as opaque records (about 0.15 s for
    the 60k signature rows of 120k Census-KDD rows)."""
    n, d = rows.shape
    if n == 0 or d > len(_MULTIPLIERS):
        return unique_rows(rows)[1] if n else np.zeros(0, dtype=np.int64)
    words = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(d):  # a column at a time: no (rows x columns) temporary
            words += rows[:, k].astype(np.uint64) * _MULTIPLIERS[k]
    labels = pd.factorize(words)[0].astype(np.int64)
    owner = np.flatnonzero(np.diff(np.maximum.accumulate(labels), prepend=-1) > 0)[labels]  # labels by first row
    if not all((rows[owner, k] == rows[:, k]).all() for k in range(d)):
        return unique_rows(rows)[1]
    return labels


def _release_members(history: History, state: _State, table: pd.DataFrame,
                     release_id: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Release j's genuine tuples as member rows (``_State.live``), sorted by class, and the signatures with j's
    new ones. The classes of j: its published rows (``table``) by ``group_id``; U_k their value counts (a null
    value counts nowhere). O(n_j log n_j + classes_j x values + signatures x values)."""
    spec = history.spec
    assert history.hosting is not None
    width = len(spec.sensitive_values)
    groups, inverse = dense_unique(table["group_id"].to_numpy(np.int64))
    codes = sensitive_codes(table, spec)
    known = codes >= 0
    counts = np.bincount(inverse[known] * width + codes[known], minlength=len(groups) * width)
    counts = counts.reshape(len(groups), width).astype(np.int64, copy=False)
    sig, signatures = _signature_codes(state.signatures, counts)
    host = np.flatnonzero(history.hosting["release_id"].to_numpy() == release_id)
    group = history.hosting["group_id"].to_numpy(np.int64)[host]
    order = np.argsort(group, kind="stable")  # by class, as ``_State.live``
    group, host = group[order], host[order]
    cls = np.searchsorted(groups, group)
    real = np.bincount(cls, minlength=len(groups))
    narrow = np.int32  # as the memo keeps them (``_narrow``): no copy when the state is saved
    return pd.DataFrame({spec.id: history.hosting[spec.id].take(host).to_numpy(),
                         "release_id": np.full(len(host), release_id, dtype=narrow), "group_id": group.astype(narrow),
                         "sig": sig[cls].astype(narrow), "size": counts.sum(axis=1)[cls].astype(narrow),
                         "real": real[cls].astype(narrow)}), signatures


def _keys(members: pd.DataFrame) -> np.ndarray:
    """The class key (``grouping.group_keys``) of each member row. O(rows)."""
    return group_keys(members["release_id"].to_numpy(), members["group_id"].to_numpy())


def _runs(key: np.ndarray) -> np.ndarray:
    """Where each run of equal ``key`` starts (rows sorted by class: one run per class). O(rows)."""
    return np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)


def _pull_returners(ident: str, state: _State, ids: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """``(live, cold, key)`` of ``state`` with the cold classes of the persons ``ids`` of release n who come back
    (they have a cold row) moved, whole, to the live rows; ``key``: the class key of each live row (``_keys``),
    computed once here for the caller.

    Why only those: a pair (a, b), b in release n, is an instance only when a and b share a person p (else e is
    the whole class, ``equivalence_attack``), and p is then in release n. When a is cold, none of its members is
    in release n-1, so p came back in release n (p is not in release n-1) and has a cold row (a's), and a is moved
    here. So every class that pairs with release n is live after this, whole, with its every member (the one
    person of a 1-equivalence is found among them, ``_lone_persons``). The cold rows the store gives back
    (``ARCHIVED``) are those of such classes, and may hold a class that came back earlier and is live: that one
    is dropped from them first. Cost: O(live) for the keys; O(cold given + ids) to find who comes back (a
    ``partitioned.lookup`` by individual on the current backend) and to drop the classes already live; only when
    somebody comes back, O(live log live) to sort the live rows by class again."""
    live, cold = state.live, state.cold
    live_key = _keys(live)
    if not len(cold):
        return live, cold, live_key
    key = _keys(cold)
    if len(live):  # classes the store gave back that are live again (they came back since they went cold)
        units = np.unique(key)
        hit = pd.Index(units).get_indexer(live_key)
        if (hit >= 0).any():
            keep = pd.Index(units[np.unique(hit[hit >= 0])]).get_indexer(key) < 0
            cold, key = cold[keep].reset_index(drop=True), key[keep]
    back = lookup(cold[ident].to_numpy(), ids, "cold classes by individual") >= 0
    if not back.any():
        return live, cold, live_key
    pull = pd.Index(np.unique(key[back])).get_indexer(key) >= 0
    live_key = np.concatenate([live_key, key[pull]])
    order = np.argsort(live_key, kind="stable")  # by class again
    live = pd.concat([live, cold[pull]], ignore_index=True).take(order).reset_index(drop=True)
    return live, cold[~pull].reset_index(drop=True), live_key[order]


def _retire(live: pd.DataFrame, starts: np.ndarray, at: np.ndarray, new: pd.DataFrame,
            cold: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(live, cold)`` after release n (its member rows ``new``): a live class (rows sorted by class, classes
    starting at ``starts``) none of whose members is in release n (``at[i]``: where the person of live row i is in
    ``new``, -1 when absent) goes cold, whole (appended to ``cold``); release n's classes are live, after the
    others (keys grow with the release). O(live) (one ``logical_or.reduceat``), O(cold) to append the retired
    rows (a copy, no work)."""
    sizes = np.diff(np.r_[starts, len(live)])
    alive = np.repeat(np.logical_or.reduceat(at >= 0, starts), sizes) if len(starts) else np.zeros(0, dtype=bool)
    retired = live[~alive]
    live = pd.concat([live[alive], new], ignore_index=True)
    if len(retired):
        cold = pd.concat([cold, retired], ignore_index=True) if len(cold) else retired.reset_index(drop=True)
    return live, cold


def _new_pairs(old: pd.DataFrame, key: np.ndarray, new: pd.DataFrame, at: np.ndarray) -> dict[str, np.ndarray]:
    """The pairs of classes (a earlier, b in the new release) with the same signature that share a person, and
    what they share: ``key_a`` (``grouping.group_keys``, ``key`` of the earlier rows), ``release_a, group_a,
    group_b, common, size, real_a, real_b``. ``at[i]``: where the person of earlier row i is in ``new`` (a person
    is in one class of a release), -1 when absent; a row is kept when the signatures agree, and the kept rows are
    counted per (a, b) after one sort. O(shared rows log), the shared rows being each person's earlier live
    classes with its signature."""
    seen = np.flatnonzero(at >= 0)
    at = at[seen]
    same = old["sig"].to_numpy(np.int64)[seen] == new["sig"].to_numpy(np.int64)[at]
    seen, at = seen[same], at[same]
    key_a = key[seen]
    group_b = new["group_id"].to_numpy(np.int64)[at]
    order = np.lexsort((group_b, key_a))
    key_a, group_b, seen, at = key_a[order], group_b[order], seen[order], at[order]
    start = np.flatnonzero(np.r_[True, (key_a[1:] != key_a[:-1]) | (group_b[1:] != group_b[:-1])]) if len(order) \
        else np.zeros(0, dtype=np.int64)
    first, firstb = seen[start], at[start]
    return {"key_a": key_a[start], "release_a": old["release_id"].to_numpy(np.int64)[first],
            "group_a": old["group_id"].to_numpy(np.int64)[first], "group_b": group_b[start],
            "common": np.diff(np.r_[start, len(order)]), "size": old["size"].to_numpy(np.int64)[first],
            "real_a": old["real"].to_numpy(np.int64)[first], "real_b": new["real"].to_numpy(np.int64)[firstb]}


def _expand(sorted_keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each ``wanted[i]``, the rows of ``sorted_keys`` equal to it: ``(i, row)`` pairs, in order of i then
    row. O(wanted log rows + pairs)."""
    lo = np.searchsorted(sorted_keys, wanted, side="left")
    count = np.searchsorted(sorted_keys, wanted, side="right") - lo
    which = np.repeat(np.arange(len(wanted)), count)
    return which, np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count) + np.repeat(lo, count)


def _lone_persons(ids: np.ndarray, key: np.ndarray, at: np.ndarray, new_ids: np.ndarray, new_group: np.ndarray,
                  key_a: np.ndarray, group_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For 1-equivalences (a, b) (``key_a``: class a among the earlier rows, whose persons are ``ids``, sorted by
    class ``key``, ``at`` where each is in the new release or -1; ``group_b``: class b among the new rows
    ``new_ids``, sorted by ``new_group``), the one person only in class a and the one only in class b. A member
    of a is in b when its row of the new release is in group b; a member of b is in a when it is one of those.
    O(links x class size + links log rows)."""
    link, row = _expand(key, key_a)
    there = at[row]
    inside = np.zeros(len(row), dtype=bool)
    inside[there >= 0] = new_group[there[there >= 0]] == group_b[link[there >= 0]]
    alone_a = np.flatnonzero(~inside)
    linkb, rowb = _expand(new_group, group_b)
    shared = link[inside] * np.int64(len(new_ids)) + there[inside]
    alone_b = np.flatnonzero(~np.isin(linkb * np.int64(len(new_ids)) + rowb, shared))
    ones = np.arange(len(key_a))
    assert np.array_equal(link[alone_a], ones) and np.array_equal(linkb[alone_b], ones), \
        "a 1-equivalence has one person only on each side"
    return ids[row[alone_a]], new_ids[rowb[alone_b]]


def _fold(history: History, state: _State, release_id: int) -> _State:
    """``state`` (releases before j) with release j folded in: its classes paired with every live class of the
    same signature sharing a person (``_pull_returners``, ``_new_pairs``; each live row's person found among
    release j's by ``partitioned.lookup`` on the current backend, step "live classes by individual");
    e = |P_a| - |P_a and P_b| (counterfeits are persons of their own, seen once); then the classes without a member
    in j retired (``_retire``). O(live + shared rows + classes_j x values + cold given): the cold rows given are
    those the store read back (``ARCHIVED``: the classes of who comes back) and release j's retired ones."""
    if state.status == NON_HOMOGENEOUS:
        return state
    table = history.release(release_id, ["group_id", history.spec.sensitive])  # all ``_release_members`` reads
    if table["group_id"].isna().any():
        return _empty_state(history, NON_HOMOGENEOUS)
    ident = history.spec.id
    new, signatures = _release_members(history, state, table, release_id)
    live, cold, key = _pull_returners(ident, state, new[ident].to_numpy())
    starts = _runs(key)
    at = lookup(live[ident].to_numpy(), new[ident].to_numpy(), "live classes by individual")
    pairs = _new_pairs(live, key, new, at)
    common = pairs["common"]
    e = pairs["size"] - common
    real_a, real_b = pairs["real_a"], pairs["real_b"]
    linking = (e > 0) & (real_a > common) & (real_b > common)
    counts = np.bincount(e[linking]) if linking.any() else np.zeros(1, dtype=np.int64)
    tally = np.zeros(max(len(counts), len(state.e)), dtype=np.int64)
    tally[: len(counts)] += counts
    tally[: len(state.e)] += state.e
    recent = pd.DataFrame({"release_a": pairs["release_a"][linking],
                           "group_a": pairs["group_a"][linking], "release_b": np.int64(release_id),
                           "group_b": pairs["group_b"][linking], "e": e[linking],
                           "n_only_a": (real_a - common)[linking], "n_only_b": (real_b - common)[linking]})
    single = linking & (e == 1)
    links = state.links
    if single.any():
        person_a, person_b = _lone_persons(live[ident].to_numpy(), key, at, new[ident].to_numpy(),
                                           new["group_id"].to_numpy(np.int64), pairs["key_a"][single],
                                           pairs["group_b"][single])
        found = pd.DataFrame({"release_a": pairs["release_a"][single], "group_a": pairs["group_a"][single],
                              "release_b": np.int64(release_id), "group_b": pairs["group_b"][single],
                              "person_a": person_a, "person_b": person_b,
                              "combined": np.ones(int(single.sum()), dtype=np.int64)})
        links = pd.concat([links, found], ignore_index=True) if len(links) else found
    live, cold = _retire(live, starts, at, new, cold)
    return _State(live, cold, signatures, links, recent, tally, OK)


def _judge_links(history: History, state: _State, every: bool) -> _State:
    """``state`` with ``links.combined`` after the last release n: the size of the intersection of both people's
    lifetime candidate sets (``_lifetime_sizes``). A person's lifetime set changes only in a release whose
    snapshot holds the person (``intersection_runs`` folds release j's individuals only), so only the links of
    release n and those of a person of T(n) are judged again (``every``: all, after folding from scratch). Folds
    the intersection runs' memo (``intersection_runs``), also without links, so that it goes on release by
    release. O(runs seen + links judged); nothing without snapshots (``combined`` stays 1)."""
    if history.snapshots is None:
        return state
    runs = intersection_runs(history)
    links = state.links
    if not len(links):
        return state
    ident, last = history.spec.id, history.release_ids[-1]
    left, right = links["person_a"].to_numpy(), links["person_b"].to_numpy()
    if every:
        touched = np.ones(len(links), dtype=bool)
    else:
        present = pd.Index(history.snapshots.loc[history.snapshots["release_id"] == last, ident].to_numpy())
        touched = ((links["release_b"].to_numpy(np.int64) == last) | (present.get_indexer(left) >= 0)
                   | (present.get_indexer(right) >= 0))
    combined = links["combined"].to_numpy(np.int64).copy()
    combined[touched] = _lifetime_sizes(ident, runs, left[touched], right[touched])
    return dataclasses.replace(state, links=links.assign(combined=combined))


def _narrow(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """``frame`` with its int ``columns`` as int32 (release and group ids, signature codes, sizes, e: all far below
    2^31), half the width of int64 in the store's memo blobs (``storage.write.memo_blob``); every reader widens
    them again (``to_numpy(np.int64)``, ``group_keys``). O(rows)."""
    narrow = {c: np.int32 for c in columns if c in frame.columns and frame[c].dtype != np.int32}
    assert all(frame[c].abs().max() < 2**31 for c in narrow if len(frame)), "memo ints beyond int32"
    return frame.astype(narrow) if narrow else frame


def _encode(history: History, release_id: int, state: _State) -> None:
    """Record ``state`` as the attack's memo of ``release_id`` (plain int and id columns, as the store's memo blobs
    keep them, the small ints narrowed, ``_narrow``; the signatures as ``sig, value, count`` rows; the counts per
    e with the status on every row). O(memo)."""
    sig, value = np.nonzero(state.signatures)
    history.memo[(LIVE, release_id)] = _narrow(state.live, _MEMBER_COLUMNS)
    history.memo[(RETIRED, release_id)] = _narrow(state.cold, _MEMBER_COLUMNS)
    history.memo[(SIGNATURES, release_id)] = pd.DataFrame({
        "sig": sig.astype(np.int64), "value": value.astype(np.int64),
        "count": state.signatures[sig, value].astype(np.int64), "signatures": np.int64(len(state.signatures))})
    history.memo[(LINKS, release_id)] = _narrow(state.links, (*_KEYS, "combined"))
    history.memo[(RECENT, release_id)] = _narrow(state.recent, (*_KEYS, "e", "n_only_a", "n_only_b"))
    history.memo[(TALLY, release_id)] = pd.DataFrame({"e": np.arange(len(state.e), dtype=np.int64),
                                                      "pairs": state.e, "status": np.int64(state.status)})


def _decode(history: History, frames: list[pd.DataFrame | None]) -> _State | None:
    """The ``_State`` of memo frames (``_encode``, in the order of ``NAMES``), None when one is missing.
    O(memo)."""
    if any(f is None for f in frames):
        return None
    live, cold, signatures, links, recent, tally = frames
    assert live is not None and cold is not None and signatures is not None
    assert links is not None and recent is not None and tally is not None
    status = int(tally["status"].iloc[0]) if len(tally) else OK
    if not (len(live) and len(cold) and len(links) and len(recent)):  # empty frames lose their dtypes
        empty = _empty_state(history, status)
        live, cold = live if len(live) else empty.live, cold if len(cold) else empty.cold
        links, recent = links if len(links) else empty.links, recent if len(recent) else empty.recent
    rows = int(signatures["signatures"].iloc[0]) if len(signatures) else 0
    dense = np.zeros((rows, len(history.spec.sensitive_values)), dtype=np.int64)
    dense[signatures["sig"].to_numpy(np.int64), signatures["value"].to_numpy(np.int64)] = signatures["count"]
    e = np.zeros(max(1, len(tally)), dtype=np.int64)
    e[tally["e"].to_numpy(np.int64)] = tally["pairs"].to_numpy(np.int64)
    return _State(live, cold, dense, links, recent, e, status)


def _state(history: History) -> _State:
    """The attack's memo of the last release n, recorded in ``history.memo``: read back when this history was
    attacked already, else the memo of release n-1 (``History.previous_memo``; through a window it must be
    there) with release n folded in, else (a complete history without it) every release folded from release 1;
    then the 1-equivalences judged (``_judge_links``). With the memo: O(live + cold given + release n's shared
    rows + links of T(n)'s people + runs seen); from scratch, that for every release."""
    ids = history.release_ids
    if not ids:
        return _empty_state(history)
    done = _decode(history, [history.memo.get((n, ids[-1])) for n in NAMES])
    if done is not None:
        return done
    state = _decode(history, [history.previous_memo(n) for n in NAMES])
    scratch = state is None
    folded = ids if scratch else ids[-1:]
    state = _empty_state(history) if state is None else state
    for j in folded:
        state = _fold(history, state, j)
    if state.status == OK:
        state = _judge_links(history, state, scratch)
    _encode(history, ids[-1], state)
    return state


def _lifetime_sizes(ident: str, runs: pd.DataFrame, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Per pair of people (``left[i]``, ``right[i]``), the size of the intersection of their lifetime candidate
    sets: each person's is the AND of its intersection runs (``runs``: ``intersection_runs``, the judge's memo),
    the intersection of its candidate sets over every release it appears in. O(runs seen + pairs)."""
    if not len(left):
        return np.zeros(0, dtype=np.int64)
    runs = runs[runs[ident].isin(np.concatenate([left, right]))]
    words = runs[[c for c in runs.columns if c.startswith("w") and c[1:].isdigit()]].to_numpy(np.uint64)
    person = runs["person"].to_numpy(np.int64)
    starts = np.flatnonzero(np.r_[True, person[1:] != person[:-1]]) if len(person) else np.empty(0, np.int64)
    lifetime = np.bitwise_and.reduceat(words, starts, axis=0) if len(starts) else words
    at = pd.Index(runs[ident].to_numpy()[starts])
    return popcount(lifetime[at.get_indexer(left)] & lifetime[at.get_indexer(right)]).astype(np.int64)


def equivalence_attack(history: History, bound: Bound = NO_DISCLOSURE) -> Report:
    """Value-equivalence attack (taxonomy Defs. 18-20, Examples 7-9), for the instances ``W = e_a - e_b``.

    Classes of all releases are the rows of the person matrix S (hosting: who is in each class; each
    counterfeit is a person of its own, seen once) and of the value matrix U (published value counts). A pair of
    classes with ``U_a = U_b`` and persons that differ gives ``W = e_a - e_b`` with ``W . U = 0``, ``W . S``
    integral and ``e = ||W . S||_1 / 2 = |P_a minus P_b|``: the e persons only in P_a have the same multiset of
    sensitive values as the e persons only in P_b (e = 1: two people linked to one value, Example 9). Only pairs
    of classes sharing a person have ``e`` below the class size (a disjoint pair links two whole classes, which
    their published values already say), so only those are instances here. General instances (``W`` with more
    than two non-zeros) are an integer-programming search that the taxonomy does not bound (Def. 20 only asks for
    some W); they are not attempted.

    A link alone relates two people without disclosing a value; it discloses (the interior attack, Def. 22) when,
    for e = 1, the intersection of both people's lifetime candidate sets (``intersection_attack``; without
    snapshots, e itself) is below the bound (``bound.values``); ``ok`` is False exactly when a link discloses.

    Violations, one row per pair of classes, sorted by the classes: the linked pairs below the bound that the
    last release adds (``kind`` "linked pair, no value disclosed" or "disclosing link"), and every disclosing link
    of the history (a link of earlier releases discloses once later releases narrow its people's candidate
    sets). The benign links of earlier releases were listed when those releases were judged; listing them again
    would make every report as long as the history. Columns:

    - ``release_a, group_a, release_b, group_b``: the two classes; ``e``: |P_a minus P_b|.
    - ``only_a``, ``only_b``: for e = 1 (every disclosing link is one), the linked people: a 1-tuple each, the one
      person only in class a and the one only in class b. None for e > 1: spelling out the persons of every
      linked pair would cost, each release, the members of every class each person of the release was ever in,
      for pairs that disclose nothing; the classes (and their members, in the private schema) say
      who they are.
    - ``n_only_a``, ``n_only_b``: how many real persons are only in class a, only in class b (e minus the
      counterfeits on that side; 1 and 1 for e = 1).
    - ``combined_size``: for e = 1, the size of the intersection of the two people's lifetime candidate sets;
      e otherwise. ``kind``: "disclosing link" when e = 1 and ``combined_size`` is below the bound.

    Summary: ``linked_pairs_checked`` (instances over the whole history, e > 0, both sides real),
    ``linked_pairs_below_bound`` (those with e below the bound), ``bound``, ``disclosed`` (disclosing links of the
    history), ``min_e`` and ``linked_pairs_new`` (the pairs below the bound that the last release adds, listed).

    Incremental (``_state``): judging release n pairs release n's classes with the live classes of the
    memo of release n-1 (those with a member in release n-1, and the cold ones of a person who comes back:
    ``_pull_returners``), O(live + n_n log n_n + shared rows + classes_n x values), the shared rows being each
    person of release n times its earlier live classes of the same signature; the 1-equivalences of a person of
    T(n) are judged again against the lifetime candidate sets (``_judge_links``, O(runs seen + links)), and the
    report is built from the pairs release n adds and the disclosing links, O(listed). The rows of the cold classes
    are kept by append in the store (``ARCHIVED``), which reads back only those of a person who comes back.
    The memo is a function of the releases alone (any bound). From scratch (a complete history without the memo),
    every release is folded in turn.
    """
    if history.hosting is None:
        return skipped("equivalence", "no hosting groups: the persons of each class are unknown")
    state = _state(history)
    if state.status == NON_HOMOGENEOUS:
        return skipped("equivalence", _NON_HOMOGENEOUS)
    limit, last = bound.values, history.release_ids[-1]
    links = state.links
    combined = links["combined"].to_numpy(np.int64)
    disclosing = (1 < limit) & (combined < limit)
    release_b = links["release_b"].to_numpy(np.int64)
    earlier = np.flatnonzero(disclosing & (release_b < last))
    below = np.flatnonzero(state.recent["e"].to_numpy(np.int64) < limit)
    recent = _rows(state.recent, below, ("e", "n_only_a", "n_only_b", *_KEYS))
    e = recent["e"]
    ones = np.flatnonzero(e == 1)
    # release n's 1-equivalences, found in the order of its pairs (``_fold``): those of its rows with e = 1
    mine = np.flatnonzero(release_b == last) if len(ones) else np.zeros(0, dtype=np.int64)
    assert len(mine) == len(ones)
    assert all((links[k].to_numpy(np.int64)[mine] == recent[k][ones]).all() for k in _KEYS)
    listed = np.concatenate([earlier, mine])  # the links listed: the earlier disclosing ones, then release n's
    persons = {side: _singletons(links[f"person_{side}"].to_numpy()[listed]) for side in ("a", "b")}
    lone = np.ones(len(earlier), dtype=np.int64)  # e, n_only_a and n_only_b of an earlier disclosing link
    size = np.concatenate([lone, e])  # a copy: the 1-equivalences' sizes are written into it
    size[len(earlier) + ones] = combined[mine]
    only = {side: np.full(len(size), None, dtype=object) for side in ("a", "b")}
    for side in ("a", "b"):
        only[side][np.concatenate([np.arange(len(earlier)), len(earlier) + ones])] = persons[side]
    columns = {k: _after(links[k].to_numpy(np.int64)[earlier], recent[k]) for k in _KEYS}
    frame = {**columns, "e": _after(lone, e), "only_a": only["a"], "only_b": only["b"],
             "n_only_a": _after(lone, recent["n_only_a"]), "n_only_b": _after(lone, recent["n_only_b"]),
             "combined_size": size}
    kind = (frame["e"] == 1) & (frame["combined_size"] < limit)
    frame["kind"] = np.array(["linked pair, no value disclosed", "disclosing link"], dtype=object)[kind.astype(int)]
    if len(earlier):  # release n's pairs come sorted by the classes (``_new_pairs``); the earlier links merged in
        order = np.lexsort([columns[k] for k in reversed(_KEYS)])
        frame = {k: v[order] for k, v in frame.items()}
    violations = pd.DataFrame(frame, copy=False)  # a block per column: the listed pairs are not copied again
    present = np.flatnonzero(state.e)
    summary = {"linked_pairs_checked": int(state.e.sum()), "linked_pairs_below_bound": int(state.e[: max(limit, 0)].sum()),
               "bound": limit, "disclosed": int(disclosing.sum()), "min_e": int(present[0]) if len(present) else 0,
               "linked_pairs_new": len(below)}
    return Report("equivalence", not disclosing.any(), violations, summary)


def _rows(frame: pd.DataFrame, rows: np.ndarray, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """``columns`` of ``frame`` at positions ``rows`` as int64 arrays, without a copy of a column that is int64
    already when ``rows`` are all of them (each linked pair of the last release, often). O(rows x columns)."""
    every = len(rows) == len(frame)
    return {c: frame[c].to_numpy(np.int64) if every else frame[c].to_numpy(np.int64)[rows] for c in columns}


def _after(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """``first`` then ``second`` as one array; ``second`` itself (no copy) when ``first`` is empty. O(rows)."""
    return np.concatenate([first, second]) if len(first) else second


def _singletons(values: np.ndarray) -> np.ndarray:
    """``values`` as an object array of 1-tuples (the one person only on one side of a 1-equivalence). O(values)."""
    return np.fromiter(((v,) for v in values.tolist()), dtype=object, count=len(values))
