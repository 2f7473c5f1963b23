"""QI classes of a published table and sets of sensitive values as bitsets: the one home of the grouping kernels.

A published table (the DuckDB contract: ``release_id``, ``group_id``, per released quasi-identifier ``A``:
``A``, ``A__lo``, ``A__hi``, ..., the sensitive column) falls into QI classes: the rows sharing
``(release_id, group_id)`` in a homogeneous release (Xiao-Tao Def. 2: one box per QI group), the rows sharing one
generalised box where ``group_id`` is null (per-tuple generalisation, Shmueli-Tassa Eq. (2)). ``qi_classes`` is
the kernel; ``qi_groups`` adds a readable frame of the classes (the verifiers' violations name them),
``class_boxes`` their boxes and value counts (the attacks' classes, taxonomy §IV-B), and the utility metrics count
them (``judge.utility``).

A set of sensitive values is a row of a uint64 bitset matrix, one bit per value of a vocabulary
(``encoding.value_codes``): ``bitsets`` builds them per class, ``group_or`` ORs them per class, ``popcount``
counts and ``describe`` spells them, so that signatures (Xiao-Tao Def. 16) compare as integer rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import sparse

from .encoding import plain_text, sensitive_codes, unique_keys, unique_rows

if TYPE_CHECKING:
    from .spec import BoundSpec, Spec


# ------------------------------------------------------------------------------------------- the published layout


def bound_columns(table: pd.DataFrame) -> list[str]:
    """The ``A__lo`` / ``A__hi`` columns of a published table, in table order. O(columns)."""
    return [c for c in table.columns if c.endswith("__lo") or c.endswith("__hi")]


def released_attributes(table: pd.DataFrame, spec: Spec, attributes: tuple[str, ...] | None = None) -> list[str]:
    """The quasi-identifiers of ``spec`` (or ``attributes``), in that order, that ``table`` publishes: its
    ``A__lo`` column exists and is not entirely null (a vertical release, Wang-Fung §1.1, or V0 of Shmueli-Tassa
    §3 publishes a subset). O(n) per attribute."""
    names = attributes or tuple(spec.quasi_identifiers)
    return [a for a in names if f"{a}__lo" in table.columns and table[f"{a}__lo"].notna().any()]


def group_keys(release_id: np.ndarray, group_id: np.ndarray) -> np.ndarray:
    """One int64 key per ``(release_id, group_id)`` pair of integers, ordered like the pairs. O(n)."""
    release_id = np.asarray(release_id, dtype=np.int64)
    group_id = np.asarray(group_id, dtype=np.int64)
    return release_id * np.int64(1 << 32) + group_id


def homogeneous(table: pd.DataFrame) -> bool:
    """Every row has an integer ``group_id`` (Xiao-Tao Def. 2: a homogeneous release). O(n)."""
    if "group_id" not in table.columns or table["group_id"].isna().any():
        return False
    gid = table["group_id"]
    return pd.api.types.is_integer_dtype(gid.dtype) or bool((gid.to_numpy(np.float64) % 1 == 0).all())


# ---------------------------------------------------------------------------------------------------- QI classes


def qi_classes(
    table: pd.DataFrame, attributes: Sequence[str] | None = None, by_release: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The QI class of every row: ``(index, first, size)``, ``index[i]`` the class of row i (0..classes-1, in
    the order of the classes' keys), ``first`` the first row of each class, ``size`` its rows.

    Homogeneous tables (``homogeneous``) class by ``(release_id, group_id)`` with one integer sort, O(n log n);
    otherwise rows with a ``group_id`` class by it and rows without one by their generalised box (Shmueli-Tassa
    Eq. (2)): the bounds of ``attributes`` (default: every bound column), one pandas group-by over the keys,
    O(n d log n). ``by_release=False`` ignores a ``release_id`` column (the utility metrics read one release).
    """
    keys = [c for c in ("release_id", "group_id") if c in table.columns and (by_release or c != "release_id")]
    if homogeneous(table):
        release = table["release_id"].to_numpy() if "release_id" in keys else np.zeros(len(table))
        _, first, index, size = unique_keys(group_keys(release, table["group_id"].to_numpy()))
        return index, first, size
    columns = bound_columns(table) if attributes is None else [c for a in attributes for c in (f"{a}__lo", f"{a}__hi")]
    gid = table["group_id"] if "group_id" in table.columns else pd.Series(np.nan, index=table.index)
    bounds = table[columns]
    bounds = bounds.where(np.broadcast_to(gid.isna().to_numpy()[:, None], bounds.shape))
    frame = pd.concat([table[keys], bounds], axis=1)
    if frame.shape[1] == 0:
        index = np.zeros(len(table), dtype=np.int64)
    else:
        index = frame.groupby(list(frame.columns), dropna=False, sort=True).ngroup().to_numpy()
    first = pd.Series(np.arange(len(table))).groupby(index).first().to_numpy()
    size = np.bincount(index, minlength=len(first))
    return index, first, size


def qi_groups(table: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """The QI group of every row: ``(index, groups)`` (``qi_classes``).

    ``groups`` has ``release_id`` (if the table has one), ``group_id`` (null for non-homogeneous rows), the
    readable QI labels of the group's first row and ``size``, sorted by ``(release_id, group_id)``: the frame the
    verifiers' violations are rows of. O(n log n) for a homogeneous table; the groups' rows are gathered one
    column at a time (not every column of the table), and categorical labels (the judge's window) come out as
    the text they stand for (``encoding.plain_text``), so the frame is the same whichever way the table was
    read.
    """
    keys = [c for c in ("release_id", "group_id") if c in table.columns]
    index, first, size = qi_classes(table)
    labels = [c for c in table.columns if f"{c}__lo" in table.columns]
    groups = pd.DataFrame({c: plain_text(table[c].take(first)).reset_index(drop=True) for c in [*keys, *labels]},
                          index=pd.RangeIndex(len(first)))
    if "group_id" not in groups.columns:
        groups["group_id"] = pd.Series(pd.NA, index=groups.index, dtype="Int64")
    groups["size"] = size
    return index, groups


def class_boxes(
    table: pd.DataFrame, spec: BoundSpec, names: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The classes of one release as the adversary sees them (taxonomy §IV-B): ``(label, lo, hi, counts)``, the
    class of each row (``qi_classes`` on ``names``), each class's box on ``names`` (classes x names) and its
    signature matrix (classes x ``spec.sensitive_values``, rows per value; a null value, published by a release
    that leaves the sensitive attribute out, counts nowhere). O(n log n + classes x values)."""
    label, first, _ = qi_classes(table, names, by_release=False)
    lo = np.column_stack([table[f"{a}__lo"].to_numpy(np.float64)[first] for a in names])
    hi = np.column_stack([table[f"{a}__hi"].to_numpy(np.float64)[first] for a in names])
    codes = sensitive_codes(table, spec)
    known = codes >= 0
    counts = sparse.csr_matrix(
        (np.ones(int(known.sum())), (label[known], codes[known])), shape=(len(first), len(spec.sensitive_values))
    ).toarray()
    return label, lo, hi, counts


# ------------------------------------------------------------------------------------------------------- bitsets


def bitsets(index: np.ndarray, codes: np.ndarray, count: int, width: int) -> np.ndarray:
    """The set of codes of each of ``count`` groups as a ``(count, ceil(width/64))`` uint64 bitset matrix
    (``index``: group of each code). Distinct (group, code) pairs are sorted once; each (group, word) is an
    OR-reduction over a run of them. O(n log n)."""
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


def group_or(row_group: np.ndarray, bits: np.ndarray, count: int) -> np.ndarray:
    """OR of the bitset rows of each of ``count`` groups (rows of ``bits`` belong to ``row_group``), by one sort
    and ``reduceat``. O(n log n)."""
    out = np.zeros((count, bits.shape[1]), dtype=np.uint64)
    if len(row_group) == 0:
        return out
    order = np.argsort(row_group, kind="stable")
    ordered = row_group[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    out[ordered[starts]] = np.bitwise_or.reduceat(bits[order], starts, axis=0)
    return out


def pack_bits(flags: np.ndarray) -> np.ndarray:
    """Boolean rows (n, w) as uint64 bitset rows (n, ceil(w / 64)): column j is bit j % 64 of word j // 64.
    O(n w)."""
    packed = np.packbits(flags, axis=1, bitorder="little")
    width = max(1, -(-flags.shape[1] // 64)) * 8
    packed = np.pad(packed, ((0, 0), (0, width - packed.shape[1])))
    return np.ascontiguousarray(packed).view(np.uint64)


def unpack_bits(bits: np.ndarray, width: int | None = None) -> np.ndarray:
    """uint64 bitset rows as boolean rows (n, ``width``; default 64 per word): the inverse of ``pack_bits``.
    O(n words)."""
    flags = np.unpackbits(np.ascontiguousarray(bits).view(np.uint8), axis=1, bitorder="little").astype(bool)
    return flags if width is None else flags[:, :width]


def bitset_image(words: np.ndarray, M: np.ndarray, width: int) -> np.ndarray:
    """The image of each bitset row of ``words`` (a set of ``width`` values, ``pack_bits``) under the relation
    ``M`` (width x width booleans): the values t with ``M[s, t]`` for some s of the row, as bitset rows. With
    Li-Zhou's CUS relation or the SUG's edges (Def. 10) the successors, with its transpose the predecessors.
    Each distinct row once (``encoding.unique_rows``), a boolean product over the values, then a gather:
    O(n log n + distinct rows x width^2)."""
    distinct, inverse, _ = unique_rows(words)
    image = (unpack_bits(distinct, width).astype(np.float32) @ M.astype(np.float32)) > 0
    return pack_bits(image)[inverse]


def popcount(bits: np.ndarray) -> np.ndarray:
    """Number of set bits of each bitset row. O(rows x words)."""
    return np.bitwise_count(bits).sum(axis=1).astype(np.int64)


def describe(bits: np.ndarray, vocabulary: Sequence[str]) -> np.ndarray:
    """Readable ``{a, b}`` form of bitset rows; each distinct row (``unique_rows``) is spelled once.
    O(rows log rows + distinct x width)."""
    if len(bits) == 0:
        return np.array([], dtype=object)
    distinct, inverse, _ = unique_rows(bits)
    flags = np.unpackbits(np.ascontiguousarray(distinct).view(np.uint8), axis=1, bitorder="little").astype(bool)
    names = np.array(list(vocabulary) + [""] * (flags.shape[1] - len(vocabulary)), dtype=object)
    text = np.array(["{" + ", ".join(names[row]) + "}" for row in flags], dtype=object)
    return text[inverse]
