"""Wang-Fung ((X, Y)-privacy of sequential releases, KDD 2006): Defs. 3.1-3.2 on the join of two releases.

The adversary joins the current release T1 with a previous one T2 on their common attributes (§3.3): two values
match when they lie on one generalisation path (their leaf ranges overlap) and no declared semantic
inconsistency holds. ``join_statistics`` counts the join's records per value of (X, Y) from matching partitions,
without materialising the join (§5.3-5.4); ``xy_anonymity`` (Def. 3.1) and ``xy_linkability`` (Def. 3.2) read
the counts. ``verify_xy_privacy`` is the xy_privacy model's check of a release against each earlier one, through
the judge's memo (``release_counts``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ....errors import SpecError
from ...grouping import released_attributes
from ...spec import BoundSpec
from ..history import History, Report
from ..report import verifier_report

#: ``model.kind`` of the xy_privacy model: Def. 3.1 or Def. 3.2.
ANONYMITY, LINKABILITY = "anonymity", "linkability"

#: The columns of a published release that are the store's, not the adversary's.
BOOKKEEPING = ("release_id", "group_id")

#: The optional column of a table given as value counts (e.g. the judge's memo of an earlier release): how many
#: rows of the release hold that row's values. Without it every row counts once.
WEIGHT = "__rows__"

#: A semantic inconsistency (Wang-Fung §3.3): ``(attribute of T1, value, attribute of T2, value)``; the two values
#: and all their specialisations never describe the same record.
Inconsistency = tuple[str, str, str, str]


def attribute_of(name: str) -> str:
    """``A`` of ``T1.A`` / ``T2.A`` / ``A``."""
    return name[3:] if name.startswith(("T1.", "T2.")) else name


def _node_range(name: str, taxonomies: Mapping, labels: Iterable[str]) -> Callable[[str], tuple[int, int]]:
    """``range_of(label)``: the leaf-rank range of a value of attribute ``name``.

    With a taxonomy, the range of the node the label names (a label naming no node is a SpecError). Without one,
    each of ``labels`` is its own leaf and any other label covers nothing (-1, -1). O(nodes) to build.
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


def _partitions(table: pd.DataFrame, keep: list[str], name: str) -> pd.DataFrame:
    """Tree1 / Tree2 of §5.3: the distinct values of ``table`` on ``keep`` (as text) and their rows in ``name``;
    a table given as value counts (a ``WEIGHT`` column) adds its counts. O(rows)."""
    text = table[keep].astype(str)
    weights = table[WEIGHT].to_numpy(np.int64) if WEIGHT in table.columns else np.ones(len(table), np.int64)
    if not keep:  # the table holds none of X, Y and the join attributes: one partition of every row
        return pd.DataFrame({name: [int(weights.sum())]})
    if WEIGHT not in table.columns:
        return text.value_counts().rename(name).reset_index()
    return text.assign(**{name: weights}).groupby(keep, sort=False)[name].sum().reset_index()


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
    ``group_id``, ``WEIGHT`` and bound columns). Either table may be given as value counts (``WEIGHT``).
    O(n1 + n2 + J1 x J2 x attributes + join partitions), J the distinct join values of each side.
    """
    taxonomies = taxonomies or {}
    inconsistent = list(inconsistent)
    common = list(join_on) if join_on is not None else [
        c for c in current.columns if c in previous.columns and c not in ("release_id", "group_id", WEIGHT)
        and not c.endswith(("__lo", "__hi"))]
    j1 = list(dict.fromkeys([*common, *(r[0] for r in inconsistent)]))
    j2 = list(dict.fromkeys([*common, *(r[2] for r in inconsistent)]))
    xs, ys = _references(x, current, previous), _references(y, current, previous)
    keep1 = list(dict.fromkeys([r[3:] for r in xs + ys if r.startswith("T1.")] + j1))
    keep2 = list(dict.fromkeys([r[3:] for r in xs + ys if r.startswith("T2.")] + j2))
    p1, p2 = _partitions(current, keep1, "n1"), _partitions(previous, keep2, "n2")
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
    records holding x, i.e. k-anonymity of the join on X. ``join``: see ``join_statistics`` (its cost)."""
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
    return verifier_report("xy_anonymity", bad, k=k, A_Y=int(anonymity["anonymity"].min()),
                   join_records=int(stats["records"].sum()))


def xy_linkability(
    current: pd.DataFrame, previous: pd.DataFrame, x: Sequence[str], y: Sequence[str], k: float,
    values: Iterable | None = None, **join
) -> Report:
    """Wang-Fung Def. 3.2 on the join: ``l_y(x) = a(y, x) / a(x) <= k`` for every x on X and y on Y (optionally
    only the sensitive ``values`` y of a single-attribute Y, §3.1). ``join``: see ``join_statistics`` (its
    cost)."""
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
    return verifier_report("xy_linkability", bad, k=k, L_Y=float(stats["linkability"].max()) if len(stats) else 0.0)


# ------------------------------------------------------------------------------------- the model's verifier


def _published(table: pd.DataFrame, spec: BoundSpec) -> pd.DataFrame:
    """A release as the adversary reads it: the labels of its quasi-identifiers and its non-null columns."""
    qis = released_attributes(table, spec)
    raw = [c for c in table.columns if c not in BOOKKEEPING and not c.endswith(("__lo", "__hi"))
           and c not in spec.quasi_identifiers and table[c].notna().any()]
    return table[qis + raw].reset_index(drop=True)


def _present(names: Sequence[str], current: pd.DataFrame, previous: pd.DataFrame) -> list[str]:
    """The references that name a column of one of the two tables (the judge's ``_references`` needs them)."""
    keep = []
    for name in names:
        base = attribute_of(name)
        if (name.startswith("T1.") and base in current) or (name.startswith("T2.") and base in previous) or (
                not name.startswith(("T1.", "T2.")) and (base in current or base in previous)):
            keep.append(name)
    return keep


#: The judge's memo of the (X, Y) verifiers (``History.memo``, keyed ``(EARLIER, release id)``): the published
#: columns of releases 1..n as value counts, one row per ``release_id`` and distinct published row, the count in
#: ``wang_fung.WEIGHT``, a column the release does not publish null. Plain string columns.
EARLIER = "xy_privacy_releases"


def _release_counts(table: pd.DataFrame, spec: BoundSpec, release_id: int) -> pd.DataFrame:
    """One release as the memo keeps it: the value counts of its published columns (as text). O(rows)."""
    text = _published(table, spec).astype(str)
    if not len(text.columns):
        counts = pd.DataFrame({WEIGHT: [len(text)]})
    else:
        counts = text.groupby(list(text.columns), sort=True).size().rename(WEIGHT).reset_index()
    counts.insert(0, "release_id", np.int64(release_id))
    return counts.astype({WEIGHT: np.int64})


def release_counts(history: History) -> pd.DataFrame:
    """The memo ``(EARLIER, n)``: value counts of the published columns of releases 1..n (``EARLIER``), folded
    from the memo of release n-1 with release n (``History.previous_memo``; every release of a complete history
    without one), recorded in ``history.memo``. A function of releases 1..n. Cost O(|release n| + memo) with
    the memo; the memo holds the distinct published rows of every release, not the releases' rows."""
    spec, ids = history.spec, history.release_ids
    if (EARLIER, ids[-1]) in history.memo:
        return history.memo[(EARLIER, ids[-1])]
    before = history.previous_memo(EARLIER)
    frames = [] if before is None else [before]
    for j in ids if before is None else ids[-1:]:
        frames.append(_release_counts(history.release(j), spec, j))
    memo = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    history.memo[(EARLIER, ids[-1])] = memo
    return memo


def _counted(memo: pd.DataFrame, release_id: int) -> pd.DataFrame:
    """Release ``release_id`` of the memo: its published columns (as text) and ``WEIGHT``."""
    rows = memo[memo["release_id"] == release_id]
    columns = [c for c in memo.columns if c not in ("release_id", WEIGHT) and rows[c].notna().any()]
    return rows[[*columns, WEIGHT]].reset_index(drop=True)


def verify_xy_privacy(history: History) -> list[Report]:
    """Model ``xy_privacy``: (X, Y)-anonymity or (X, Y)-linkability of the newest release against each earlier
    one in turn (``models.xy_privacy``'s docstring), per the spec's X, Y, k (and ``values``, ``inconsistent``);
    a first release is checked alone (a constant join key). Each report's summary names the earlier release.

    The earlier releases are read from the judge's memo (``release_counts``: their published rows as value
    counts), so a window (releases n-1 and n, ``History.first``) gives the same reports as the complete history.
    Cost: O(|release n| + memo) for the memo, then the judge's join per earlier release (one report each, as the
    definition asks), on the distinct published rows of that release rather than its rows."""
    spec, params = history.spec, history.spec.model.params
    newest = history.release_ids[-1]
    current = _published(history.release(newest), spec)
    taxonomies = {a: spec.quasi_identifiers[a].taxonomy for a in current.columns
                  if a in spec.quasi_identifiers and not spec.quasi_identifiers[a].numeric}
    continuous = {a for a, qi in spec.quasi_identifiers.items() if qi.numeric}
    memo = release_counts(history)
    earlier = sorted(int(j) for j in memo["release_id"].unique() if j < newest)
    pairs = [(j, _counted(memo, j)) for j in earlier]
    if not pairs:
        current = current.assign(__release__="T1")
        pairs = [(None, pd.DataFrame({"__release__": ["T1"]}))]
    reports = []
    for j, previous in pairs:
        x, y = _present(params["X"], current, previous), _present(params["Y"], current, previous)
        join_on = [c for c in current.columns if c in previous.columns and c not in continuous]
        if not x:  # X names nothing the two publish: every join record holds the one empty x (Def. 3.1)
            current, x = current.assign(__x__=""), ["T1.__x__"]
        rules = [tuple(r) for r in params["inconsistent"] if r[0] in current and r[2] in previous]
        join = {"taxonomies": taxonomies, "inconsistent": rules, "join_on": join_on}
        if params["kind"] == ANONYMITY:
            found = [xy_anonymity(current, previous, x, y, int(params["k"]), **join)]
        elif params["values"]:
            by_threshold: dict[float, list[str]] = {}
            for value, threshold in params["values"].items():
                by_threshold.setdefault(float(threshold), []).append(str(value))
            found = [xy_linkability(current, previous, x, y, t, values=v, **join) for t, v in by_threshold.items()]
        else:
            found = [xy_linkability(current, previous, x, y, float(params["k"]), **join)]
        for report in found:
            report.summary["earlier_release"] = j
        reports += found
    return reports
