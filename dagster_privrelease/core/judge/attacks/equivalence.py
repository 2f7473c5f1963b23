"""The value-equivalence attack (taxonomy Defs. 18-22, Examples 7-9) for the instances ``W = e_a - e_b``.

Classes of all releases are rows of a person matrix S (who is in each class, from the hosting groups) and of a
value matrix U (published value counts); a W with ``W . U = 0`` links the persons only on one side to those only
on the other (the same multiset of values). A link discloses when, for e = 1, the two people's lifetime
candidate sets (``intersection``) share fewer values than the bound (the interior attack, Def. 22).

Judged release by release (issue #12): the pairs of classes (a, b) with b in release n are found from release
n and the attack's memo of release n-1 (``_State``: every earlier class's members and signature, how many linked
pairs there are of each e, and the 1-equivalences, whose disclosure is judged again each release because the
lifetime candidate sets shrink). The window of ``pipeline.judge`` (releases n-1 and n) suffices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...encoding import dense_unique, sensitive_codes, unique_rows
from ...grouping import group_keys, popcount
from ..history import Bound, History, Report
from ..report import skipped
from .intersection import NO_DISCLOSURE, intersection_runs

#: The memo names of the attack (``History.memo``): the members of every class, the signatures, the
#: 1-equivalences, the linked pairs of the last release and the counts of linked pairs per e with the status.
MEMBERS, SIGNATURES, LINKS, RECENT, TALLY = ("equivalence", "equivalence.signatures", "equivalence.links",
                                             "equivalence.recent", "equivalence.tally")

#: ``_State.status``: every release so far homogeneous, or one was not (the attack is skipped from then on).
OK, NON_HOMOGENEOUS = 0, 1

_NON_HOMOGENEOUS = "non-homogeneous release: Defs. 18-20 are stated over classes"


@dataclass
class _State:
    """What the attack keeps of releases 1..j (its memo of release j), a function of those releases alone.

    members:    one row per hosting row (a genuine tuple in its class): ``id, release_id, group_id, sig`` (its
                class's signature, a row of ``signatures``), ``size`` (the class's published rows, counterfeits
                included), ``real`` (its genuine tuples).
    signatures: the distinct value-count rows U_k of the classes seen (signatures x ``spec.sensitive_values``).
    links:      the 1-equivalences found (``release_a, group_a, release_b, group_b, person_a, person_b``: the one
                person only in class a, and the one only in class b).
    recent:     the linked pairs release j added (``release_a, group_a, release_b, group_b, e``; release_b = j).
    e:          ``e[k]``: how many linked pairs (both sides holding a real person, ``0 < e``) have e = k.
    status:     ``OK`` or ``NON_HOMOGENEOUS`` (then the frames are empty).
    """

    members: pd.DataFrame
    signatures: np.ndarray
    links: pd.DataFrame
    recent: pd.DataFrame
    e: np.ndarray
    status: int


def _empty_state(history: History, status: int = OK) -> _State:
    """The state before release 1 (or of a history the attack is skipped on). O(1)."""
    ident = history.spec.id
    kind = history.hosting[ident].dtype if history.hosting is not None else np.dtype(object)
    ints = {c: pd.Series([], dtype=np.int64) for c in ("release_id", "group_id", "sig", "size", "real")}
    members = pd.DataFrame({ident: pd.Series([], dtype=kind), **ints})
    links = pd.DataFrame({**{c: pd.Series([], dtype=np.int64) for c in ("release_a", "group_a", "release_b",
                                                                         "group_b")},
                          "person_a": pd.Series([], dtype=kind), "person_b": pd.Series([], dtype=kind)})
    recent = pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in ("release_a", "group_a", "release_b", "group_b",
                                                                       "e")})
    width = len(history.spec.sensitive_values)
    return _State(members, np.zeros((0, width), dtype=np.int64), links, recent, np.zeros(1, dtype=np.int64), status)


def _signature_codes(known: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The signature code of each row of ``counts`` among the ``known`` signatures (row i has code i), new rows
    getting the next codes in order of first appearance; returns ``(codes, known with the new rows appended)``.
    One ``unique_rows`` over both: O((signatures + classes) x values log)."""
    if not len(counts):
        return np.zeros(0, dtype=np.int64), known
    _, inverse, _ = unique_rows(np.vstack([known, counts]))
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


def _release_members(history: History, state: _State, table: pd.DataFrame,
                     release_id: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Release j's genuine tuples as ``members`` rows (``_State``), and the signatures with j's new ones. The
    classes of j: its published rows (``table``) by ``group_id``; U_k their value counts (a null value counts nowhere).
    O(n_j log n_j + classes_j x values + signatures x values)."""
    spec = history.spec
    assert history.hosting is not None
    width = len(spec.sensitive_values)
    groups, inverse = dense_unique(table["group_id"].to_numpy(np.int64))
    codes = sensitive_codes(table, spec)
    known = codes >= 0
    counts = np.bincount(inverse[known] * width + codes[known], minlength=len(groups) * width)
    counts = counts.reshape(len(groups), width).astype(np.int64)
    sig, signatures = _signature_codes(state.signatures, counts)
    host = history.hosting[history.hosting["release_id"] == release_id]
    group = host["group_id"].to_numpy(np.int64)
    cls = np.searchsorted(groups, group)
    real = np.bincount(cls, minlength=len(groups))
    return pd.DataFrame({spec.id: host[spec.id].to_numpy(), "release_id": np.int64(release_id), "group_id": group,
                         "sig": sig[cls], "size": counts.sum(axis=1)[cls], "real": real[cls]}), signatures


def _new_pairs(history: History, old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """The pairs of classes (a earlier, b in the new release) with the same signature that share a person, and
    what they share: ``key_a`` (``grouping.group_keys``), ``release_a, group_a, group_b, common, size, real_a,
    real_b``. Each earlier row of a person of the new release looks its person up there (one hash look-up: a
    person is in one class of a release) and is kept when the signatures agree; the kept rows are counted per
    (a, b) after one sort. O(memo) for the look-up, then O(shared rows log), the shared rows being each person's
    earlier classes with its signature."""
    ident = history.spec.id
    at = pd.Index(new[ident].to_numpy()).get_indexer(old[ident].to_numpy())
    seen = np.flatnonzero(at >= 0)
    at = at[seen]
    same = old["sig"].to_numpy(np.int64)[seen] == new["sig"].to_numpy(np.int64)[at]
    seen, at = seen[same], at[same]
    key_a = group_keys(old["release_id"].to_numpy()[seen], old["group_id"].to_numpy()[seen])
    group_b = new["group_id"].to_numpy(np.int64)[at]
    order = np.lexsort((group_b, key_a))
    key_a, group_b, seen, at = key_a[order], group_b[order], seen[order], at[order]
    start = np.flatnonzero(np.r_[True, (key_a[1:] != key_a[:-1]) | (group_b[1:] != group_b[:-1])]) if len(order) \
        else np.zeros(0, dtype=np.int64)
    first, firstb = seen[start], at[start]
    return pd.DataFrame({"key_a": key_a[start], "release_a": old["release_id"].to_numpy(np.int64)[first],
                         "group_a": old["group_id"].to_numpy(np.int64)[first], "group_b": group_b[start],
                         "common": np.diff(np.r_[start, len(order)]), "size": old["size"].to_numpy(np.int64)[first],
                         "real_a": old["real"].to_numpy(np.int64)[first],
                         "real_b": new["real"].to_numpy(np.int64)[firstb]})


def _only_persons(history: History, links: pd.DataFrame, mine: pd.DataFrame, other: pd.DataFrame,
                  side: str) -> np.ndarray:
    """For 1-equivalences (one row of ``links`` each, with ``key_a, key_b``), the one person of the class on
    ``side`` ("a" or "b"; its members in ``mine``) who is not in the class on the other side (members in
    ``other``). Two joins on the classes' keys: O(members of those classes)."""
    ident = history.spec.id
    here, there = ("key_a", "key_b") if side == "a" else ("key_b", "key_a")
    rows = links[[here, there]].reset_index(names="link")
    inside = rows.merge(mine.rename(columns={"key": here}), on=here)
    shared = inside.merge(other.rename(columns={"key": there}), on=[there, ident], how="left", indicator=True)
    alone = shared[shared["_merge"] == "left_only"].sort_values("link")
    assert len(alone) == len(links), "a 1-equivalence has one person only on each side"
    return alone[ident].to_numpy()


def _fold(history: History, state: _State, release_id: int) -> _State:
    """``state`` (releases before j) with release j folded in: its classes paired with every earlier class of
    the same signature sharing a person (``_new_pairs``); e = |P_a| - |P_a and P_b| (counterfeits are persons of
    their own, seen once). O(memo + shared rows + classes_j x values)."""
    if state.status == NON_HOMOGENEOUS:
        return state
    table = history.release(release_id)
    if table["group_id"].isna().any():
        return _empty_state(history, NON_HOMOGENEOUS)
    ident = history.spec.id
    new, signatures = _release_members(history, state, table, release_id)
    pairs = _new_pairs(history, state.members, new)
    common = pairs["common"].to_numpy(np.int64)
    e = pairs["size"].to_numpy(np.int64) - common
    linking = (e > 0) & (pairs["real_a"].to_numpy(np.int64) > common) & (pairs["real_b"].to_numpy(np.int64) > common)
    counts = np.bincount(e[linking]) if linking.any() else np.zeros(1, dtype=np.int64)
    tally = np.zeros(max(len(counts), len(state.e)), dtype=np.int64)
    tally[: len(counts)] += counts
    tally[: len(state.e)] += state.e
    recent = pd.DataFrame({"release_a": pairs["release_a"].to_numpy(np.int64)[linking],
                           "group_a": pairs["group_a"].to_numpy(np.int64)[linking], "release_b": np.int64(release_id),
                           "group_b": pairs["group_b"].to_numpy(np.int64)[linking], "e": e[linking]})
    ones = pairs[linking & (e == 1)].reset_index(drop=True)
    links = state.links
    if len(ones):
        ones["key_b"] = group_keys(np.full(len(ones), release_id), ones["group_b"].to_numpy())
        old = state.members.assign(key=group_keys(state.members["release_id"].to_numpy(),
                                                  state.members["group_id"].to_numpy()))
        old = old[old["key"].isin(ones["key_a"])][["key", ident]]
        mine = new.assign(key=group_keys(new["release_id"].to_numpy(), new["group_id"].to_numpy()))
        mine = mine[mine["key"].isin(ones["key_b"])][["key", ident]]
        found = pd.DataFrame({"release_a": ones["release_a"].to_numpy(np.int64),
                              "group_a": ones["group_a"].to_numpy(np.int64), "release_b": np.int64(release_id),
                              "group_b": ones["group_b"].to_numpy(np.int64),
                              "person_a": _only_persons(history, ones, old, mine, "a"),
                              "person_b": _only_persons(history, ones, mine, old, "b")})
        links = pd.concat([links, found], ignore_index=True) if len(links) else found
    members = pd.concat([state.members, new], ignore_index=True) if len(state.members) else new
    return _State(members, signatures, links, recent, tally, OK)


def _encode(history: History, release_id: int, state: _State) -> None:
    """Record ``state`` as the attack's memo of ``release_id`` (plain int and id columns, for Parquet; the
    signatures as ``sig, value, count`` rows; the counts per e with the status on every row). O(memo)."""
    sig, value = np.nonzero(state.signatures)
    history.memo[(MEMBERS, release_id)] = state.members
    history.memo[(SIGNATURES, release_id)] = pd.DataFrame({
        "sig": sig.astype(np.int64), "value": value.astype(np.int64),
        "count": state.signatures[sig, value].astype(np.int64), "signatures": np.int64(len(state.signatures))})
    history.memo[(LINKS, release_id)] = state.links
    history.memo[(RECENT, release_id)] = state.recent
    history.memo[(TALLY, release_id)] = pd.DataFrame({"e": np.arange(len(state.e), dtype=np.int64),
                                                      "pairs": state.e, "status": np.int64(state.status)})


def _decode(history: History, frames: list[pd.DataFrame | None]) -> _State | None:
    """The ``_State`` of memo frames (``_encode``), None when one is missing. O(memo)."""
    if any(f is None for f in frames):
        return None
    members, signatures, links, recent, tally = frames
    assert members is not None and signatures is not None and links is not None and recent is not None
    assert tally is not None
    empty = _empty_state(history, int(tally["status"].iloc[0]) if len(tally) else OK)
    rows = int(signatures["signatures"].iloc[0]) if len(signatures) else 0
    dense = np.zeros((rows, len(history.spec.sensitive_values)), dtype=np.int64)
    dense[signatures["sig"].to_numpy(np.int64), signatures["value"].to_numpy(np.int64)] = signatures["count"]
    e = np.zeros(max(1, len(tally)), dtype=np.int64)
    e[tally["e"].to_numpy(np.int64)] = tally["pairs"].to_numpy(np.int64)
    return _State(members if len(members) else empty.members, dense, links if len(links) else empty.links,
                  recent if len(recent) else empty.recent, e, empty.status)


def _state(history: History) -> _State:
    """The attack's memo of the last release n, recorded in ``history.memo``: read back when this history was
    attacked already, else the memo of release n-1 (``History.previous_memo``; through a window it must be
    there) with release n folded in, else (a complete history without it) every release folded from release 1.
    O(memo + release n's shared rows) with the memo; from scratch, that for every release."""
    ids = history.release_ids
    names = (MEMBERS, SIGNATURES, LINKS, RECENT, TALLY)
    if not ids:
        return _empty_state(history)
    done = _decode(history, [history.memo.get((n, ids[-1])) for n in names])
    if done is not None:
        return done
    state = _decode(history, [history.previous_memo(n) for n in names])
    folded = ids[-1:] if state is not None else ids
    state = _empty_state(history) if state is None else state
    for j in folded:
        state = _fold(history, state, j)
    _encode(history, ids[-1], state)
    return state


def _lifetime_sizes(history: History, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Per pair of people (``left[i]``, ``right[i]``), the size of the intersection of their lifetime candidate
    sets: each person's is the AND of its intersection runs (``intersection_runs``, the judge's memo), the
    intersection of its candidate sets over every release it appears in. O(runs seen + pairs)."""
    ident = history.spec.id
    runs = intersection_runs(history)
    runs = runs[runs[ident].isin(np.concatenate([left, right]))]
    words = runs[[c for c in runs.columns if c.startswith("w") and c[1:].isdigit()]].to_numpy(np.uint64)
    person = runs["person"].to_numpy(np.int64)
    starts = np.flatnonzero(np.r_[True, person[1:] != person[:-1]]) if len(person) else np.empty(0, np.int64)
    lifetime = np.bitwise_and.reduceat(words, starts, axis=0) if len(starts) else words
    at = pd.Index(runs[ident].to_numpy()[starts])
    return popcount(lifetime[at.get_indexer(left)] & lifetime[at.get_indexer(right)])


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
    Violations, one row per pair of classes (``release_a, group_a, release_b, group_b, e, only_a, only_b,
    combined_size, kind``, sorted by the classes): the linked pairs below the bound that the last release adds
    (``kind`` "linked pair, no value disclosed" or "disclosing link"), and every disclosing link of the
    history (a link of earlier releases discloses once later releases narrow its people's candidate sets). The
    benign links of earlier releases were listed when those releases were judged; listing them again would make
    every report as long as the history. Summary: ``linked_pairs_checked`` (instances over the whole history, e >
    0, both sides real), ``linked_pairs_below_bound`` (those with e below the bound), ``bound``, ``disclosed``
    (disclosing links of the history), ``min_e`` and ``linked_pairs_new`` (the pairs below the bound that the last
    release adds, listed).

    Incremental (``_state``): judging release n pairs release n's classes with the earlier ones through the memo
    of release n-1, O(memo + n_n log n_n + shared rows + classes_n x values), the shared rows being each person
    of release n times its earlier classes of the same signature; then the 1-equivalences of the whole history are
    judged again against the lifetime candidate sets (``intersection_runs``, kept release by release), O(runs seen
    + 1-equivalences), and the listed pairs are spelled out from the members of their classes, O(memo + listed x
    class size). The memo holds a row per genuine tuple published (the members of every class), the distinct
    signatures, the 1-equivalences and the last release's linked pairs; it is a function of the releases alone
    (any bound). From scratch (a complete history without the memo), every release is folded in turn.
    """
    if history.hosting is None:
        return skipped("equivalence", "no hosting groups: the persons of each class are unknown")
    state = _state(history)
    if state.status == NON_HOMOGENEOUS:
        return skipped("equivalence", _NON_HOMOGENEOUS)
    limit, keys = bound.values, ["release_a", "group_a", "release_b", "group_b"]
    links = state.links
    if history.snapshots is not None:  # always folded, so that the intersection runs' memo goes on release by release
        combined = _lifetime_sizes(history, links["person_a"].to_numpy(), links["person_b"].to_numpy())
    else:
        combined = np.ones(len(links), dtype=np.int64)
    disclosing = (1 < limit) & (combined < limit)
    earlier = disclosing & (links["release_b"].to_numpy(np.int64) < history.release_ids[-1])
    older = pd.DataFrame({**{k: links[k].to_numpy(np.int64)[earlier] for k in keys},
                          "e": np.ones(int(earlier.sum()), dtype=np.int64),
                          "only_a": list(zip(links["person_a"].to_numpy()[earlier].tolist(), strict=True)),
                          "only_b": list(zip(links["person_b"].to_numpy()[earlier].tolist(), strict=True)),
                          "combined_size": combined[earlier]})
    recent = state.recent[state.recent["e"] < limit].reset_index(drop=True)
    only_a, only_b = _only_lists(history, state.members, recent)
    size = recent["e"].to_numpy(np.int64).copy()
    ones = size == 1
    if ones.any():
        by_link = pd.Series(combined, index=pd.MultiIndex.from_frame(links[keys]))
        size[ones] = by_link.reindex(pd.MultiIndex.from_frame(recent.loc[ones, keys])).to_numpy(np.int64)
    new = pd.DataFrame({**{k: recent[k].to_numpy(np.int64) for k in keys}, "e": recent["e"].to_numpy(np.int64),
                        "only_a": only_a, "only_b": only_b, "combined_size": size})
    violations = pd.concat([older, new], ignore_index=True) if len(older) else new
    violations = violations.sort_values(keys, kind="stable", ignore_index=True)
    violations["kind"] = np.where((violations["e"] == 1) & (violations["combined_size"] < limit), "disclosing link",
                                  "linked pair, no value disclosed")
    present = np.flatnonzero(state.e)
    summary = {"linked_pairs_checked": int(state.e.sum()), "linked_pairs_below_bound": int(state.e[: max(limit, 0)].sum()),
               "bound": limit, "disclosed": int(disclosing.sum()), "min_e": int(present[0]) if len(present) else 0,
               "linked_pairs_new": len(recent)}
    return Report("equivalence", not disclosing.any(), violations, summary)


def _only_lists(history: History, members: pd.DataFrame, pairs: pd.DataFrame) -> tuple[list[tuple], list[tuple]]:
    """Per pair of classes (``release_a, group_a, release_b, group_b``), the persons only in class a and those
    only in class b (sorted tuples), from the ``members`` rows of those classes (``_only``). O(memo) to select
    them, then O(pairs x largest class)."""
    if not len(pairs):
        return [], []
    key_a = group_keys(pairs["release_a"].to_numpy(), pairs["group_a"].to_numpy())
    key_b = group_keys(pairs["release_b"].to_numpy(), pairs["group_b"].to_numpy())
    involved = np.unique(np.r_[key_a, key_b])
    key = group_keys(members["release_id"].to_numpy(), members["group_id"].to_numpy())
    inside = np.isin(key, involved)
    found = pd.DataFrame({"cls": np.searchsorted(involved, key[inside]),
                          "who": members[history.spec.id].to_numpy()[inside]})
    mine, other = np.searchsorted(involved, key_a), np.searchsorted(involved, key_b)
    return _only(found, mine, other), _only(found, other, mine)


def _only(members: pd.DataFrame, mine: np.ndarray, other: np.ndarray) -> list[tuple]:
    """Per pair p, the persons of class ``mine[p]`` not in class ``other[p]`` (sorted): every class's members
    as one padded row, in person order, of a (classes x largest class) table; a member of row ``mine[p]`` is
    alone when the key (p, person) is not among the keys of row ``other[p]``, which are sorted by construction
    (one ``searchsorted`` over all pairs). O(members log + pairs x largest class)."""
    members = members.sort_values(["cls", "who"], kind="stable")
    cls = members["cls"].to_numpy()
    who, people = pd.factorize(members["who"], sort=True)
    size = np.bincount(cls, minlength=int(max(mine.max(), other.max())) + 1)
    slot = np.arange(len(cls)) - np.concatenate(([0], np.cumsum(size)[:-1]))[cls]
    table = np.full((len(size), int(size.max())), -1, dtype=np.int64)
    table[cls, slot] = who
    a, b = table[mine], table[other]
    pair = np.arange(len(mine))[:, None] * len(people)
    keys_b = (pair + b)[b >= 0]
    keys_a = pair + a
    at = np.minimum(np.searchsorted(keys_b, keys_a), len(keys_b) - 1)
    alone = (a >= 0) & (keys_b[at] != keys_a)
    rows, cols = np.nonzero(alone)
    return _tuples_by_row(np.asarray(people, dtype=object)[a[rows, cols]], rows, len(mine))


def _tuples_by_row(values: np.ndarray, rows: np.ndarray, n: int) -> list[tuple]:
    """``values`` grouped into one tuple per row 0..n-1 (``rows`` sorted), rows of equal length at once.
    O(values)."""
    counts = np.bincount(rows, minlength=n)
    start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    out: list[tuple] = [()] * n
    for c in np.unique(counts[counts > 0]):
        which = np.flatnonzero(counts == c)
        block = values[start[which][:, None] + np.arange(c)]
        for row, items in zip(which.tolist(), map(tuple, block.tolist()), strict=True):
            out[row] = items
    return out
