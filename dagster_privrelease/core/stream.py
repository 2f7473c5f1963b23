"""A synthetic stream of snapshots T(1), T(2), ... of a changing table, as in the papers' experiments.

Xiao-Tao §5 (m-invariance): T(1) is a random sample of the table and the other rows form a *pool*; each next
snapshot deletes r random rows of the previous one and inserts r rows drawn at random from the pool, each
pool row used once (external updates). Li-Zhou §VI-A (m-Distinct) deletes and inserts different amounts (2,000
and 5,000) and adds *internal updates*: surviving rows change their sensitive or QI values between releases.
§VI-A's internal updates are two kinds: "in the span of [i, i+1]" every record's age grows by 1 and its marital
status and education "update according to the specific semantic of each value" (``every_row``: ``increment``,
``never_back``, ``not_lower``), while "the internal updates on sensitive values only randomly occurred on 5,000
records" (``updates`` rows, ``update_columns``: ``within_sets``, uniform within the candidate update set).

Everything is index arithmetic over numpy arrays; a snapshot is built with one ``take`` and one ``concat``, and
an update rule is one vectorised draw over the rows it changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

#: A rule for internal updates: (current values of the rows to update, rng) -> their new values.
UpdateRule = Callable[[np.ndarray, np.random.Generator], np.ndarray]


def split_base_pool(df: pd.DataFrame, base_size: int, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split ``df`` into the first snapshot (``base_size`` rows drawn at random) and the pool (the other rows),
    as Xiao-Tao §5 builds T(1) and the pool from OCC. Both keep ``df``'s row order (``stream`` draws from the
    pool at random) and get a fresh index."""
    if not 0 <= base_size <= len(df):
        raise ValueError(f"split_base_pool: base_size must be in 0..{len(df)}, got {base_size}")
    in_base = np.zeros(len(df), dtype=bool)
    in_base[rng.choice(len(df), size=base_size, replace=False)] = True
    return df[in_base].reset_index(drop=True), df[~in_base].reset_index(drop=True)


def stream(
    base: pd.DataFrame,
    pool: pd.DataFrame,
    r: int,
    releases: int,
    rng: np.random.Generator,
    update_fraction: float = 0.0,
    update_columns: Sequence[str] | Mapping[str, UpdateRule] | None = None,
    inserts: int | None = None,
    updates: int | None = None,
    every_row: Mapping[str, UpdateRule] | None = None,
) -> Iterator[pd.DataFrame]:
    """Yield ``releases`` snapshots: ``base`` first, then each one from the last by the papers' protocol.

    Snapshot j (j >= 2) is snapshot j-1 without ``r`` rows chosen uniformly at random (deletions), with
    ``update_fraction`` of the surviving rows (or ``updates`` of them, at most all) changed in ``update_columns``
    (internal updates, Li-Zhou §VI-A), every surviving row changed by the rules of ``every_row`` (applied after
    ``update_columns``; Li-Zhou §VI-A's age + 1 and QI semantics), and with ``inserts`` (default ``r``, Xiao-Tao
    §5) rows appended, taken uniformly at random from the rows of ``pool`` not inserted yet. Survivors keep their
    order; inserted rows come last. Every yielded frame is a new frame with a fresh index.

    ``update_columns`` lists the columns to change, each updated row getting a different value of the column's
    domain (the distinct values of ``base`` and ``pool``) uniformly at random; or maps a column to a rule
    ``f(values, rng) -> new values`` (e.g. age + 1). Raises ValueError up front when the pool cannot feed all
    releases, when a deletion would exceed the snapshot, or when the update arguments are inconsistent (at the
    call, before any snapshot is made).
    Cost per snapshot: O(n) for the take/concat.
    """
    inserts = r if inserts is None else inserts
    rules = _update_rules(base, pool, update_fraction if updates is None else float(updates > 0), update_columns)
    if updates is not None and (updates < 0 or update_fraction):
        raise ValueError(f"stream: give update_fraction or updates (>= 0), not both; got {update_fraction}, {updates}")
    every = dict(every_row or {})
    missing = [c for c in every if c not in base.columns]
    if missing:
        raise ValueError(f"stream: every_row column(s) {missing} are not columns of the snapshot")
    _check_volumes(len(base), len(pool), r, inserts, releases)
    count = (lambda n: min(updates, n)) if updates is not None else (lambda n: round(update_fraction * n))
    return _snapshots(base, pool, r, inserts, releases, rng, count, rules, every)


def _snapshots(
    base: pd.DataFrame,
    pool: pd.DataFrame,
    r: int,
    inserts: int,
    releases: int,
    rng: np.random.Generator,
    count: Callable[[int], int],
    rules: dict[str, UpdateRule],
    every: dict[str, UpdateRule],
) -> Iterator[pd.DataFrame]:
    """The generator behind ``stream``, its arguments already checked."""
    if releases == 0:
        return
    order = rng.permutation(len(pool))
    current = base.reset_index(drop=True)
    yield current.copy()
    for j in range(1, releases):
        keep = np.sort(rng.permutation(len(current))[r:])
        survivors = current.iloc[keep].reset_index(drop=True)
        survivors = _internal_updates(survivors, rules, count(len(survivors)), rng)
        survivors = _internal_updates(survivors, every, len(survivors), rng, everyone=True)
        fresh = pool.iloc[order[(j - 1) * inserts : j * inserts]]
        current = pd.concat([survivors, fresh], ignore_index=True)
        yield current.copy()


def _check_volumes(n: int, pool: int, r: int, inserts: int, releases: int) -> None:
    """Refuse volumes the protocol cannot honour, before anything is yielded."""
    if releases < 0 or r < 0 or inserts < 0:
        raise ValueError(f"stream: releases, r and inserts must be >= 0, got {releases}, {r}, {inserts}")
    steps = max(releases - 1, 0)
    if inserts * steps > pool:
        raise ValueError(
            f"stream: {releases} releases insert {inserts} rows each after the first, {inserts * steps} in all, "
            f"but the pool holds {pool} rows (enough for {1 + pool // inserts} releases)"
        )
    sizes = n + np.arange(steps) * (inserts - r)  # size of snapshot j + 1, from which release j + 2 deletes r
    short = np.flatnonzero(sizes < r)
    if len(short):
        j = short[0]
        raise ValueError(f"stream: cannot delete r={r} rows from snapshot {j + 1} of {sizes[j]} rows")


def _update_rules(
    base: pd.DataFrame,
    pool: pd.DataFrame,
    fraction: float,
    columns: Sequence[str] | Mapping[str, UpdateRule] | None,
) -> dict[str, UpdateRule]:
    """The update rule of each column: given, or 'another value of the column's domain' for a bare name."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"stream: update_fraction must be in [0, 1], got {fraction}")
    if fraction > 0 and not columns:
        raise ValueError("stream: update_fraction > 0 needs update_columns (the columns internal updates change)")
    if not columns:
        return {}
    given = dict(columns) if isinstance(columns, Mapping) else {c: None for c in columns}
    missing = [c for c in given if c not in base.columns]
    if missing:
        raise ValueError(f"stream: update column(s) {missing} are not columns of the snapshot")
    return {c: rule if rule is not None else _another_value(base[c], pool.get(c)) for c, rule in given.items()}


def _another_value(current: pd.Series, pool: pd.Series | None) -> UpdateRule:
    """The rule 'a value of the domain other than the current one, uniformly' over the values of ``current``
    and ``pool`` (a null, outside the domain, becomes any value of it)."""
    domain = pd.unique(pd.concat([p for p in (current, pool) if p is not None], ignore_index=True).dropna())
    domain = np.asarray(domain)
    if len(domain) < 2:
        raise ValueError(f"stream: column {current.name!r} has fewer than 2 values; an update cannot change it")
    index = pd.Index(domain)

    def rule(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        code = index.get_indexer(values)
        shift = rng.integers(1, len(domain), size=len(values))
        return domain[np.where(code < 0, shift - 1, (code + shift) % len(domain))]

    return rule


def _internal_updates(
    df: pd.DataFrame, rules: dict[str, UpdateRule], count: int, rng: np.random.Generator, everyone: bool = False
) -> pd.DataFrame:
    """``df`` (a fresh frame, changed in place) with ``count`` random rows (every row when ``everyone``) changed by
    every rule."""
    if not rules or count == 0:
        return df
    rows = np.arange(len(df)) if everyone else rng.choice(len(df), size=count, replace=False)
    for column, rule in rules.items():
        values = df[column].to_numpy(copy=True)
        values[rows] = rule(values[rows], rng)
        df[column] = values
    return df


def increment(step: float = 1, cap: float | None = None) -> UpdateRule:
    """The rule 'value + ``step``, at most ``cap``' (Li-Zhou §VI-A: "the age of each record will increase 1 till
    reach 100"). O(rows)."""

    def rule(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        grown = values + step
        return grown if cap is None else np.minimum(grown, cap)

    return rule


def _uniform_among(allowed: np.ndarray, domain: Sequence[Any]) -> UpdateRule:
    """The rule 'a value v' with ``allowed[a, v]`` (codes over ``domain``), uniformly among the allowed ones; a
    value outside ``domain`` stays. One draw per row: a uniform rank among the row's allowed values, found in the
    cumulative counts of its row of ``allowed``. O(rows · |domain|)."""
    values_of = np.asarray(list(domain), dtype=object)
    index = pd.Index(values_of)
    ranks = np.cumsum(allowed, axis=1)

    def rule(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        values = np.asarray(values)
        code = index.get_indexer(values)
        known = np.flatnonzero(code >= 0)
        out = values.astype(object)
        total = ranks[code[known], -1]
        pick = np.floor(rng.random(len(known)) * total).astype(np.int64)  # 0..total-1
        chosen = (ranks[code[known]] <= pick[:, None]).sum(axis=1)
        out[known] = values_of[chosen]
        return out if values.dtype == object else out.astype(values.dtype)

    return rule


def within_sets(update_sets: Mapping[Any, Sequence[Any]]) -> UpdateRule:
    """The rule of Li-Zhou §VI-A's sensitive updates: a value a becomes a value of its candidate update set
    CUS(a) (Def. 12; a itself included, "may stay the same ... with equal probabilities"), uniformly; a value
    with no CUS stays. O(rows · V) over the V values named."""
    domain = sorted({str(v) for a, targets in update_sets.items() for v in (a, *targets)})
    at = {v: i for i, v in enumerate(domain)}
    allowed = np.eye(len(domain), dtype=bool)
    for a, targets in update_sets.items():
        allowed[at[str(a)], [at[str(b)] for b in targets]] = True
    return _uniform_among(allowed, domain)


def never_back(domain: Sequence[Any], first: Any) -> UpdateRule:
    """The rule of Li-Zhou §VI-A's marital status: a value other than ``first`` ("Never married") becomes any value
    but ``first`` ("may update from married to any one in {married, divorced, separated, widowed} but can not
    update to be never-married"), ``first`` becomes any value; uniformly, the value itself included."""
    values = list(dict.fromkeys(domain))
    allowed = np.ones((len(values), len(values)), dtype=bool)
    if first in values:
        f = values.index(first)
        allowed[:, f] = False
        allowed[f, f] = True
    return _uniform_among(allowed, values)


def not_lower(levels: Sequence[Any]) -> UpdateRule:
    """The rule of Li-Zhou §VI-A's education: a level becomes a level not lower than itself ("may update from
    bachelor to any education not lower than bachelor"), uniformly, itself included; ``levels`` lowest first."""
    return _uniform_among(np.triu(np.ones((len(levels), len(levels)), dtype=bool)), levels)


def changes(prev: pd.DataFrame, cur: pd.DataFrame, id: str) -> dict[str, int]:
    """Counts of what turned ``prev`` into ``cur``: ``inserts`` (ids only in cur), ``deletes`` (ids only in prev)
    and ``updates`` (ids in both whose values differ in some shared column; two nulls count as equal).

    Ids are unique in each frame. They are matched with one hash look-up, then each shared column is compared
    as a numpy array (``changes_at``). O(n * d).
    """
    return changes_at(prev, cur, id, pd.Index(prev[id]).get_indexer(cur[id]))


def changes_at(prev: pd.DataFrame, cur: pd.DataFrame, id: str, where: np.ndarray) -> dict[str, int]:
    """``changes`` with the ids already matched: ``where`` holds the row of ``prev`` with each row of ``cur``'s id,
    -1 for a new one (a join by id made elsewhere, e.g. on a partition backend). O(n * d)."""
    in_cur = np.flatnonzero(where >= 0)
    in_prev = where[in_cur]
    differ = np.zeros(len(in_cur), dtype=bool)
    for column in (c for c in prev.columns if c in cur.columns and c != id):
        differ |= _differs(prev[column].take(in_prev), cur[column].take(in_cur))
    kept = len(in_cur)
    return {"inserts": len(cur) - kept, "deletes": len(prev) - kept, "updates": int(differ.sum())}


def _differs(a: pd.Series, b: pd.Series) -> np.ndarray:
    """Elementwise 'a and b hold different values' (by position; a null against a value differs, two nulls do
    not). Compared as numpy arrays; pandas' own comparison only when the values hold ``pd.NA``."""
    x, y = a.to_numpy(), b.to_numpy()
    try:
        differ = np.asarray(x != y, dtype=bool)
    except TypeError:  # pd.NA has no truth value
        differ = (a.reset_index(drop=True) != b.reset_index(drop=True)).fillna(True).to_numpy(dtype=bool)
    rows = np.flatnonzero(differ)
    differ[rows] = ~(pd.isna(x[rows]) & pd.isna(y[rows]))
    return differ
