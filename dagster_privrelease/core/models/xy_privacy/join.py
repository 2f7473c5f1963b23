"""Count statistics of the join of T1 with an earlier release, from matching partitions (Wang-Fung §5.3-5.4, §7).

The join of §3.3 is never materialised. T1's records are grouped into *Tree1 partitions* (records that share their
generalised value on X1 = X ∩ att(T1), their join values J1 and their Y1 value); every earlier release T_i is
grouped once into its static *Tree_i* (rows sharing J_i, then X_i - J_i, then Y_i). A pair of partitions
(P1, P_i) *matches* when, for every common categorical attribute, their values lie on one generalisation path
(the leaf-rank ranges of taxonomy nodes overlap iff the nodes are nested: the Consistency Predicate) and no
declared semantic inconsistency holds between them (the Inconsistency Predicate); distinct join values are
matched once and every partition pair inherits the verdict. With several earlier releases each is joined with T1
alone (``Joins``: one ``JoinStatistics`` per earlier release); the star join of §7 is not computed.

The *X-tree* (``JoinStatistics.xtree``) holds, for every value x on X present in the join, the statistic the
requirement needs: for (X, Y)-linkability (Def. 3.2, §5.3) ``a(x) = Σ |P1| x |P_i|`` and
``a(x, y) = Σ |P1[y]| x |P_i|`` (or with ``|P_i[y]|`` when Y lies in T_i), reduced to ``L(x) = max_y l_y(x)``
and the excess ``E(x) = max_y (l_y(x) - k_y)``; for (X, Y)-anonymity (Def. 3.1, §5.4) ``a_Y(x)``, the number of
distinct Y values co-occurring with x, by the special case of §5.4 that applies (``Case``) or by de-duplicating
(x, y) over the matching partition pairs when none does.

Names follow the paper: ``x0``.. are T1's generalisation attributes (their cut ids, ``g<j>``) and raw X
attributes (``xr``); ``x<i>`` is the value of T_i on X_i; ``c`` a join value of T1, ``ci`` one of T_i.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import pandas as pd

from ...encoding import extend_rank_key, unique_keys
from ...judge.verifiers.wang_fung import ANONYMITY, LINKABILITY

#: ``(attribute of T1, (lo, hi), attribute of T_i, (lo, hi))``: values inside both ranges never match (§3.3).
Rule = tuple[str, tuple[float, float], str, tuple[float, float]]


class Case(IntEnum):
    """How ``a_Y(x)`` is counted (§5.4). ``GENERAL``: distinct (x, y) over matching partition pairs."""

    GENERAL = 0
    X_HOLDS_JOIN = 1   # Case 1: X contains every join attribute; a_Y(x) = a_Y1(x1) x a_Yi(xi)
    Y2_KEY = 2         # Case 2: Y2 is a key of T2 (one earlier release, Y1 empty)
    Y1_KEY = 3         # Case 3: Y1 is a key of T1 and no earlier release holds Y
    Y_KEY_OF_JOIN = 4  # Case 4: Y is a key of the join (Y empty): a_Y(x) = a(x), the join records holding x


@dataclass(frozen=True)
class Side:
    """Tree_i of one earlier release T_i (§5.3 Tree2, §7 Tree_i); static, built once.

    parts:    one row per Tree_i partition: ``c`` (join value id), ``x`` (X_i value id), ``y`` (Y_i value id, 0
              when Y_i is empty), ``n`` (rows).
    lo, hi:   per join attribute, the range of every join value id (leaf ranks of a categorical attribute; a
              value's code for an attribute matched on equal values).
    common:   the attributes T1 and T_i both publish that the Consistency Predicate matches.
    rules:    the inconsistencies that apply between T1 and T_i.
    x_labels: readable X_i value of every id; ``y_labels``: readable Y_i value of every id.
    has_y:    Y_i is not empty; ``y_key``: Y_i is a key of T_i; ``x_holds_join``: J_i ⊆ X_i.
    """

    release_id: int
    parts: pd.DataFrame
    lo: Mapping[str, np.ndarray]
    hi: Mapping[str, np.ndarray]
    common: tuple[str, ...]
    rules: tuple[Rule, ...]
    x_labels: np.ndarray
    y_labels: np.ndarray
    has_y: bool
    y_key: bool
    x_holds_join: bool

    @property
    def t1_join(self) -> list[str]:
        """J_1(i) of §7: T1's attributes that join with T_i, the common ones, then those the rules name."""
        return list(dict.fromkeys([*self.common, *(rule[0] for rule in self.rules)]))

    @property
    def join_values(self) -> int:
        """The number of distinct join values of T_i (the nodes at level |J_i| of Tree_i)."""
        return int(self.parts["c"].max()) + 1 if len(self.parts) else 0


def side_of(release_id: int, join: Mapping[str, tuple[np.ndarray, np.ndarray]], x: np.ndarray, x_labels: np.ndarray,
            y: np.ndarray, y_labels: np.ndarray, has_y: bool, common: Sequence[str], rules: Sequence[Rule],
            x_holds_join: bool) -> Side:
    """Tree_i from T_i's rows: ``join`` maps each join attribute to its per-row ``(lo, hi)``; ``x``, ``y`` are
    per-row X_i and Y_i value ids. Cost O(rows)."""
    rows = len(x)
    if join:
        keys = pd.DataFrame({f"{a}{e}": v for a, (lo, hi) in join.items() for e, v in (("lo", lo), ("hi", hi))})
        c = keys.groupby(list(keys.columns), sort=False).ngroup().to_numpy()
        first = pd.Series(np.arange(rows)).groupby(c).first().to_numpy()
    else:
        c, first = np.zeros(rows, dtype=np.int64), np.zeros(min(rows, 1), dtype=np.int64)
    parts = pd.DataFrame({"c": c, "x": x, "y": y}).value_counts(sort=False).rename("n").reset_index()
    return Side(release_id, parts, {a: lo[first] for a, (lo, _) in join.items()},
                {a: hi[first] for a, (_, hi) in join.items()}, tuple(common), tuple(rules), x_labels, y_labels,
                has_y, has_y and len(np.unique(y)) == rows, x_holds_join)


#: One table as numpy columns (name -> array, all of one length): the X-tree counts are recomputed for every
#: candidate of every iteration (§5.3 Line 5), so they avoid pandas' per-call overhead.
Columns = dict[str, np.ndarray]


def dense_codes(columns: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The id 0..u-1 of each row's tuple over non-negative integer ``columns`` (ids in the tuples' sorted order)
    and the first row of every id: the rows as one ordered key each (``encoding.rank_keys``' mixed radix, re-ranked
    past 62 bits, folded a column at a time by ``encoding.extend_rank_key``: no matrix of the columns) numbered by
    ``encoding.unique_keys``. Cost O(rows x columns) plus a count when the key spans at most a few times the rows,
    else a sort, O(rows log rows)."""
    rows = len(columns[0]) if len(columns) else 0
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    key, span = np.zeros(rows, dtype=np.int64), 1
    for column in columns:
        key, span = extend_rank_key(key, span, column, int(column.max()) + 1)
    _, first, ids, _ = unique_keys(key)
    return ids, first


def group(frame: Columns, keys: Sequence[str], total: str | None = None) -> Columns:
    """The distinct rows of ``frame`` on ``keys`` in their sorted order; ``total`` (a count column) summed over
    each, every other column taken from the first row. Cost ``dense_codes``'."""
    ids, first = dense_codes([frame[k] for k in keys])
    out = {c: v[first] for c, v in frame.items() if c != total}
    if total is not None:
        out[total] = np.bincount(ids, weights=frame[total], minlength=len(first)).astype(np.int64)
    return out


def equijoin(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair ``(i, j)`` with ``left[i] == right[j]`` (non-negative integer keys), i ascending, then j in
    ``right``'s order: a counting-sort equi-join that never meets a pair that does not match.
    Cost O(|left| + |right| + pairs)."""
    size = int(max(left.max(initial=-1), right.max(initial=-1))) + 1
    order = np.argsort(right, kind="stable")
    counts = np.bincount(right, minlength=size)
    starts = np.cumsum(counts) - counts
    reps = counts[left]
    i = np.repeat(np.arange(len(left)), reps)
    offset = np.arange(len(i)) - np.repeat(np.cumsum(reps) - reps, reps)
    return i, order[starts[left[i]] + offset]


def merge(frame: Columns, table: Columns, on: str) -> Columns:
    """The inner join of two tables on their column ``on`` (``equijoin``); columns of both."""
    i, j = equijoin(frame[on], table[on])
    return {c: v[i] for c, v in frame.items()} | {c: v[j] for c, v in table.items() if c != on}


def matching(lo1: Mapping[str, np.ndarray], hi1: Mapping[str, np.ndarray], count: int, side: Side) -> Columns:
    """The pairs ``(c, ci)`` of matching join values of T1 (``count`` values, ranges ``lo1``/``hi1``) and T_i
    (§3.3: Consistency Predicate on ``side.common``, Inconsistency Predicate on ``side.rules``; Observation 1).
    Cost O(count x |join values of T_i| x |J|)."""
    m = np.ones((count, side.join_values), dtype=bool)
    for a in side.common:
        m &= (lo1[a][:, None] <= side.hi[a][None, :]) & (side.lo[a][None, :] <= hi1[a][:, None])
    for a1, (u1, v1), a2, (u2, v2) in side.rules:
        inside1 = (u1 <= lo1[a1]) & (hi1[a1] <= v1)
        inside2 = (u2 <= side.lo[a2]) & (side.hi[a2] <= v2)
        m &= ~(inside1[:, None] & inside2[None, :])
    c, ci = np.nonzero(m)
    return {"c": c.astype(np.int64), "ci": ci.astype(np.int64)}


def _segment_max(ids: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """The largest of ``values`` in each of ``groups`` (every group non-empty). Cost O(rows)."""
    out = np.full(groups, -np.inf)
    np.maximum.at(out, ids, values)
    return out


@dataclass
class JoinStatistics:
    """The X-tree of §5.3-5.4 over T1's partitions and the static Tree_i of one earlier release T_i (none: T1
    alone, a first release).

    generalised: number of generalisation attributes (cut-id columns ``g0``..).
    xr_of_static, js_of_static: a T1 record's static code (its raw X attributes and raw join attributes, fixed
                 during TDS4SA) to its raw-X value id and its raw-join value id.
    join_cut:    join attributes of T1 that are generalised: attribute -> (cut column, bounds(cut ids) -> lo, hi).
    join_static: raw join attributes of T1: attribute -> (lo, hi) per raw-join value id.
    side:        Tree_i of the earlier release, or None.
    kind:        ``anonymity`` or ``linkability``; ``y_side``: the release holding Y for linkability (0: T1,
                 1: T_i); ``thresholds``: k_y per Y value id of that release (NaN: y not sensitive).
    has_y1, y1_key: Y1 is not empty / is a key of T1.
    case:        the §5.4 case for anonymity (``Case``).
    t1_holds_join: every join attribute of T1 is in X (J1 ⊆ X1), so each x1 is one Tree1 partition and the
                 X-tree keeps one row per x1 (``_per_partition``).

    Every count is a numpy group code, ``bincount`` or counting-sort equi-join (``group``, ``merge``): the join
    is never materialised, only matching partition pairs are met.
    """

    generalised: int
    xr_of_static: np.ndarray
    js_of_static: np.ndarray
    join_cut: Mapping[str, tuple[int, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]]]
    join_static: Mapping[str, tuple[np.ndarray, np.ndarray]]
    side: Side | None
    kind: str
    y_side: int
    thresholds: np.ndarray
    has_y1: bool
    y1_key: bool
    case: Case
    t1_holds_join: bool

    def __post_init__(self) -> None:
        self._aggregates = None if self.side is None else self._side_aggregates(self.side)
        self._memo: dict[bytes, tuple | None] = {}  # T1 join value -> its per-side statistics (static T_i)

    @property
    def partitions_need_y(self) -> bool:
        """Whether Tree1's partitions are split by Y1: not when Y1 is a key of T1 counted per partition (Case 3 of
        §5.4, or any anonymity with J1 ⊆ X1, ``_per_partition``), where the distinct Y1 values of a partition are
        its records (|P1|), so partitions stay by X1 ∪ J1."""
        if not self.has_y1:
            return False
        return self.kind == LINKABILITY or not (self.y1_key and (self.t1_holds_join or self.case == Case.Y1_KEY))

    @property
    def x_t1(self) -> list[str]:
        """T1's columns of an X-tree row: the cut ids ``g<j>`` and the raw X value ``xr``."""
        return [f"g{j}" for j in range(self.generalised)] + ["xr"]

    @property
    def x(self) -> list[str]:
        """Every column of an x value: T1's, then ``x1``, the earlier release's, when there is one."""
        return self.x_t1 + ([] if self.side is None else ["x1"])

    @staticmethod
    def _side_aggregates(side: Side) -> dict[str, Columns]:
        """Tree_i's count statistics by (join value, X_i value): rows, rows per Y_i value, (X_i, Y_i) values, and
        the (join value, X_i value) pairs present (columns ``ci``, ``x1``, ``y1``/``yy``, ``n1``). Cost
        O(|Tree_i| log |Tree_i|), once."""
        parts = {"ci": side.parts["c"].to_numpy(np.int64), "x1": side.parts["x"].to_numpy(np.int64),
                 "yy": side.parts["y"].to_numpy(np.int64), "n1": side.parts["n"].to_numpy(np.int64)}
        keys = ["ci", "x1"]
        values = {"ci": parts["ci"], "x1": parts["x1"]} | ({"y1": parts["yy"]} if side.has_y else {})
        return {
            "rows": group({k: parts[k] for k in [*keys, "n1"]}, keys, "n1"),
            "rows_y": parts,
            "values": group(values, list(values)),
            "present": group({k: parts[k] for k in keys}, keys),
        }

    def xtree(self, parts: Mapping[str, np.ndarray]) -> pd.DataFrame:
        """The X-tree rows of the join of T1's partitions ``parts`` (columns ``g0``.., ``s`` static code, ``y``
        Y1 value id, ``n`` records) with the earlier release: the x columns (``self.x``) and ``a`` (a_Y(x),
        anonymity) or ``L`` and ``E`` (max_y l_y(x) and max_y l_y(x) - k_y, linkability). Only x values present
        in the join appear. Cost O(|parts| x matching partitions of T_i), no record is read."""
        s = np.asarray(parts["s"])
        frame = {f"g{j}": np.asarray(parts[f"g{j}"]) for j in range(self.generalised)}
        frame |= {"xr": self.xr_of_static[s], "js": self.js_of_static[s], "y": np.asarray(parts["y"]),
                  "n": np.asarray(parts["n"], dtype=np.int64)}
        keys = [f"g{j}" for j, _ in self.join_cut.values()] + ["js"]
        frame["c"], first = dense_codes([frame[k] for k in keys])
        lo1, hi1 = {}, {}
        for a, (j, bounds) in self.join_cut.items():
            lo1[a], hi1[a] = bounds(frame[f"g{j}"][first])
        js = frame["js"][first]
        for a, (lo, hi) in self.join_static.items():
            lo1[a], hi1[a] = lo[js], hi[js]
        if self.t1_holds_join:
            return self._per_partition(frame, lo1, hi1, len(first))
        pair = None if self.side is None else matching(lo1, hi1, len(first), self.side)
        if self.kind == LINKABILITY:
            return self._linkability(frame, pair)
        return self._anonymity(frame, pair)

    def _per_partition(self, frame: Columns, lo1: Mapping[str, np.ndarray], hi1: Mapping[str, np.ndarray],
                       count: int) -> pd.DataFrame:
        """The X-tree reduced to one row per x1 when J1 ⊆ X1 (the setting of §5.4 Case 1, which §3.3 recommends).

        Then x1 determines its Tree1 partition P1 and hence its join value, the join combines every matching t_i
        with every t1 of P1 independently, and for x = (x1, x_i):

        - anonymity: ``a_Y(x) = a_Y1(P1) x D_i(c, x_i)``, D_i the rows (Y empty, Case 4), the distinct Y_i
          values, or 1 (Y_i empty) of T_i's partitions holding x_i that match P1's join value c; so the least
          a_Y(x) over the x's of P1 is ``a_Y1(P1) x min_{x_i} D_i(c, x_i)``;
        - linkability: ``l_y(x) = |P1[y]| / |P1|`` for Y in T1 and ``a(x_i, y) / a(x_i)`` over T_i's partitions
          matching c for Y in T_i (the other factor cancels, as in the proof of Lemma 4.2), maximised alike.

        Each row keeps in ``x1`` the x_i attaining the extreme (its witness). P1 without a match in T_i is not in
        the join and has no row. The T_i factors depend on the join value alone (Tree_i is static), so they
        are computed once per join value (``lo1``/``hi1`` of the ``count`` join values of ``frame``) and
        remembered. Cost O(|frame|) plus, for a join value not met before, its matching T_i partitions."""
        anonymity = self.kind == ANONYMITY
        names = sorted(lo1)
        ranges = np.column_stack([lo1[a] for a in names] + [hi1[a] for a in names] + [np.zeros(count)])
        keys = [row.tobytes() for row in ranges]
        todo = [c for c in range(count) if keys[c] not in self._memo]
        columns = self._side_columns()
        if todo and self.side is not None:
            at = np.array(todo)
            pair = matching({a: v[at] for a, v in lo1.items()}, {a: v[at] for a, v in hi1.items()}, len(todo),
                            self.side)
            found = self._side_factors(pair).set_index("c")[columns]
            known = dict(zip(found.index, found.itertuples(index=False, name=None), strict=True))
            for local, c in enumerate(todo):
                self._memo[keys[c]] = known.get(local)
        # P1 = (x1, c); ``frame`` rows are P1 or, split by Y1, the distinct (P1, y1): count per P1 id.
        p1, first = dense_codes([frame[c] for c in self.x_t1 + ["c"]])
        rows = {c: frame[c][first] for c in self.x_t1 + ["c"]}
        n = frame["n"]
        if not anonymity and self.y_side == 0:  # l_y(x) = |P1[y]| / |P1|
            link = n / np.bincount(p1, weights=n)[p1]
            k_y = self.thresholds[frame["y"]]
            rows["L"] = _segment_max(p1, np.where(np.isnan(k_y), 0.0, link), len(first))
            rows["E"] = _segment_max(p1, np.where(np.isnan(k_y), -np.inf, link - np.nan_to_num(k_y)), len(first))
        elif anonymity and self.has_y1 and self.partitions_need_y:  # distinct Y1 values of P1
            rows["a"] = np.bincount(p1, minlength=len(first)).astype(np.int64)
        elif anonymity and (self.has_y1 or self.case == Case.Y_KEY_OF_JOIN):  # |P1|
            rows["a"] = np.bincount(p1, weights=n, minlength=len(first)).astype(np.int64)
        elif anonymity:
            rows["a"] = np.ones(len(first), dtype=np.int64)
        if self.side is not None:
            per_c = [self._memo[key] for key in keys]
            present = np.array([side is not None for side in per_c], dtype=bool)
            keep = present[rows["c"]] if count else np.zeros(len(first), dtype=bool)
            rows = {c: v[keep] for c, v in rows.items()}
            known_c = [side for side in per_c if side is not None]
            at = np.cumsum(present) - 1
            for col, name in enumerate(columns):
                table = np.array([side[col] for side in known_c])
                value = table[at[rows["c"]]] if len(table) else np.zeros(0)
                if name.startswith(("x", "f")):
                    value = value.astype(np.int64)
                rows[name] = value
            if anonymity:
                rows["a"] = rows["a"] * rows.pop("f1")
        return pd.DataFrame({c: rows[c] for c in self.x + (["a"] if anonymity else ["L", "E"])})

    def _side_columns(self) -> list[str]:
        """The columns ``_side_factors`` gives each join value: T_i's witness ``x1`` and its factor ``f1``, or ``x1``,
        ``L`` and ``E`` when T_i holds Y under linkability; none without an earlier release."""
        if self.side is None:
            return []
        return ["x1", "L", "E"] if self.kind == LINKABILITY and self.y_side == 1 else ["x1", "f1"]

    def _side_factors(self, pair_columns: Columns) -> pd.DataFrame:
        """Per T1 join value ``c`` (of the matching pairs ``pair_columns``), the extreme factor of T_i over its x_i
        and the x_i attaining it (``_per_partition``); join values without a match in T_i are left out. Run once
        per join value (memoised), so pandas' per-call overhead does not matter here."""
        assert self.side is not None and self._aggregates is not None, "_side_factors needs an earlier release"
        pair = pd.DataFrame(pair_columns)
        aggregates = {name: pd.DataFrame(table) for name, table in self._aggregates.items()}
        if self.kind == ANONYMITY and self.case == Case.Y_KEY_OF_JOIN:
            table = pair.merge(aggregates["rows"], on="ci").groupby(["c", "x1"], sort=False)["n1"].sum()
        elif self.kind == ANONYMITY and self.side.has_y:
            values = pair.merge(aggregates["values"], on="ci").drop_duplicates(["c", "x1", "y1"])
            table = values.groupby(["c", "x1"], sort=False).size()
        elif self.y_side == 1:
            rows = pair.merge(aggregates["rows_y"], on="ci").groupby(["c", "x1", "yy"], sort=False)["n1"].sum()
            rows = rows.reset_index()
            link = rows["n1"] / rows.groupby(["c", "x1"], sort=False)["n1"].transform("sum")
            k_y = self.thresholds[rows["yy"].to_numpy()]
            rows["L"] = np.where(np.isnan(k_y), 0.0, link)
            rows["E"] = np.where(np.isnan(k_y), -np.inf, link - np.nan_to_num(k_y))
            table = rows.sort_values(["c", "E", "L"], ascending=[True, False, False], kind="stable")
            return table.groupby("c", sort=False).agg(x1=("x1", "first"), L=("L", "max"), E=("E", "first")
                                                      ).reset_index()
        else:
            table = pair.merge(aggregates["present"], on="ci").groupby(["c", "x1"], sort=False).size().clip(upper=1)
        table = table.rename("f1").reset_index().sort_values(["c", "f1"], kind="stable")
        return table.drop_duplicates("c")

    def _joined(self, rows: Columns, pair: Columns | None, table: str, keep: list[str],
                multiply: bool) -> tuple[Columns, list[str]]:
        """Extend T1 rows (``c`` and ``keep`` columns, count ``n``) with the matching partitions of T_i (``pair``:
        T_i probed from T1's join value; None: no earlier release, the rows as they are). ``multiply``: n *=
        Tree_i's count; otherwise the rows are de-duplicated instead. Returns the rows and the x columns."""
        xcols = list(self.x_t1)
        if pair is None or self._aggregates is None:
            return rows, xcols
        aggregates = self._aggregates[table]
        rows = merge(merge(rows, pair, "c"), aggregates, "ci")
        del rows["ci"]
        xcols.append("x1")
        keep = keep + [c for c in aggregates if c.startswith("y") and c not in keep]
        if multiply:
            rows["n"] = rows["n"] * rows.pop("n1")
            return group(rows, xcols + ["c"] + keep, "n"), xcols
        return group(rows, xcols + ["c"] + keep), xcols

    def _linkability(self, frame: Columns, pair: Columns | None) -> pd.DataFrame:
        """Def. 3.2 via §5.3 Step 2: a(x) += |P1| x |P_i|, a(x, y) += the same with the Y side's |P[y]|."""
        xcols = list(self.x_t1)
        rows = {c: frame[c] for c in [*xcols, "c", "n"]}
        if self.y_side == 0:
            rows["yy"] = frame["y"]
        rows = group(rows, [*xcols, "c"] + (["yy"] if self.y_side == 0 else []), "n")
        if pair is not None and self._aggregates is not None:
            table = self._aggregates["rows_y"] if self.y_side == 1 else self._aggregates["rows"]
            rows = merge(merge(rows, pair, "c"), table, "ci")
            del rows["ci"]
            rows["n"] = rows["n"] * rows.pop("n1")
            xcols.append("x1")
            rows = group(rows, [*xcols, "c"] + (["yy"] if "yy" in rows else []), "n")
        a_xy = group({c: rows[c] for c in [*xcols, "yy", "n"]}, [*xcols, "yy"], "n")
        x_id, first = dense_codes([a_xy[c] for c in xcols])
        link = a_xy["n"] / np.bincount(x_id, weights=a_xy["n"], minlength=len(first))[x_id]
        k_y = self.thresholds[a_xy["yy"]]
        watched = ~np.isnan(k_y)
        out = {c: a_xy[c][first] for c in xcols}
        out["L"] = _segment_max(x_id, np.where(watched, link, 0.0), len(first))
        out["E"] = _segment_max(x_id, np.where(watched, link - np.nan_to_num(k_y), -np.inf), len(first))
        return pd.DataFrame(out)

    def _anonymity(self, frame: Columns, pair: Columns | None) -> pd.DataFrame:
        """Def. 3.1 via §5.4 on the full X-tree (J1 ⊄ X1; Case 1 implies J1 ⊆ X1 and is ``_per_partition``'s):
        a_Y(x) by Case 4, 3 or 2 when it applies, else by the distinct (x, y) values over the matching pairs."""
        case, x_t1 = self.case, self.x_t1
        if case in (Case.Y_KEY_OF_JOIN, Case.Y1_KEY):  # a(x) records, or |P1| once per (P1, x) for a key Y1
            rows = group({c: frame[c] for c in [*x_t1, "c", "n"]}, [*x_t1, "c"], "n")
            rows, xcols = self._joined(rows, pair, "rows" if case == Case.Y_KEY_OF_JOIN else "present", [],
                                       multiply=case == Case.Y_KEY_OF_JOIN)
            counts = group({c: rows[c] for c in [*xcols, "n"]}, xcols, "n")
            counts["a"] = counts.pop("n")
        elif case == Case.Y2_KEY:  # distinct T2 partitions per (x1, x2): their rows are distinct Y values
            rows = group({c: frame[c] for c in [*x_t1, "c"]}, [*x_t1, "c"])
            assert pair is not None and self._aggregates is not None, "Case 2 needs an earlier release"
            rows = group(merge(rows, pair, "c"), [*x_t1, "ci"])
            rows = merge(rows, self._aggregates["rows"], "ci")
            xcols = self.x
            counts = group({c: rows[c] for c in [*xcols, "n1"]}, xcols, "n1")
            counts["a"] = counts.pop("n1")
        else:
            keep = ["y0"] if self.has_y1 else []
            rows = {c: frame[c] for c in [*x_t1, "c"]} | ({"y0": frame["y"]} if self.has_y1 else {})
            rows, xcols = self._joined(group(rows, [*x_t1, "c", *keep]), pair, "values", keep, multiply=False)
            ys = [c for c in rows if c.startswith("y")]
            distinct = group({c: rows[c] for c in [*xcols, *ys]}, [*xcols, *ys])
            x_id, first = dense_codes([distinct[c] for c in xcols])
            counts = {c: distinct[c][first] for c in xcols} | {"a": np.bincount(x_id, minlength=len(first))}
        return pd.DataFrame({c: np.asarray(counts[c], dtype=np.int64) for c in [*xcols, "a"]})


@dataclass(frozen=True)
class Joins:
    """The joins whose (X, Y)-privacy TDS4SA keeps: the join of T1 with each earlier release alone (``joins[i-1]``
    with the i-th earlier release; one join, of T1 alone, for a first release).

    An adversary may join T1 with any one earlier release (§3.3's join of two releases), and the judge checks each
    such join. Each is a join of population-related projections, so Lemmas 4.1-4.2 hold for each and a
    specialisation that violates one keeps it violated (Corollary 4.1): the conjunction is anti-monotone, and
    Corollary 4.2 holds for it. Every join holds all of X ∩ att(T1), so an X-tree row of any of them holds
    exactly one value of each Cut_j, and TDS4SA works on their rows together (``xtree``), A_Y(X) being the least
    a_Y(x) over all of them (L_Y(X) the largest l_y(x)). The star join of §7 over two or more earlier releases is
    not kept: its X-tree has a row per combination of the releases' x values that match one T1 partition, which
    grows exponentially with their number (``docs/known-gaps.md``).
    """

    joins: Sequence[JoinStatistics]

    @property
    def kind(self) -> str:
        """``anonymity`` or ``linkability`` (the same for every join)."""
        return self.joins[0].kind

    @property
    def partitions_need_y(self) -> bool:
        """Whether Tree1's partitions are split by Y1 (``JoinStatistics.partitions_need_y``) for some join: a join
        that does not need it counts the same on split partitions (|P1| is their sum, and a split partition of a
        key Y1 holds one record)."""
        return any(stats.partitions_need_y for stats in self.joins)

    def xtree(self, parts: Mapping[str, np.ndarray]) -> pd.DataFrame:
        """The X-tree rows of every join (``JoinStatistics.xtree``) for T1's partitions ``parts``, stacked: those of
        ``joins[i-1]`` with ``join`` i and the earlier release's x value in ``x<i>`` (the other ``x<j>``
        missing). Cost: one X-tree per join, each over the matching partitions of its earlier release only, so p
        times that of one earlier release."""
        tables = [stats.xtree(parts).rename(columns={"x1": f"x{i}"}).assign(join=i)
                  for i, stats in enumerate(self.joins, 1)]
        return pd.concat(tables, ignore_index=True) if len(tables) > 1 else tables[0]
