"""Values as integers: the one home of the value -> code and value -> rank kernels every model and the judge share.

- Sensitive value -> code: ``codes_in`` (a fixed vocabulary, -1 outside it: the spec's domain), ``value_codes``
  (an open vocabulary: the domain first, unseen values after; the verifiers check tables without a spec) and
  ``sensitive_codes`` (a frame's sensitive column in the spec's domain). One kernel: a hash pass
  (``pd.factorize``) over the column, then one look-up per distinct value; values compare as text, a null being
  the text ``"None"`` / ``"nan"``.
- QI value -> rank: ``qi_values`` (one column: numbers, or leaf ranks in a categorical's taxonomy, the
  taxonomy's left-to-right leaf order of Xiao-Tao footnote 1) and ``encode`` (the (n, d) matrix of them).
- Integer keys: ``unique_keys`` (``np.unique`` with first positions, inverse and counts by one stable sort),
  ``dense_unique`` (uniques and inverse, by counting when the keys span a narrow range), ``rank_keys`` (a row
  of ranks as one integer key, in the rows' lexicographic order), ``unique_rows`` (distinct rows of a matrix),
  ``distinct_rank_rows`` (the distinct rows of a ``dense_ranks`` matrix by their keys) and ``dense_ranks`` (per column, the rank of each value among the distinct values, the Mondrian cut search and
  m-invariance's bucket split both work on ranks).

Everything here is pure numpy/pandas on arrays; nothing reads a release's layout (``grouping``) or a box
(``intervals``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from .spec import BoundSpec


# ------------------------------------------------------------------------------------------------- value -> code


def _distinct_text(values: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """``(local, text)``: the position of each value among the column's distinct values, and their text. One hash
    pass, O(n); a null is a value of its own (``use_na_sentinel=False``). A categorical column (the judge's
    window, ``storage.read``) is read through its codes, O(n) by counting, its null spelled ``"nan"`` as
    ``pd.factorize`` spells the null (None or NaN) of the object column it stands for."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        present, local = _dense_codes(np.asarray(values.cat.codes, dtype=np.int64))
        words = _category_words(values, np.nan)  # a null: "nan", as pd.factorize spells an object column's null
        return local, pd.Index(words[present]).astype(str)
    local, uniques = pd.factorize(values, use_na_sentinel=False)
    return local, pd.Index(uniques).astype(str)


def _dense_codes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(codes, return_inverse=True)`` for small codes (-1 for a null), by counting. O(n + range)."""
    present = np.bincount(codes + 1) > 0
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present) - 1, rank[codes + 1]


def plain_text(values: pd.Series) -> pd.Series:
    """A categorical text column (the judge's window, ``storage.read``) as the object column of Python strings
    it stands for, a null as None (what DuckDB's text reads as); any other column as it is. For the few rows a
    report names (a group's labels), never for a whole window. O(n)."""
    if not isinstance(values.dtype, pd.CategoricalDtype):
        return values
    return _spelled(values, _category_words(values, None))


def as_text(values: pd.Series) -> pd.Series:
    """``values.astype(str)`` without a new Python string per cell: a column of texts is returned as it is, and a
    categorical's categories are spelled once and looked up by code (a null as ``"nan"``, as ``astype(str)``
    spells it). ``astype(str)`` makes a string per cell (1M rows of Census-KDD text: 78 MB a column), which is
    what validating a 10M-row snapshot cost (``spec.validate_snapshot``, 5 GB). O(n): one type pass, or a take."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        words = _category_words(values, "nan")
        words[:-1] = [str(w) for w in words[:-1]]
        return _spelled(values, words)
    if values.dtype == np.dtype(object) and pd.api.types.infer_dtype(values, skipna=False) == "string":
        return values
    return values.astype(str)


def _spelled(values: pd.Series, words: np.ndarray) -> pd.Series:
    """The categorical ``values`` as the object column of their ``words`` (``_category_words``), looked up by code.
    O(n)."""
    return pd.Series(words[np.asarray(values.cat.codes, dtype=np.int64)], index=values.index, name=values.name,
                     dtype=object)


def _category_words(values: pd.Series, null: object) -> np.ndarray:
    """The categories of a categorical column as an object array, then ``null``: indexed by a code, -1 (a null)
    gives ``null``. O(categories)."""
    words = np.empty(len(values.cat.categories) + 1, dtype=object)
    words[:-1] = np.asarray(values.cat.categories, dtype=object)
    words[-1] = null
    return words


def codes_in(values: pd.Series, vocabulary: Sequence[str]) -> np.ndarray:
    """Codes of ``values`` in a fixed ``vocabulary`` (-1 for a value outside it), compared as text.

    One hash pass over the column and one look-up per distinct value: O(n + distinct). The kernel behind every
    sensitive-value code (Xiao-Tao Def. 16's signatures, the attacks' candidate sets) and every categorical leaf
    rank (``qi_values``).
    """
    local, text = _distinct_text(values)
    return pd.Index(vocabulary).get_indexer(text)[local]


def value_codes(values: pd.Series, domain: Sequence[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """Codes of ``values`` in an open vocabulary, and the vocabulary: ``domain`` first, the values outside it
    after, sorted. A verifier reads any table, also values its spec's domain lacks, and must still name them.
    O(n + distinct log distinct)."""
    local, text = _distinct_text(values)
    known = list(domain or ())
    vocabulary = known + sorted(set(text) - set(known))
    return pd.Index(vocabulary).get_indexer(text)[local], vocabulary


def sensitive_codes(table: pd.DataFrame, spec: BoundSpec) -> np.ndarray:
    """The sensitive column of ``table`` as codes into ``spec.sensitive_values`` (a bound spec), -1 for a value
    outside the domain (e.g. the null of a release that leaves the sensitive attribute out). O(n)."""
    return codes_in(table[spec.sensitive], spec.sensitive_values)


# -------------------------------------------------------------------------------------------------- value -> rank


def qi_values(values: pd.Series, spec: BoundSpec, name: str) -> np.ndarray:
    """One quasi-identifier column as float64: a numeric attribute's values, a categorical's leaf ranks in its
    taxonomy (-1 for a value that is no leaf). A published ``A__lo``/``A__hi`` bound is in the same units, so a
    point-in-box test compares the two directly (Xiao-Tao Def. 2 (2)). Needs a bound spec. O(n)."""
    qi = spec.quasi_identifiers[name]
    if qi.numeric:
        return values.to_numpy(dtype=np.float64)
    return codes_in(values, spec.taxonomy(name).leaves).astype(np.float64)


def encode(snapshot: pd.DataFrame, spec: BoundSpec, attributes: tuple[str, ...] | None = None) -> np.ndarray:
    """The quasi-identifiers (default: all of the spec's, in spec order) of a validated snapshot as an (n, d)
    float64 matrix of ``qi_values``: numbers, categoricals as leaf ranks. Needs a bound spec. O(n d)."""
    names = attributes or tuple(spec.quasi_identifiers)
    out = np.empty((len(snapshot), len(names)), dtype=np.float64)
    for j, name in enumerate(names):
        out[:, j] = qi_values(snapshot[name], spec, name)
    return out


# --------------------------------------------------------------------------------------------- unique and ranks


def _narrow(keys: np.ndarray) -> bool:
    """Integer keys spanning a range not much wider than their number (group ids 1..g): counting beats sorting."""
    return len(keys) > 0 and int(keys.max()) - int(keys.min()) <= 4 * len(keys)


def unique_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(keys, return_index, return_inverse, return_counts)`` for int64 keys: ``(uniques, first,
    inverse, counts)``, ``first`` the first position of each distinct key. By counting, O(n), when the keys span
    a narrow range (``_narrow``: a release's group ids), else by one stable argsort, O(n log n) (numpy's
    hash-based unique is several times slower on millions of distinct keys)."""
    keys = np.asarray(keys, dtype=np.int64)
    if _narrow(keys):
        low = int(keys.min())
        offset = keys - low
        counts = np.bincount(offset)
        present = counts > 0
        inverse = (np.cumsum(present) - 1)[offset]
        first = np.full(len(counts), len(keys), dtype=np.int64)
        np.minimum.at(first, offset, np.arange(len(keys)))
        return np.flatnonzero(present) + low, first[present], inverse, counts[present]
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    start = np.r_[True, ordered[1:] != ordered[:-1]] if len(keys) else np.zeros(0, dtype=bool)
    rank = np.cumsum(start) - 1
    inverse = np.empty(len(keys), dtype=np.int64)
    inverse[order] = rank
    counts = np.diff(np.r_[np.flatnonzero(start), len(keys)])
    return ordered[start], order[start], inverse, counts


def dense_unique(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(uniques, inverse)`` of integer ids, as ``np.unique(ids, return_inverse=True)``: ``unique_keys`` without
    the first positions and counts, which the models' hot path (10M rows) does not need: O(n) by counting when
    the ids span a narrow range (group ids 1..g), else the sort of ``unique_keys``, O(n log n)."""
    ids = np.asarray(ids, dtype=np.int64)
    if not _narrow(ids):
        uniques, _, inverse, _ = unique_keys(ids)
        return uniques, inverse
    low = int(ids.min())
    present = np.bincount(ids - low) > 0
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present) + low, rank[ids - low]


#: ``narrow_integers``' limits: an int16 holds values of magnitude below 2^13 and an int32 below 2^29, so that a
#: reader's ``hi - lo + 1`` or a sum of two never wraps in the narrow type.
_INT16_BELOW, _INT32_BELOW = 1 << 13, 1 << 29


def narrow_integers(values: np.ndarray) -> np.ndarray:
    """Integer ``values`` (leaf ranks, counts) as int16 when every magnitude is below 2^13, as int32 below 2^29,
    else as they are: the same values in 2 or 4 bytes a cell instead of 8, with room for a difference or a sum of
    two. O(n)."""
    values = np.asarray(values)
    if not len(values):
        return values
    top = max(abs(int(values.min())), abs(int(values.max())))
    kind = np.int16 if top < _INT16_BELOW else np.int32 if top < _INT32_BELOW else None
    return values.astype(kind) if kind is not None and np.dtype(kind).itemsize < values.dtype.itemsize else values


def rank_keys(ranks: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """One int64 key per row of a matrix of non-negative ranks (column j below ``sizes[j]``), equal for equal
    rows, different otherwise, and ordered as the rows are lexicographically: the mixed-radix number of the row,
    so that ``unique_keys`` finds the distinct rows, and a stable ``argsort`` sorts them, with one integer sort
    instead of ``np.unique(axis=0)`` / ``np.lexsort``. When the radix product would pass 2^62 the key so far is
    replaced by its dense rank (``dense_unique``, which keeps the order) first: one ``extend_rank_key`` per
    column (a caller that makes its columns one at a time folds them in itself and keeps none). O(n d), plus
    O(n log n) per re-ranking (none while the product of the sizes stays below 2^62); memory O(n) beyond the
    ranks."""
    key, span = np.zeros(ranks.shape[0], dtype=np.int64), 1
    for j in range(ranks.shape[1]):
        key, span = extend_rank_key(key, span, ranks[:, j], sizes[j])
    return key


def extend_rank_key(key: np.ndarray, span: int, rank: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """One more column of ``rank_keys``: ``(key, span)`` of the columns so far (``span``: the product of their
    sizes, or the number of distinct keys after a re-ranking; start from zeros and 1) extended by ``rank``
    (values below ``size``), so that a caller can fold columns in as it makes them and keep none (as
    ``frame_digest`` does). Changes ``key`` in place unless it re-ranks it first (``dense_unique``) when the product
    would pass 2^62. O(n), plus O(n log n) for a re-ranking."""
    size = max(int(size), 1)
    if span * size >= 2**62:
        uniques, key = dense_unique(key)
        span = max(len(uniques), 1)
    key *= size
    key += rank
    return key, span * size


def distinct_rank_rows(ranks: np.ndarray, values: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(first, inverse, counts)`` of the distinct rows of a ``dense_ranks`` matrix (``values`` its columns'
    distinct values): the first row of each distinct row (in the rows' lexicographic order), the distinct row of
    each row and how many rows hold it, by one integer key per row (``rank_keys``, ``unique_keys``). Shifts
    ``ranks`` by one in place (NaN's -1 becomes 0) rather than copying them. O(n d + n log n)."""
    ranks += 1
    _, first, inverse, counts = unique_keys(rank_keys(ranks, [len(v) + 1 for v in values]))
    return first, inverse, counts


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(distinct, inverse, counts)``: the distinct rows of a 2-D array (sorted), the distinct row of each input
    row and how many input rows each has. One integer column (a bitset of up to 64 values, a single rank) takes
    a 1-D sort, the same result as the sort of opaque records ``np.unique(axis=0)`` makes. O(n d log n)."""
    if rows.ndim == 2 and rows.shape[1] == 1 and np.issubdtype(rows.dtype, np.integer):
        distinct, inverse, counts = np.unique(rows[:, 0], return_inverse=True, return_counts=True)
        return distinct[:, None], inverse.reshape(-1), counts
    distinct, inverse, counts = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    return distinct, inverse.reshape(-1), counts


def dense_ranks(X: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per column of ``X`` (n, d), the rank of each value among the column's distinct values (ties share a rank,
    0 is the smallest) and -1 for NaN (a counterfeit has no QI values); and each column's distinct values, in
    rank order. Ranks are int32 (int64 beyond 2^31 rows). O(n d log n).

    The one dense-rank kernel of the models: Mondrian (LeFevre et al.; ``models.kernels.partition.partition``) reads the
    ranks as they are; m-invariance's bucket split (``models.kernels.split.rank_codes``) shifts them by one (0 for
    a counterfeit) into the smallest unsigned type and keeps the values as its look-up table.
    """
    n, d = X.shape
    ranks = np.full((n, d), -1, dtype=np.int32 if n < 2**31 else np.int64)
    values = []
    for j in range(d):
        column = X[:, j]
        known = ~np.isnan(column)
        if known.all():  # a sort and a search: 2-3x faster than np.unique's inverse (an argsort) on millions
            distinct = np.unique(column)
            ranks[:, j] = np.searchsorted(distinct, column)
        else:
            distinct = np.unique(column[known])
            ranks[known, j] = np.searchsorted(distinct, column[known])
        values.append(distinct)
    return ranks, values
