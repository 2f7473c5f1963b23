"""The judge's verifiers: independent checkers of each guarantee over a release history.

A verifier reads only what the judge may read (``History``: published releases, R(j), and for publisher-side
checks the private snapshots and hosting groups) and never a model's internals. Each returns a ``Report`` whose
``violations`` frame has one row per thing that broke, naming the release, the group or the individual, and the
rule (with the paper's definition), so that a failed check says what to fix.

Single release (any table with the published columns; a ``release_id`` column, when present, keeps releases
apart so that one call checks a whole history):

- ``k_anonymity``: every QI group has at least k rows.
- ``l_diversity``: forms ``distinct``, ``entropy``, ``recursive`` (c, l) (Machanavajjhala et al., as cited by
  Xiao-Tao §1 and Shmueli-Tassa §2.3) and ``frequency`` (Shmueli-Tassa Def. 2.3: no value in more than 1/l of a
  group).
- ``m_uniqueness``: Xiao-Tao Def. 17: at least m rows, all sensitive values different.

Over releases:

- ``m_invariance``: Xiao-Tao Def. 17 condition 2 in Lemma 4's incremental form; ``counterfeit_accounting``:
  Def. 3; ``generalisation``: Def. 2 (2) and (4).
- ``m_distinct``: Li-Zhou Def. 15 (legal update instances, Def. 14, of update set signatures, Def. 13) and the
  stricter m-Distinct' (§IV-B).
- ``admits_world`` / ``world_diversity`` / ``sequential_l_diversity``: Shmueli-Tassa Defs. 3.1-3.2.
- ``xy_anonymity`` / ``xy_linkability``: Wang-Fung Defs. 3.1-3.2 on the join of two releases (§3.3), computed
  from matching partitions without materialising the join (§5.3-5.4).

``verify_history`` runs what the spec's model promises. QI groups: rows sharing ``(release_id, group_id)``; for
non-homogeneous releases (``group_id`` null), rows sharing the same generalised box (Shmueli-Tassa Eq. (2)).
Sensitive-value sets are exact bitsets (one bit per value of the domain), so signatures compare as integer rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_flow

from ..errors import SpecError
from .history import History, Report
from .spec import Spec

L_DIVERSITY_FORMS = ("distinct", "entropy", "recursive", "frequency")

M_INVARIANCE_RULE = "Xiao-Tao Def. 17 (2) / Lemma 4: a tuple's generalised hosting groups have the same signature"


# ----------------------------------------------------------------------------------------------------------------
# QI groups and sensitive-value bitsets
# ----------------------------------------------------------------------------------------------------------------


def bound_columns(table: pd.DataFrame) -> list[str]:
    """The ``A__lo`` / ``A__hi`` columns of a published table, in table order."""
    return [c for c in table.columns if c.endswith("__lo") or c.endswith("__hi")]


def group_keys(release_id: np.ndarray, group_id: np.ndarray) -> np.ndarray:
    """One int64 key per ``(release_id, group_id)`` pair of integers, ordered like the pairs."""
    release_id = np.asarray(release_id, dtype=np.int64)
    group_id = np.asarray(group_id, dtype=np.int64)
    return release_id * np.int64(1 << 32) + group_id


def unique_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(keys, return_index, return_inverse, return_counts)`` for int64 keys by one stable argsort
    (numpy's hash-based unique is several times slower on millions of distinct keys). ``first`` is the first
    position of each distinct key."""
    keys = np.asarray(keys, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    start = np.r_[True, ordered[1:] != ordered[:-1]] if len(keys) else np.zeros(0, dtype=bool)
    rank = np.cumsum(start) - 1
    inverse = np.empty(len(keys), dtype=np.int64)
    inverse[order] = rank
    counts = np.diff(np.r_[np.flatnonzero(start), len(keys)])
    return ordered[start], order[start], inverse, counts


def _homogeneous(table: pd.DataFrame) -> bool:
    """Every row has an integer ``group_id`` (Xiao-Tao Def. 2: a homogeneous release)."""
    if "group_id" not in table.columns or table["group_id"].isna().any():
        return False
    gid = table["group_id"]
    return pd.api.types.is_integer_dtype(gid.dtype) or bool((gid.to_numpy(np.float64) % 1 == 0).all())


def qi_groups(table: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """The QI group of every row: ``(index, groups)``.

    ``index[i]`` is the position in ``groups`` of row i's group. ``groups`` has ``release_id`` (if the table has
    one), ``group_id`` (null for non-homogeneous rows), the readable QI labels of the group's first row and
    ``size``, sorted by ``(release_id, group_id)``. Homogeneous rows (Xiao-Tao Def. 2) group by
    ``(release_id, group_id)`` (one integer sort, O(n log n)); rows with a null ``group_id`` group by their
    generalised box (Shmueli-Tassa Eq. (2)).
    """
    keys = [c for c in ("release_id", "group_id") if c in table.columns]
    if _homogeneous(table):
        release = table["release_id"].to_numpy() if "release_id" in table.columns else np.zeros(len(table))
        _, first, index, size = unique_keys(group_keys(release, table["group_id"].to_numpy()))
    else:
        frame = table[keys].copy()
        gid = table["group_id"] if "group_id" in table.columns else pd.Series(np.nan, index=table.index)
        bounds = table[bound_columns(table)]
        bounds = bounds.where(np.broadcast_to(gid.isna().to_numpy()[:, None], bounds.shape))
        frame = pd.concat([frame, bounds], axis=1)
        index = frame.groupby(list(frame.columns), dropna=False, sort=True).ngroup().to_numpy()
        first = pd.Series(np.arange(len(table))).groupby(index).first().to_numpy()
        size = np.bincount(index, minlength=len(first))
    labels = [c for c in table.columns if f"{c}__lo" in table.columns]
    groups = table.iloc[first][[*keys, *labels]].reset_index(drop=True)
    if "group_id" not in groups.columns:
        groups["group_id"] = pd.Series(pd.NA, index=groups.index, dtype="Int64")
    groups["size"] = size
    return index, groups


def value_codes(values: pd.Series, domain: Sequence[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """Integer codes of a sensitive column and the value of each code: ``domain`` first, unseen values after.
    One hash pass over the column; values compare as text (a null is the value ``"None"``/``"nan"``)."""
    local, uniques = pd.factorize(values, use_na_sentinel=False)
    text = pd.Index(uniques).astype(str)
    known = list(domain or ())
    vocabulary = known + sorted(set(text) - set(known))
    return pd.Index(vocabulary).get_indexer(text)[local], vocabulary


def codes_in(values: pd.Series, vocabulary: Sequence[str]) -> np.ndarray:
    """Codes of ``values`` in a given vocabulary (-1 for a value outside it), by one hash pass."""
    local, uniques = pd.factorize(values, use_na_sentinel=False)
    return pd.Index(vocabulary).get_indexer(pd.Index(uniques).astype(str))[local]


def bitsets(index: np.ndarray, codes: np.ndarray, count: int, width: int) -> np.ndarray:
    """The set of codes of each of ``count`` groups as a ``(count, ceil(width/64))`` uint64 bitset matrix.

    Distinct (group, code) pairs are sorted once; each (group, word) is an OR-reduction over a run of them.
    """
    words = max(1, -(-width // 64))
    out = np.zeros((count, words), dtype=np.uint64)
    pairs = unique_keys(np.asarray(index, dtype=np.int64) * np.int64(width) + codes)[0]
    if len(pairs) == 0:
        return out
    group, code = pairs // width, pairs % width
    cell = group * words + (code >> 6)
    starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
    bits = np.left_shift(np.uint64(1), (code & 63).astype(np.uint64))
    out.reshape(-1)[cell[starts]] = np.bitwise_or.reduceat(bits, starts)
    return out


def popcount(bits: np.ndarray) -> np.ndarray:
    """Number of set bits of each bitset row."""
    return np.bitwise_count(bits).sum(axis=1).astype(np.int64)


def describe(bits: np.ndarray, vocabulary: Sequence[str]) -> np.ndarray:
    """Readable ``{a, b}`` form of bitset rows; each distinct row (found by one lexsort) is spelled once."""
    if len(bits) == 0:
        return np.array([], dtype=object)
    order = np.lexsort(bits.T[::-1])
    ordered = bits[order]
    start = np.r_[True, (ordered[1:] != ordered[:-1]).any(axis=1)]
    distinct = np.ascontiguousarray(ordered[start])
    inverse = np.empty(len(bits), dtype=np.int64)
    inverse[order] = np.cumsum(start) - 1
    flags = np.unpackbits(distinct.view(np.uint8), axis=1, bitorder="little").astype(bool)
    names = np.array(list(vocabulary) + [""] * (flags.shape[1] - len(vocabulary)), dtype=object)
    text = np.array(["{" + ", ".join(names[row]) + "}" for row in flags], dtype=object)
    return text[inverse]


def _report(name: str, violations: pd.DataFrame, **summary) -> Report:
    return Report(name, len(violations) == 0, violations.reset_index(drop=True), summary)


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The non-empty violation frames stacked; when none has a row, the first frame emptied (its columns)."""
    found = [p for p in parts if len(p)]
    if not found:
        return parts[0].iloc[:0] if parts else pd.DataFrame(columns=["release_id", "group_id", "rule", "detail"])
    return pd.concat(found, ignore_index=True)


def _group_violations(groups: pd.DataFrame, bad: np.ndarray, rule: str, detail: Iterable[str]) -> pd.DataFrame:
    out = groups.loc[bad].copy()
    out["rule"] = rule
    out["detail"] = list(detail)
    return out.reset_index(drop=True)


# ----------------------------------------------------------------------------------------------------------------
# Single release: k-anonymity, l-diversity, m-uniqueness
# ----------------------------------------------------------------------------------------------------------------


def k_anonymity(table: pd.DataFrame, k: int) -> Report:
    """Every QI group has at least ``k`` rows (Xiao-Tao Def. 4's example; Sweeney). One violation per group."""
    _, groups = qi_groups(table)
    bad = groups["size"].to_numpy() < k
    detail = (f"{s} row(s) < k={k}" for s in groups["size"][bad])
    violations = _group_violations(groups, bad, f"k-anonymity: every QI group has at least k={k} rows", detail)
    return _report("k_anonymity", violations, k=k, groups=len(groups), smallest=int(groups["size"].min()))


def _value_counts(table: pd.DataFrame, sensitive: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """QI groups and the per-group sensitive-value counts ``(group, count)`` sorted by group then count desc."""
    index, groups = qi_groups(table)
    codes, _ = value_codes(table[sensitive])
    counts = pd.DataFrame({"group": index, "code": codes}).value_counts().rename("count").reset_index()
    counts = counts.sort_values(["group", "count"], ascending=[True, False], kind="stable").reset_index(drop=True)
    return groups, counts


def l_diversity(table: pd.DataFrame, sensitive: str, l: float,  # noqa: E741 (the paper's ℓ)
                form: str = "frequency", c: float = 1.0) -> Report:
    """Every QI group is l-diverse in the given form.

    - ``distinct``: at least l distinct sensitive values.
    - ``entropy``: ``-sum p log p >= log l`` over the group's value frequencies (Machanavajjhala et al.).
    - ``recursive``: recursive (c, l)-diversity: with value counts ``r_1 >= r_2 >= ... >= r_q``,
      ``r_1 < c * (r_l + ... + r_q)`` (Machanavajjhala et al.; Xiao-Tao §4.1 uses recursive (1/(m-1), 2)).
    - ``frequency``: no value in more than 1/l of the group, i.e. ``div(B) >= l`` (Shmueli-Tassa Def. 2.3; the
      "popular interpretation" of Xiao-Tao §1).
    """
    if form not in L_DIVERSITY_FORMS:
        raise SpecError(f"l_diversity.form: must be one of {list(L_DIVERSITY_FORMS)}, got {form!r}")
    groups, counts = _value_counts(table, sensitive)
    g = counts["group"].to_numpy()
    n = counts["count"].to_numpy().astype(np.float64)
    size = groups["size"].to_numpy().astype(np.float64)
    distinct = np.bincount(g, minlength=len(groups))
    top = counts.groupby("group")["count"].first().reindex(range(len(groups))).to_numpy()
    if form == "distinct":
        measure, bad = distinct.astype(np.float64), distinct < l
        rule = f"distinct l-diversity: at least l={l:g} distinct sensitive values per group"
    elif form == "entropy":
        p = n / size[g]
        measure = np.exp(np.bincount(g, weights=-p * np.log(p), minlength=len(groups)))
        bad = measure < l * (1 - 1e-12)
        rule = f"entropy l-diversity: exp(entropy) >= l={l:g} in every group"
    elif form == "recursive":
        rank = counts.groupby("group").cumcount().to_numpy()
        tail = np.bincount(g, weights=np.where(rank >= l - 1, n, 0.0), minlength=len(groups))
        measure = tail
        bad = ~(top < c * tail)
        rule = f"recursive (c={c:g}, l={l:g})-diversity: r_1 < c (r_l + ... + r_q) in every group"
    else:
        measure = size / top
        bad = measure < l * (1 - 1e-12)
        rule = f"frequency l-diversity (Shmueli-Tassa Def. 2.3): no value in more than 1/l={1 / l:.3g} of a group"
    detail = (
        f"size {int(s)}, {int(d)} distinct, most frequent value {int(t)} times, measure {m:.4g}"
        for s, d, t, m in zip(size[bad], distinct[bad], top[bad], measure[bad], strict=True)
    )
    violations = _group_violations(groups, bad, rule, detail)
    return _report("l_diversity", violations, l=l, form=form, groups=len(groups), violating_groups=int(bad.sum()))


def m_uniqueness(table: pd.DataFrame, sensitive: str, m: int) -> Report:
    """Every QI group has at least ``m`` rows, all with different sensitive values (Xiao-Tao Def. 17).

    Counterfeit rows count like any published row: the adversary cannot tell them apart (Def. 2 (3)).
    """
    index, groups = qi_groups(table)
    codes, vocabulary = value_codes(table[sensitive])
    return _m_uniqueness(groups, bitsets(index, codes, len(groups), len(vocabulary)), m)


def _m_uniqueness(groups: pd.DataFrame, values: np.ndarray, m: int) -> Report:
    """m-uniqueness from the groups and the bitsets of their values."""
    distinct = popcount(values)
    size = groups["size"].to_numpy()
    bad = (size < m) | (distinct < size)
    detail = (f"{s} row(s), {d} distinct sensitive value(s)" for s, d in zip(size[bad], distinct[bad], strict=True))
    violations = _group_violations(
        groups, bad, f"m-uniqueness (Xiao-Tao Def. 17): at least m={m} rows, all sensitive values different", detail
    )
    return _report("m_uniqueness", violations, m=m, groups=len(groups), violating_groups=int(bad.sum()))


# ----------------------------------------------------------------------------------------------------------------
# Over a history: hosting, m-invariance, counterfeits, generalisation
# ----------------------------------------------------------------------------------------------------------------


def _require(history: History, *parts: str) -> None:
    missing = [p for p in parts if getattr(history, p) is None]
    if missing:
        raise SpecError(f"history: the verifier needs the private {missing} (publisher-side verification)")


class _Hosted:
    """A homogeneous history indexed once for the publisher-side verifiers (Xiao-Tao Defs. 1-3).

    ``row_group``: group index (into ``groups``, the ``qi_groups`` frame) of each published row; ``host_group``:
    group index of each hosting row (-1 when the hosting names a group that was not published); ``codes`` and
    ``vocabulary``: the published sensitive values as integer codes (spec domain first); ``signatures``: the
    signature (Def. 16) of every group as a bitset row. ``snapshot_host``: for each snapshot row, its hosting row
    (-1 when not hosted), computed on first use. Everything is integer keys, sorts and searches.
    """

    def __init__(self, history: History):
        _require(history, "hosting")
        if not _homogeneous(history.releases):
            raise SpecError("history: publisher-side verification needs homogeneous releases (integer group_id)")
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
        """Index of each ``(release_id, group_id)`` in ``groups``, -1 when not published."""
        keys = group_keys(release_id, np.nan_to_num(np.asarray(group_id, dtype=np.float64), nan=-1))
        at = np.minimum(np.searchsorted(self.group_key, keys), len(self.group_key) - 1)
        found = len(self.group_key) > 0 and self.group_key[at] == keys
        return np.where(found, at, -1)

    @property
    def snapshot_host(self) -> np.ndarray:
        if self._snapshot_host is None:
            _require(self.history, "snapshots")
            snap, ident = self.history.snapshots, self.spec.id
            codes, uniques = pd.factorize(pd.concat([self.hosting[ident], snap[ident]], ignore_index=True))
            host_key = self.hosting["release_id"].to_numpy(np.int64) * len(uniques) + codes[: len(self.hosting)]
            snap_key = snap["release_id"].to_numpy(np.int64) * len(uniques) + codes[len(self.hosting):]
            order = np.argsort(host_key, kind="stable")
            at = np.minimum(np.searchsorted(host_key[order], snap_key), max(len(order) - 1, 0))
            found = (len(order) > 0) & (host_key[order][at] == snap_key)
            self._snapshot_host = np.where(found, order[at], -1)
        return self._snapshot_host

    def unpublished(self) -> pd.DataFrame:
        """Hosting rows naming a group that is not in the published release."""
        bad = self.hosting[self.host_group < 0]
        return bad[["release_id", self.spec.id, "group_id"]].assign(
            rule="Xiao-Tao Def. 2 (2): every tuple of T(j) has a generalised tuple in its hosting group of T*(j)",
            detail="hosting group not in the published release",
        )


def _previous_appearance(hosting: pd.DataFrame, ident: str) -> tuple[np.ndarray, np.ndarray]:
    """``(order, prev)``: hosting rows sorted by (individual, release) and, for each, the position in ``order``
    of the same individual's previous appearance (-1 for a first appearance)."""
    ids = pd.factorize(hosting[ident])[0]
    order = np.lexsort((hosting["release_id"].to_numpy(), ids))
    same = np.r_[False, ids[order][1:] == ids[order][:-1]]
    prev = np.where(same, np.arange(len(order)) - 1, -1)
    return order, prev


def _consecutive(hosted: _Hosted) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of consecutive appearances of one individual, both in published groups:
    ``(rows, now, before)`` with the hosting row of the later appearance and the two group indices."""
    order, prev = _previous_appearance(hosted.hosting, hosted.spec.id)
    group = hosted.host_group[order]
    pair = (prev >= 0) & (group >= 0)
    pair[pair] &= group[prev[pair]] >= 0
    at = np.flatnonzero(pair)
    return order[at], group[at], group[prev[at]]


def _appearance_violations(hosted: _Hosted, rows: np.ndarray, now: np.ndarray, before: np.ndarray,
                           rule: str, **columns) -> pd.DataFrame:
    """Violations naming the individual, the release and group, the previous release and group, then
    ``columns`` (e.g. the two signatures) and the rule."""
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


def m_invariance(history: History, m: int | None = None) -> list[Report]:
    """Xiao-Tao Def. 17 over the whole history: every release m-unique, and every tuple's generalised hosting
    groups share one signature (Def. 16), counterfeits included.

    Condition 2 is checked in Lemma 4's incremental form: each appearance of a tuple against its previous
    appearance (the predecessor release when the tuple was in it). By transitivity this is Def. 17 (2) over all
    of a tuple's appearances, also for a tuple that returns after a gap. Needs ``history.hosting``.
    Returns ``[m_uniqueness, m_invariance]``; the second names each individual whose signature changed.
    O(n log n) in the number of published and hosting rows.
    """
    return _m_invariance_reports(_Hosted(history), m if m is not None else history.spec.model.params["m"])


def _m_invariance_reports(hosted: _Hosted, m: int) -> list[Report]:
    sig = hosted.signatures
    rows, now, before = _consecutive(hosted)
    changed = (sig[now] != sig[before]).any(axis=1)
    violations = _appearance_violations(
        hosted, rows[changed], now[changed], before[changed], M_INVARIANCE_RULE,
        signature=describe(sig[now[changed]], hosted.vocabulary),
        previous_signature=describe(sig[before[changed]], hosted.vocabulary))
    invariant = _report(
        "m_invariance", _concat([violations, hosted.unpublished()]), m=m,
        individuals=int(hosted.hosting[hosted.spec.id].nunique()), republished=len(rows), changed=int(changed.sum()),
    )
    return [_m_uniqueness(hosted.groups, sig, m), invariant]


def counterfeit_accounting(history: History) -> Report:
    """R(j) tells the truth (Xiao-Tao Def. 3): per published group, rows minus hosted genuine tuples equals the
    group's count in R(j) (0 when absent); R(j) names only published groups, with positive counts. With the
    snapshots, also per group and sensitive value: the genuine tuples' values are all published (Def. 2 (2)), so
    the counterfeits are exactly the surplus rows."""
    return _counterfeit_accounting(_Hosted(history))


def _counterfeit_accounting(hosted: _Hosted) -> Report:
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
    parts = [_group_violations(groups, bad, "Xiao-Tao Def. 3: R(j) counts the counterfeits of each group", detail)]
    stray = r[(at < 0) | (r["count"].to_numpy() <= 0)]
    parts.append(stray[["release_id", "group_id"]].assign(
        rule="Xiao-Tao Def. 3: R(j) has one row <g, c> per published group holding c >= 1 counterfeits",
        detail=[f"count {c} for group {g}" for g, c in zip(stray["group_id"], stray["count"], strict=True)],
    ))
    if hosted.history.snapshots is not None:
        parts.append(_missing_genuine_values(hosted))
    return _report("counterfeit_accounting", _concat(parts), counterfeits=int(declared.sum()),
                   groups_with_counterfeits=int((declared > 0).sum()))


def _missing_genuine_values(hosted: _Hosted) -> pd.DataFrame:
    """(group, value) pairs where more genuine tuples carry the value than published rows do."""
    snap = hosted.history.snapshots
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


def generalisation(history: History) -> Report:
    """Every release truthfully generalises its snapshot (Xiao-Tao Def. 2 (2) and (4)): all rows of a group
    share one box, and each hosted tuple's QI values lie inside its group's box. Needs snapshots and hosting."""
    _require(history, "snapshots", "hosting")
    return _generalisation(_Hosted(history))


def _generalisation(hosted: _Hosted) -> Report:
    spec, releases, snap = hosted.spec, hosted.releases, hosted.history.snapshots
    qis = [q for q in spec.quasi_identifiers if f"{q}__lo" in releases.columns]
    bounds = releases[[f"{q}__{side}" for q in qis for side in ("lo", "hi")]].astype(np.float64)
    by_group = bounds.groupby(hosted.row_group, sort=True)
    lowest, highest = by_group.min().to_numpy(), by_group.max().to_numpy()
    torn = (lowest != highest).any(axis=1)
    parts = [_group_violations(hosted.groups, torn, "Xiao-Tao Def. 2 (4): one box per QI group",
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
        value = _leaf_values(snap[q].iloc[at], spec, q)
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
    return _report("generalisation", _concat(parts), tuples=len(at))


def _leaf_values(values: pd.Series, spec: Spec, name: str) -> np.ndarray:
    """A QI column as numbers: numeric values, or leaf ranks of a categorical's taxonomy (-1 when unknown)."""
    qi = spec.quasi_identifiers[name]
    if qi.numeric:
        return values.to_numpy(dtype=np.float64)
    return pd.Index(qi.taxonomy.leaves).get_indexer(values.astype(str)).astype(np.float64)


# ----------------------------------------------------------------------------------------------------------------
# m-Distinct (Li-Zhou)
# ----------------------------------------------------------------------------------------------------------------


def update_sets(
    candidate_update_sets: Mapping[str, Iterable[str]], vocabulary: list[str]
) -> tuple[np.ndarray, list[str]]:
    """CUS(v) of every value as bitset rows (Li-Zhou Def. 12), and the vocabulary grown by the sets' values.

    A value without an entry can only stay itself: CUS(v) = {v} (no internal update; m-Distinct then reduces to
    m-invariance).
    """
    vocabulary = list(vocabulary)
    for key, values in candidate_update_sets.items():
        for v in [key, *values]:
            if str(v) not in vocabulary:
                vocabulary.append(str(v))
    position = {v: i for i, v in enumerate(vocabulary)}
    rows, codes = [], []
    for i, v in enumerate(vocabulary):
        members = {position[str(u)] for u in candidate_update_sets.get(v, (v,))}
        rows += [i] * len(members)
        codes += sorted(members)
    return bitsets(np.array(rows, dtype=np.int64), np.array(codes, dtype=np.int64), len(vocabulary),
                   len(vocabulary)), vocabulary


def m_distinct(
    history: History,
    candidate_update_sets: Mapping[str, Iterable[str]],
    m: int | None = None,
    strict: bool = False,
) -> list[Report]:
    """Li-Zhou Def. 15 (m-Distinct) over the history, in its incremental form (§IV-A): every release m-unique,
    and for every record, the candidate sensitive set C_j of its group in a release is a legal update instance
    (Def. 14) of the update set signature USS (Def. 13) of its group in its previous release:

    1. ``|C_j| = |USS|`` (rows of the two groups, counterfeits included);
    2. every value of C_j lies in some CUS of USS;
    3. every CUS of USS contains some value of C_j.

    ``strict`` adds m-Distinct' (§IV-B): the CUSs of the group of a record's first release are pairwise disjoint.
    ``candidate_update_sets`` maps a sensitive value to CUS(value) (see ``update_sets``). Needs hosting.
    Returns ``[m_uniqueness, m_distinct]``; violations name the record, the two releases and the condition.
    """
    m = m if m is not None else history.spec.model.params["m"]
    return _m_distinct_reports(_Hosted(history), candidate_update_sets, m, strict)


def _m_distinct_reports(
    hosted: _Hosted, candidate_update_sets: Mapping[str, Iterable[str]], m: int, strict: bool
) -> list[Report]:
    cus, vocabulary = update_sets(candidate_update_sets, hosted.vocabulary)
    codes, count = hosted.codes, len(hosted.groups)
    sig = bitsets(hosted.row_group, codes, count, len(vocabulary))
    union = _group_or(hosted.row_group, cus[codes], count)
    size = hosted.groups["size"].to_numpy()
    rows, now, before = _consecutive(hosted)
    failed = {
        "Li-Zhou Def. 14 (1): |C_j| = |USS(t_i)|": size[now] != size[before],
        "Li-Zhou Def. 14 (2): every value of C_j is in some CUS of USS(t_i)": (sig[now] & ~union[before]).any(axis=1),
        "Li-Zhou Def. 14 (3): every CUS of USS(t_i) meets C_j": _uncovered_update_sets(
            hosted.row_group, codes, cus, sig, before, now),
    }
    parts = []
    for rule, bad in failed.items():
        parts.append(_appearance_violations(
            hosted, rows[bad], now[bad], before[bad], rule, candidate_sensitive_set=describe(sig[now[bad]], vocabulary),
            previous_values=describe(sig[before[bad]], vocabulary)))
    if strict:
        order, prev = _previous_appearance(hosted.hosting, hosted.spec.id)
        group = hosted.host_group[order]
        firsts = np.unique(group[(prev < 0) & (group >= 0)])
        sizes = np.bincount(hosted.row_group, weights=popcount(cus[codes]), minlength=count).astype(np.int64)
        overlap = np.zeros(count, dtype=bool)
        overlap[firsts] = sizes[firsts] != popcount(union[firsts])
        parts.append(_group_violations(
            hosted.groups, overlap, "Li-Zhou m-Distinct' (§IV-B): the CUSs of a record's first group are disjoint",
            (f"values {d}" for d in describe(sig[overlap], vocabulary))))
    parts.append(hosted.unpublished())
    report = _report("m_distinct", _concat(parts), m=m, strict=strict, republished=len(rows))
    return [_m_uniqueness(hosted.groups, sig, m), report]


def _group_or(row_group: np.ndarray, bits: np.ndarray, count: int) -> np.ndarray:
    """OR of the bitset rows of each group (rows of ``bits`` belong to ``row_group``), by one sort and reduceat."""
    out = np.zeros((count, bits.shape[1]), dtype=np.uint64)
    if len(row_group) == 0:
        return out
    order = np.argsort(row_group, kind="stable")
    ordered = row_group[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    out[ordered[starts]] = np.bitwise_or.reduceat(bits[order], starts, axis=0)
    return out


def _uncovered_update_sets(
    row_group: np.ndarray, codes: np.ndarray, cus: np.ndarray, sig: np.ndarray, before: np.ndarray, now: np.ndarray
) -> np.ndarray:
    """For each pair (before[i], now[i]): does some row of group ``before`` have a CUS disjoint from ``now``'s
    values? Distinct pairs only, each expanded to the rows of its ``before`` group."""
    width = np.int64(len(sig))
    keys, _, inverse, _ = unique_keys(before * width + now)
    pairs = np.stack([keys // width, keys % width], axis=1)
    order = np.argsort(row_group, kind="stable")
    start = np.searchsorted(row_group[order], pairs[:, 0], side="left")
    stop = np.searchsorted(row_group[order], pairs[:, 0], side="right")
    length = stop - start
    pair_of_row = np.repeat(np.arange(len(pairs)), length)
    offset = np.arange(length.sum()) - np.repeat(np.cumsum(length) - length, length)
    rows = order[np.repeat(start, length) + offset]
    empty = ~(cus[codes[rows]] & sig[pairs[pair_of_row, 1]]).any(axis=1)
    bad_pair = np.bincount(pair_of_row, weights=empty, minlength=len(pairs)) > 0
    return bad_pair[inverse]


# ----------------------------------------------------------------------------------------------------------------
# Possible worlds (Shmueli-Tassa)
# ----------------------------------------------------------------------------------------------------------------


def worlds_from_permutations(truth: pd.DataFrame, permutations: pd.DataFrame, spec: Spec) -> dict[str, pd.DataFrame]:
    """Full tables of the fake worlds stored as ``private.possible_world(world, <id>, source_<id>)``.

    World tuple of ``<id>`` = the identifier and QIs of ``<id>`` with the non-identifiers and sensitive value of
    ``source_<id>`` (Shmueli-Tassa Eq. (5) and (8)).
    """
    source = f"source_{spec.id}"
    carried = truth[[spec.id, *spec.non_identifiers, spec.sensitive]].rename(columns={spec.id: source})
    own = truth[[spec.id, *spec.quasi_identifiers]]
    worlds = {}
    for name, perm in permutations.groupby("world", sort=True):
        world = perm[[spec.id, source]].merge(own, on=spec.id).merge(carried, on=source)
        worlds[str(name)] = world.drop(columns=source)[truth.columns.intersection(spec.columns)]
    return worlds


def _released(release: pd.DataFrame, spec: Spec) -> tuple[list[str], list[str]]:
    """Quasi-identifiers this release generalises (bounds in some row; a row's null bounds are a suppressed cell,
    §2.1), and the exact attributes it releases (non-identifiers and sensitive value not null in every row; an
    attribute null in some rows only is matched as released, so its nulls match nothing: strict)."""
    qis = [q for q in spec.quasi_identifiers if f"{q}__lo" in release.columns and release[f"{q}__lo"].notna().any()]
    exact = [c for c in (*spec.non_identifiers, spec.sensitive) if c in release.columns and release[c].notna().any()]
    return qis, exact


def admits_world(release: pd.DataFrame, world: pd.DataFrame, spec: Spec) -> tuple[bool, pd.DataFrame]:
    """Does one release admit the world (Shmueli-Tassa Def. 3.1)? A bijection must pair every world tuple with a
    released row that generalises it: the tuple's QI values lie in the row's intervals (leaf ranks for
    categoricals; a suppressed attribute covers everything) and its released non-identifiers and sensitive value
    equal the row's.

    Identical boxes and identical world points are merged into types, so the question is a transportation
    problem: a maximum flow source -> box types (row counts) -> point types they cover -> sink (tuple counts),
    admitted iff the flow saturates every tuple (Hall's condition; scipy ``maximum_flow``, Dinic). Returns
    ``(admitted, unmatched)`` where ``unmatched`` lists the world tuples (by id) of point types left unsaturated.
    Edges are found per block of equal exact attributes, by sorted search on the first generalised attribute.
    """
    qis, exact = _released(release, spec)
    if len(release) != len(world):
        unmatched = world[[spec.id]].assign(detail=f"{len(world)} world tuples, {len(release)} released rows")
        return False, unmatched
    block_keys = pd.concat([release[exact].astype(str), world[exact].astype(str)], ignore_index=True)
    block = block_keys.groupby(exact, sort=False).ngroup().to_numpy() if exact else np.zeros(len(block_keys), int)
    rb, wb = block[: len(release)], block[len(release):]
    lo = release[[f"{q}__lo" for q in qis]].to_numpy(dtype=np.float64).reshape(len(release), len(qis))
    hi = release[[f"{q}__hi" for q in qis]].to_numpy(dtype=np.float64).reshape(len(release), len(qis))
    point = np.stack([_leaf_values(world[q], spec, q) for q in qis], axis=1) if qis else np.zeros((len(world), 0))
    if qis and len(point):  # a suppressed cell covers the whole domain: bounds just outside every value
        lo = np.where(np.isnan(lo), point.min(axis=0) - 1, lo)
        hi = np.where(np.isnan(hi), point.max(axis=0) + 1, hi)
    boxes, box_of, box_count = _types(np.column_stack([rb, lo, hi]))
    points, point_of, point_count = _types(np.column_stack([wb, point]))
    d = len(qis)
    b_idx, p_idx = _covering_pairs(boxes[:, 0], boxes[:, 1:1 + d], boxes[:, 1 + d:], points[:, 0], points[:, 1:])
    nb, npt = len(boxes), len(points)
    sink = nb + npt + 1
    tail = np.concatenate([np.zeros(nb, int), 1 + b_idx, 1 + nb + np.arange(npt)])
    head = np.concatenate([1 + np.arange(nb), 1 + nb + p_idx, np.full(npt, sink)])
    cap = np.concatenate([box_count, np.minimum(box_count[b_idx], point_count[p_idx]), point_count])
    graph = csr_array((cap.astype(np.int32), (tail, head)), shape=(sink + 1, sink + 1))
    flow = maximum_flow(graph, 0, sink)
    if flow.flow_value == len(world):
        return True, world[[spec.id]].iloc[:0].assign(detail=pd.Series(dtype=str))
    edges = flow.flow.tocoo()
    to_sink = edges.col == sink
    into_sink = np.zeros(npt, dtype=np.int64)
    np.add.at(into_sink, edges.row[to_sink] - (1 + nb), edges.data[to_sink])
    short = np.flatnonzero(into_sink < point_count)
    bad = np.isin(point_of, short)
    missing = (point_count - into_sink)[point_of[bad]]
    unmatched = world.loc[bad, [spec.id]].assign(
        detail=[f"{k} tuple(s) of this QI point and {', '.join(exact)} have no released row left" for k in missing])
    return False, unmatched.reset_index(drop=True)


def _types(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows, the type of each input row, and the count of each type."""
    types, inverse, count = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    return types, inverse.reshape(-1), count


def _covering_pairs(
    box_block: np.ndarray, lo: np.ndarray, hi: np.ndarray, point_block: np.ndarray, point: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """All (box, point) pairs in the same block with the point inside the box. Candidates come from a sorted
    search on (block, first attribute); the other attributes filter them. O((B + P) log P + candidates * d)."""
    d = point.shape[1]
    first_p = point[:, 0] if d else np.zeros(len(point))
    span = (np.nanmax(np.abs(np.concatenate([first_p, lo[:, 0] if d else [], hi[:, 0] if d else []]))) + 1) * 4
    key = point_block * span + first_p
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    start = np.searchsorted(sorted_key, box_block * span + (lo[:, 0] if d else -span / 4), side="left")
    stop = np.searchsorted(sorted_key, box_block * span + (hi[:, 0] if d else span / 4), side="right")
    length = np.maximum(stop - start, 0)
    boxes = np.repeat(np.arange(len(lo)), length)
    offset = np.arange(length.sum()) - np.repeat(np.cumsum(length) - length, length)
    points = order[np.repeat(start, length) + offset]
    inside = np.ones(len(boxes), dtype=bool)
    for j in range(1, d):
        inside &= (lo[boxes, j] <= point[points, j]) & (point[points, j] <= hi[boxes, j])
    return boxes[inside], points[inside]


def world_diversity(worlds: Mapping[str, pd.DataFrame], spec: Spec, l: float) -> Report:  # noqa: E741
    """Shmueli-Tassa Def. 3.2: the set E of worlds (the true one included) is l-diverse when no individual is
    linked to one sensitive value in more than |E|/l of the worlds. One violation per (individual, value)."""
    stacked = pd.concat([w[[spec.id, spec.sensitive]].assign(world=name) for name, w in worlds.items()])
    links = stacked.groupby([spec.id, spec.sensitive]).size().rename("worlds").reset_index()
    bad = links[links["worlds"] * l > len(worlds)].reset_index(drop=True)
    bad["rule"] = f"Shmueli-Tassa Def. 3.2: |E[v, s]| / |E| <= 1/l = {1 / l:.3g}"
    bad["detail"] = [f"linked to {s!r} in {k} of {len(worlds)} worlds" for s, k in zip(bad[spec.sensitive],
                                                                                        bad["worlds"], strict=True)]
    return _report("world_diversity", bad, worlds=len(worlds), l=l)


def sequential_l_diversity(
    releases: pd.DataFrame, worlds: Mapping[str, pd.DataFrame], spec: Spec, l: float,  # noqa: E741
    snapshots: pd.DataFrame | None = None,
) -> list[Report]:
    """Shmueli-Tassa §3-4: every release admits every world of E (Def. 3.1; the true world among them), and E is
    l-diverse (Def. 3.2), so that no individual is linked to a value with probability above 1/l (Thm. 4.1).

    ``releases``: published rows with ``release_id`` (``group_id`` may be null). ``worlds``: name -> full table.
    ``snapshots``: when tuples come and go (§5), each release is matched against the world restricted to the ids
    of its snapshot. Returns ``[possible_worlds, world_diversity]``.
    """
    parts, checked = [], 0
    for release_id, release in releases.groupby("release_id", sort=True):
        present = None if snapshots is None else snapshots.loc[snapshots["release_id"] == release_id, spec.id]
        for name, world in worlds.items():
            table = world if present is None else world[world[spec.id].isin(present)]
            ok, unmatched = admits_world(release.reset_index(drop=True), table.reset_index(drop=True), spec)
            checked += 1
            if not ok:
                parts.append(unmatched.assign(release_id=release_id, world=name,
                                              rule="Shmueli-Tassa Def. 3.1: the release admits the possible world"))
    violations = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["release_id", "world", spec.id, "rule", "detail"])
    admitted = _report("possible_worlds", violations, checks=checked, worlds=len(worlds))
    return [admitted, world_diversity(worlds, spec, l)]


# ----------------------------------------------------------------------------------------------------------------
# (X, Y)-privacy on the join of two releases (Wang-Fung)
# ----------------------------------------------------------------------------------------------------------------

#: A semantic inconsistency (Wang-Fung §3.3): ``(attribute of T1, value, attribute of T2, value)``; the two values
#: and all their specialisations never describe the same record.
Inconsistency = tuple[str, str, str, str]


def _node_range(name: str, taxonomies: Mapping, labels: Iterable[str]) -> Callable[[str], tuple[int, int]]:
    """``range_of(label)``: the leaf-rank range of a value of attribute ``name``.

    With a taxonomy, the range of the node the label names (a label naming no node is a SpecError). Without one,
    each of ``labels`` is its own leaf and any other label covers nothing (-1, -1).
    """
    taxonomy = taxonomies.get(name)
    if taxonomy is None:
        nodes = {v: (i, i) for i, v in enumerate(sorted({str(v) for v in labels}))}
    else:
        nodes = {n.name: (n.lo, n.hi) for n in taxonomy.nodes}

    def range_of(label: str) -> tuple[int, int]:
        if str(label) in nodes:
            return nodes[str(label)]
        if taxonomy is not None:
            raise SpecError(f"attribute {name!r}: value {label!r} is not a node of its taxonomy")
        return (-1, -1)

    return range_of


def _ranges(labels: pd.Series, range_of: Callable[[str], tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` leaf ranges of a column of labels (one look-up per distinct label)."""
    local, uniques = pd.factorize(labels.astype(str))
    pairs = np.array([range_of(v) for v in uniques], dtype=np.float64).reshape(-1, 2)
    return pairs[local, 0], pairs[local, 1]


def _references(names: Iterable[str], current: pd.DataFrame, previous: pd.DataFrame) -> list[str]:
    """Join-column names of attribute references: ``T1.A`` / ``T2.A`` as given; a plain ``A`` is the single table
    holding it, or both ``T1.A`` and ``T2.A`` for a common attribute (Wang-Fung §3.3: X holds both)."""
    out = []
    for name in names:
        if name.startswith(("T1.", "T2.")):
            table = current if name.startswith("T1.") else previous
            if name[3:] not in table.columns:
                raise SpecError(f"(X, Y)-privacy: {name!r} names no column of {name[:2]}")
            out.append(name)
        elif name in current.columns and name in previous.columns:
            out += [f"T1.{name}", f"T2.{name}"]
        elif name in current.columns or name in previous.columns:
            out.append(f"T1.{name}" if name in current.columns else f"T2.{name}")
        else:
            raise SpecError(f"(X, Y)-privacy: attribute {name!r} is in neither release")
    return out


def join_statistics(
    current: pd.DataFrame,
    previous: pd.DataFrame,
    x: Sequence[str],
    y: Sequence[str] = (),
    taxonomies: Mapping | None = None,
    inconsistent: Iterable[Inconsistency] = (),
    join_on: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Count statistics of the join of ``current`` (T1) and ``previous`` (T2): one row per distinct value of
    ``(X, Y)`` with ``records``, the number of join records holding it, without materialising the join.

    Match (§3.3): for every common categorical attribute the two values lie on one generalisation path (their
    leaf ranges overlap: taxonomy nodes are nested or disjoint), and no declared inconsistency holds (a pair of
    values, each inside the declared node). Values are readable labels: a generalised value is matched through
    the node of ``taxonomies[attribute]`` it names (e.g. the bound spec's taxonomies); an attribute without a
    taxonomy matches on equal values. Continuous attributes are not join attributes (§3.3).

    As in §5.3-5.4 (Tree1, Tree2), T1 is partitioned on X1 ∪ J1 ∪ Y1, T2 on J2 ∪ X2 ∪ Y2, distinct join values
    are matched once, and each matching partition pair (P1, P2) contributes ``|P1| x |P2|`` records. Columns:
    ``T1.A`` / ``T2.A`` references (see ``_references``).
    ``join_on``: the common attributes (default: every column name in both tables except ``release_id``,
    ``group_id`` and bound columns).
    """
    taxonomies = taxonomies or {}
    inconsistent = list(inconsistent)
    common = list(join_on) if join_on is not None else [
        c for c in current.columns if c in previous.columns and c not in ("release_id", "group_id")
        and not c.endswith(("__lo", "__hi"))]
    j1 = list(dict.fromkeys([*common, *(r[0] for r in inconsistent)]))
    j2 = list(dict.fromkeys([*common, *(r[2] for r in inconsistent)]))
    xs, ys = _references(x, current, previous), _references(y, current, previous)
    keep1 = list(dict.fromkeys([r[3:] for r in xs + ys if r.startswith("T1.")] + j1))
    keep2 = list(dict.fromkeys([r[3:] for r in xs + ys if r.startswith("T2.")] + j2))
    p1 = current[keep1].astype(str).value_counts().rename("n1").reset_index()
    p2 = previous[keep2].astype(str).value_counts().rename("n2").reset_index()
    p1["j1"] = p1.groupby(j1, sort=False).ngroup() if j1 else 0
    p2["j2"] = p2.groupby(j2, sort=False).ngroup() if j2 else 0
    t1 = p1.drop_duplicates("j1")[["j1", *j1]].reset_index(drop=True)
    t2 = p2.drop_duplicates("j2")[["j2", *j2]].reset_index(drop=True)
    a, b = np.repeat(np.arange(len(t1)), len(t2)), np.tile(np.arange(len(t2)), len(t1))
    match = np.ones(len(a), dtype=bool)
    for name in common:
        range_of = _node_range(name, taxonomies, [*t1[name].astype(str), *t2[name].astype(str)])
        (lo1, hi1), (lo2, hi2) = _ranges(t1[name], range_of), _ranges(t2[name], range_of)
        match &= (lo1[a] <= hi2[b]) & (lo2[b] <= hi1[a])
    for attr1, value1, attr2, value2 in inconsistent:
        range1 = _node_range(attr1, taxonomies, t1[attr1].astype(str))
        range2 = _node_range(attr2, taxonomies, t2[attr2].astype(str))
        (lo1, hi1), (lo2, hi2) = _ranges(t1[attr1], range1), _ranges(t2[attr2], range2)
        (u1, v1), (u2, v2) = range1(value1), range2(value2)
        match &= ~((u1 <= lo1[a]) & (hi1[a] <= v1) & (u2 <= lo2[b]) & (hi2[b] <= v2))
    pairs = pd.DataFrame({"j1": t1["j1"].to_numpy()[a[match]], "j2": t2["j2"].to_numpy()[b[match]]})
    joined = p1.rename(columns={c: f"T1.{c}" for c in keep1}).merge(pairs, on="j1").merge(
        p2.rename(columns={c: f"T2.{c}" for c in keep2}), on="j2")
    joined["records"] = joined["n1"].astype(np.int64) * joined["n2"].astype(np.int64)
    return joined.groupby(list(dict.fromkeys(xs + ys)), sort=True)["records"].sum().reset_index()


def xy_anonymity(
    current: pd.DataFrame, previous: pd.DataFrame, x: Sequence[str], y: Sequence[str], k: int, **join
) -> Report:
    """Wang-Fung Def. 3.1 on the join: every value x on X co-occurs with at least k distinct values on Y
    (``a_Y(x) >= k``). ``y`` empty means Y is a key of the join (§5.4 Case 4): ``a_Y(x)`` is the number of join
    records holding x, i.e. k-anonymity of the join on X. ``join``: see ``join_statistics``."""
    stats = join_statistics(current, previous, x, y, **join)
    xs = _references(x, current, previous)
    if len(y):
        anonymity = stats.groupby(xs, sort=True).size().rename("anonymity").reset_index()
    else:
        anonymity = stats.rename(columns={"records": "anonymity"})
    bad = anonymity[anonymity["anonymity"] < k].reset_index(drop=True)
    what = "distinct Y values" if len(y) else "join records"
    bad["rule"] = f"Wang-Fung Def. 3.1: (X, Y)-anonymity, a_Y(x) >= k={k}"
    bad["detail"] = [f"x linked to {a} {what}" for a in bad["anonymity"]]
    return _report("xy_anonymity", bad, k=k, A_Y=int(anonymity["anonymity"].min()),
                   join_records=int(stats["records"].sum()))


def xy_linkability(
    current: pd.DataFrame, previous: pd.DataFrame, x: Sequence[str], y: Sequence[str], k: float,
    values: Iterable | None = None, **join
) -> Report:
    """Wang-Fung Def. 3.2 on the join: ``l_y(x) = a(y, x) / a(x) <= k`` for every x on X and y on Y (optionally
    only the sensitive ``values`` y of a single-attribute Y, §3.1). ``join``: see ``join_statistics``."""
    stats = join_statistics(current, previous, x, y, **join)
    xs, ys = _references(x, current, previous), _references(y, current, previous)
    total = stats.groupby(xs)["records"].transform("sum")
    stats = stats.assign(linkability=stats["records"] / total)
    if values is not None:
        stats = stats[stats[ys[0]].isin([str(v) for v in values])]
    bad = stats[stats["linkability"] > k].reset_index(drop=True)
    bad["rule"] = f"Wang-Fung Def. 3.2: (X, Y)-linkability, l_y(x) <= k={k:g}"
    bad["detail"] = [f"{r} of the join records holding x hold y ({p:.0%})" for r, p in
                     zip(bad["records"], bad["linkability"], strict=True)]
    return _report("xy_linkability", bad, k=k, L_Y=float(stats["linkability"].max()) if len(stats) else 0.0)


# ----------------------------------------------------------------------------------------------------------------
# The whole history, as the spec's model promises
# ----------------------------------------------------------------------------------------------------------------


def _publisher_side(hosted: _Hosted | None) -> list[Report]:
    """Checks that need the private side: R(j) and the hosting agree with the published groups, and every
    release generalises its snapshot."""
    if hosted is None:
        return []
    reports = [_counterfeit_accounting(hosted)]
    if hosted.history.snapshots is not None:
        reports.append(_generalisation(hosted))
    return reports


def _hosted(history: History) -> _Hosted | None:
    """The history indexed for publisher-side checks, or None without hosting or for non-homogeneous releases."""
    return _Hosted(history) if history.hosting is not None and _homogeneous(history.releases) else None


def verify_k_anonymity(history: History) -> list[Report]:
    """Model ``k_anonymity``: k-anonymity of every release, and with the private side R(j) and generalisation."""
    return [k_anonymity(history.releases, history.spec.model.params["k"]), *_publisher_side(_hosted(history))]


def verify_l_diversity(history: History) -> list[Report]:
    """Model ``l_diversity``: l-diversity of every release in the spec's form, and the publisher-side checks."""
    params = history.spec.model.params
    report = l_diversity(history.releases, history.spec.sensitive, params["l"], params.get("form", "frequency"))
    return [report, *_publisher_side(_hosted(history))]


def verify_m_invariance(history: History) -> list[Report]:
    """Model ``m_invariance``: m-uniqueness of every release, m-invariance over the history (Xiao-Tao Def. 17,
    Lemma 4), counterfeit accounting (Def. 3) and generalisation of the snapshots."""
    hosted = _Hosted(history)
    return [*_m_invariance_reports(hosted, history.spec.model.params["m"]), *_publisher_side(hosted)]


def verify_m_distinct(history: History) -> list[Report]:
    """Model ``m_distinct``: m-uniqueness and m-Distinct (Li-Zhou Def. 15; m-Distinct' with ``strict``) under
    the spec's ``update_sets``, and the publisher-side checks."""
    params = history.spec.model.params
    hosted = _Hosted(history)
    reports = _m_distinct_reports(hosted, params.get("update_sets", {}), params["m"], params.get("strict", False))
    return [*reports, *_publisher_side(hosted)]
