"""The write side of the release store: stage a snapshot, keep a model stage's frames, stage a candidate,
publish it, discard what was staged, keep the judge's candidate sets.

Every write is one DuckDB transaction (``StoreSchema._transaction``), so a release is either entirely in
``published`` or not there at all. Rows are written with ``INSERT INTO ... BY NAME`` (``_insert``): a reordered
column can never land in the wrong place. Re-publishing a release with the same content is a no-op: a digest of
each published release's content (``release_digest``) is kept in ``private.digest``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..core.encoding import dense_unique, extend_rank_key
from ..core.judge.history import ARCHIVED, unit_columns
from ..core.models import find
from ..core.release import Release
from ..core.spec import BoundSpec, validate_snapshot
from ..errors import StoreError
from .connection import first_row, is_text, quote, registered, release_arrow_memory, scalar, table_exists
from .schema import (
    StoreSchema,
    ids_text,
    is_staged,
    new_domain_rows,
    permutation_view_sql,
    published_ids,
    release_columns,
    sql_type,
    staged_ids,
    state_tables,
    stored_columns,
    stored_snapshot,
)

#: The tables of the judge's memo entries kept by append (``archive_table``).
ARCHIVE_PREFIX = "judge_archive_"
_STATE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


#: Value kinds (``pd.api.types.infer_dtype``) of a text column whose distinct values, as Python compares them,
#: are exactly its distinct texts (1 == 1.0 == True, 0.0 == -0.0 are not: their columns are spelled row by row).
_ONE_TEXT_PER_VALUE = frozenset({"string", "integer", "boolean", "empty"})
_NULL_TEXT = "\x00null"


def _value_kind(col: pd.Series) -> str:
    """``pd.api.types.infer_dtype`` of a column's non-null values (of its categories for a categorical): one C
    pass, O(n)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return pd.api.types.infer_dtype(col.cat.categories, skipna=True)
    return pd.api.types.infer_dtype(col, skipna=True)


def _text_ranks(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A non-numeric column as ``frame_digest`` reads it, each value's text (``str``; a null is the text
    ``_NULL_TEXT``): ``(codes, texts)``, ``texts`` the distinct texts sorted (as Python sorts strings) and
    ``codes[i]`` the position of row i's text in them, so codes order rows as their texts do. One hash pass
    (``pd.factorize``) and ``str`` of each distinct value only; a column whose values Python may equate across
    spellings (not ``_ONE_TEXT_PER_VALUE``: 1 == 1.0 == True, 0.0 == -0.0) is spelled row by row first.
    O(n + distinct log distinct)."""
    if _value_kind(col) not in _ONE_TEXT_PER_VALUE:
        col = col.astype(str).where(col.notna())
    codes, uniques = pd.factorize(col, use_na_sentinel=True)
    spelled = np.array([str(v) for v in np.asarray(uniques, dtype=object)] + [_NULL_TEXT], dtype=object)
    texts, inverse = np.unique(spelled, return_inverse=True)
    return inverse.reshape(-1)[np.where(codes < 0, len(spelled) - 1, codes)], texts  # factorize's -1: isna's nulls


def _number_ranks(values: np.ndarray) -> tuple[np.ndarray, int]:
    """``(rank, distinct)``: each float64 value's rank among the distinct values (NaN last, 0.0 equal to -0.0: the
    order in which ``sort_values`` puts them) and how many there are. Integral values (ids, leaf ranks, counts)
    by ``encoding.dense_unique`` (counting when they span a narrow range: O(n)), others by ``np.unique``:
    O(n log n)."""
    if len(values) and np.isfinite(values).all() and np.abs(values).max() < 2**62 and (values % 1 == 0).all():
        distinct, rank = dense_unique(values.astype(np.int64))
    else:
        distinct, rank = np.unique(values, return_inverse=True)
    return rank.reshape(-1), len(distinct)


def frame_digest(frame: pd.DataFrame) -> str:
    """A hash of a frame's content that ignores row order, column order and storage dtypes.

    Numbers (and booleans) are compared as float64, everything else as text, nulls as nulls: the canonical frame
    has the columns in name order, numbers as float64 (null: NaN), other values as their ``str`` (null: the
    text ``_NULL_TEXT``, NUL then "null"), its rows sorted by every column (NaN last); the digest is the SHA-256
    of the column names and ``pd.util.hash_pandas_object`` of its rows in that order. So a release read back from
    DuckDB hashes like the one the model returned.

    Cost O(n log n) without Python work per row: a text column is spelled once per distinct value (a
    categorical of its texts hashes like the texts themselves) and ranked; the rows are ordered by one stable
    integer sort of their ranks as one key per row (``encoding.rank_keys``, folded in a column at a time by
    ``extend_rank_key``, so no column's ranks are kept), the same order as sorting the
    canonical frame by all its columns (120k Census-KDD rows: about 0.08 s of CPU for a snapshot, 0.16 s for a
    release table). The digests are those of the sorted canonical frame, hashed as an object column, with one
    exception: pandas hashes an all-text object column through its string table, which reads a text up to its
    first NUL, so the null marker would hash like "" in a column that also holds "" (a null could not be told
    from an empty text); here the null is a category of its own.
    """
    return _digest(sorted(frame.columns), len(frame), lambda name: _canonical(frame[name]))


def query_digest(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> str:
    """``frame_digest`` of the rows a query returns, read from DuckDB as Arrow a column at a time, without a pandas
    frame of its text: the same value as ``frame_digest(query_frame(con, sql, params))``, each text column read
    as Arrow strings and ranked by Arrow (``_arrow_canonical``: a Python string per distinct text, not per row).
    The columns of one query come in the same row order (DuckDB keeps the insertion order of a query without
    ``ORDER BY``, ``preserve_insertion_order``).

    Cost: one scan of the query per column; the memory of one column's Arrow array and ranks at a time, beside
    the rows' rank key, hash and sort order (24 bytes a row), not the whole result (``_digest``).
    """
    params = params or []
    names = con.sql(sql, params=params).columns

    def column(name: str) -> tuple[Any, np.ndarray, int]:
        read = con.sql(f"SELECT {quote(name)} FROM ({sql}) AS q", params=params).to_arrow_table()
        return _arrow_canonical(read.column(0))

    rows = int(scalar(con, f"SELECT count(*) FROM ({sql}) AS q", params))
    return _digest(sorted(names), rows, column)


def _digest(columns: list[str], rows: int, canonical: Callable[[str], tuple[Any, np.ndarray, int]]) -> str:
    """``frame_digest`` of ``rows`` rows whose columns (in name order) ``canonical`` gives one at a time as
    ``(canonical values, rank of each row, number of ranks)`` (``_canonical``). The rows' rank key
    (``extend_rank_key``) and their hash are folded in a column at a time, the hash as
    ``pd.util.hash_pandas_object`` of the canonical frame combines its columns' hashes (pandas'
    ``combine_hash_arrays``, CPython's tuple hash), so no column is kept once folded and the canonical frame is
    never built. O(rows log rows) time; memory: 24 bytes a row beside one column."""
    if not columns:
        return hashlib.sha256(json.dumps(columns).encode()).hexdigest()
    key, span = np.zeros(rows, dtype=np.int64), 1
    hashed, mult = np.full(rows, 0x345678, dtype=np.uint64), np.uint64(1000003)
    for i, name in enumerate(columns):
        values, rank, size = canonical(name)
        key, span = extend_rank_key(key, span, rank, size)
        del rank
        hashed ^= pd.util.hash_pandas_object(pd.Series(values, copy=False), index=False).to_numpy()
        del values
        hashed *= mult
        mult += np.uint64(82520 + 2 * (len(columns) - i))
    hashed += np.uint64(97531)
    digest = hashlib.sha256(json.dumps(columns).encode())
    digest.update(hashed[np.argsort(key, kind="stable")].tobytes())
    return digest.hexdigest()


def _canonical(col: pd.Series) -> tuple[Any, np.ndarray, int]:
    """One column of ``frame_digest``'s canonical frame: ``(values, rank, size)``, the values as hashed (float64,
    or a categorical of the sorted texts), each row's rank among them and how many ranks there are."""
    if pd.api.types.is_numeric_dtype(col.dtype):
        values = col.to_numpy(dtype=np.float64, na_value=np.nan)
        rank, size = _number_ranks(values)
        return values, rank, size
    rank, texts = _text_ranks(col)
    return pd.Categorical.from_codes(rank, categories=pd.Index(texts, dtype=object)), rank, len(texts)


def _arrow_canonical(column: pa.ChunkedArray) -> tuple[Any, np.ndarray, int]:
    """``_canonical`` of a column read from DuckDB as Arrow. A text column without a Python string per row: its
    distinct texts and the null marker (``_NULL_TEXT``) sorted by Arrow (byte order of UTF-8, which is Python's
    code point order), each row's rank by one hash look-up (``pc.index_in``); any other column as pandas reads
    it (``Table.to_pandas``, as ``query_frame`` does), and so is a text column holding a NUL (pandas reads such a
    text up to its NUL). O(rows + distinct log distinct) for text."""
    if pa.types.is_string_view(column.type):
        column = column.cast(pa.string())
    distinct = pc.unique(column).drop_null() if is_text(column.type) else None
    if distinct is None or pc.any(pc.match_substring(distinct, "\x00")).as_py():  # NUL: as pandas spells it
        return _canonical(column.to_pandas())
    words = pc.unique(pa.concat_arrays([distinct, pa.array([_NULL_TEXT], type=column.type)]))
    texts = words.take(pc.sort_indices(words))
    found = pc.index_in(column, value_set=texts)
    rank = np.asarray(pc.fill_null(found, pc.index(texts, _NULL_TEXT)), dtype=np.int64)
    categories = pd.Index(texts.to_numpy(zero_copy_only=False), dtype=object)
    return pd.Categorical.from_codes(rank, categories=categories, validate=False), rank, len(texts)


def release_digest(release: Release) -> str:
    """A hash of everything a release publishes or keeps: model, params, attributes, table, R(j), hosting, state."""
    digest = hashlib.sha256(
        _json([release.model, release.params, list(release.attributes)]).encode()
    )
    parts = [("table", release.table), ("counterfeits", release.counterfeits), ("hosting", release.hosting)]
    parts += sorted((f"state_{k}", v) for k, v in release.state.items() if len(v))  # empty state = no state
    for name, frame in parts:
        digest.update(name.encode())
        digest.update(frame_digest(frame).encode())
    return digest.hexdigest()


def candidate_digest(con: duckdb.DuckDBPyConnection, release_id: int, model: str, params: Any,
                     attributes: Sequence[str], columns: Sequence[str]) -> str:
    """``release_digest`` of the candidate staged for ``release_id`` (its ``model``, ``params`` and ``attributes``
    as ``private.candidate_meta`` keeps them, its table's ``columns``), read from DuckDB: each part by
    ``query_digest``, the same value as ``release_digest(StoreReader.candidate(release_id))``. Cost: one read of
    each part as Arrow, O(rows log rows)."""
    digest = hashlib.sha256(_json([model, params, list(attributes)]).encode())
    what = ", ".join(quote(c) for c in columns)
    parts = [("table", f"SELECT {what} FROM private.candidate_release"),
             ("counterfeits", "SELECT * EXCLUDE (release_id) FROM private.candidate_counterfeit"),
             ("hosting", "SELECT * EXCLUDE (release_id) FROM private.candidate_hosting")]
    states = [(f"state_{t.removeprefix('candidate_state_')}", f"SELECT * EXCLUDE (release_id) FROM private.{t}")
              for t in state_tables(con, "candidate_state_")]
    parts += sorted(s for s in states if scalar(con, f"SELECT count(*) FROM ({s[1]} WHERE release_id = ?)",
                                                [release_id]))  # empty state = no state
    for name, sql in parts:
        digest.update(name.encode())
        digest.update(query_digest(con, f"{sql} WHERE release_id = ?", [release_id]).encode())
    return digest.hexdigest()


class StoreWriter(StoreSchema):
    """What can be written to a release store; each method is one transaction.

    Release ids start at 1 and increase by 1; a release is staged (its snapshot), then the model's stages may
    keep frames with it, then a candidate is staged, then published.
    """

    def stage_snapshot(self, release_id: int, snapshot: pd.DataFrame,
                       columns: list[str] | None = None) -> pd.DataFrame:
        """Validate ``snapshot`` and store it as T(release_id); return the stored snapshot (its ``columns`` only,
        when given: ``pipeline.stage`` asks for none, ``[]``, and gets a frame of the stored rows' count, not a
        frame of every text cell).

        A *published* T(release_id) is returned unchanged: a published release's snapshot is never replaced, so
        the release stays reproducible. An unpublished T(release_id) with the same rows (``frame_digest``) is
        returned unchanged too, with its candidate and kept frames (a retry goes on where it stopped); one with
        other rows (a refused release whose source was fixed) is replaced in the same transaction, which drops
        everything staged with it or after it (``_drop_staged``), so a refusal never blocks the next release.
        Refuses (StoreError) an id that is not the next one after the last staged release, and a snapshot whose
        column types drifted from the stored ones; SnapshotError for a snapshot the spec refuses.
        """
        with self._transaction() as con:
            stored = stored_snapshot(con, release_id) if is_staged(con, release_id) else None
            published = published_ids(con)
            if stored is not None and release_id in published:
                return stored if columns is None else stored[columns]
            frame = validate_snapshot(snapshot, self.spec)
            if stored is not None:
                if frame_digest(frame) == frame_digest(stored):
                    return stored if columns is None else stored[columns]
                _drop_staged(con, release_id)
                if not published and not staged_ids(con):  # the replaced capture's column types bind nothing
                    _forget_columns(con)
            staged = staged_ids(con)
            expected = max(staged + published, default=0) + 1
            if release_id != expected:
                raise StoreError(
                    f"release {release_id}: the next release to stage is {expected} "
                    f"(staged: {ids_text(staged)}); release ids increase by 1"
                )
            self._record_columns(con, frame, snapshot)
            _insert(con, "private.snapshot", _with_id(frame, release_id))
            return stored_snapshot(con, release_id, columns)

    def _record_columns(self, con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, raw: pd.DataFrame) -> None:
        """Record the columns of a validated snapshot ``frame`` (``raw``: as given, for the kinds of its values)
        on first staging and create the tables shaped by them; afterwards refuse drift from them
        (``StoreSchema._check_columns``)."""
        stored = stored_columns(con)
        if len(stored):
            self._check_columns(stored, frame, raw)
            return
        record = self._column_record(frame, raw)
        _insert(con, "private.columns", record)
        self._create_data_tables(con, dict(zip(record["column_name"], record["sql_type"], strict=True)))

    def discard(self, release_id: int) -> None:
        """Drop the staged, unpublished snapshot, kept frames and candidate of ``release_id`` and of every later
        release (``stage_snapshot`` does this itself when new rows replace an unpublished snapshot).

        Raises:
            StoreError: for ``release_id`` at or below the last published release (or below 1), naming that
                release: a published release is never discarded, nor is anything before it.
        """
        with self._transaction() as con:
            last = max(published_ids(con), default=0)
            if release_id <= last:
                where = f"release {last} is the last published one" if last else "release ids start at 1"
                raise StoreError(f"{self.path}: release {release_id}: {where}; a published release is never discarded, "
                                 f"only a staged one after the last published (release {last + 1} or later)")
            _drop_staged(con, release_id)

    def stage_state(self, release_id: int, frames: Mapping[str, pd.DataFrame]) -> None:
        """Keep a model stage's private frames (``Stage.run``, e.g. the possible-world set) with the staged
        release ``release_id``: each in ``private.candidate_state_<name>``, replacing the earlier frame of that
        release and name (other names are kept), all in one transaction. ``staged_state`` reads them back.

        They travel with the release: the pipeline hands them to the model and on in ``Release.state``, so
        ``stage_candidate`` keeps them, ``publish`` copies them to ``private.state_<name>`` and ``discard`` drops
        them. StoreError when T(release_id) is not staged or a name is not lower-case letters, digits and
        underscores. Cost: one delete and one insert per frame.
        """
        with self._transaction() as con:
            if not is_staged(con, release_id):
                raise StoreError(f"release {release_id}: no snapshot staged; stage the snapshot first")
            _write_states(con, "candidate_state_", release_id, frames)

    def stage_candidate(self, release_id: int, release: Release) -> None:
        """Store ``release`` as the candidate of ``release_id``, its state included (replacing an earlier
        candidate of that id and every frame kept with it); drops the judge's candidate sets of this and later
        releases. StoreError when T(release_id) is not staged."""
        with self._transaction() as con:
            if not is_staged(con, release_id):
                raise StoreError(f"release {release_id}: no snapshot staged; stage the snapshot first")
            tables = ["private.candidate_release", "private.candidate_counterfeit", "private.candidate_hosting",
                      "private.candidate_meta"]
            for table in tables + [f"private.{t}" for t in state_tables(con, "candidate_state_")]:
                con.execute(f"DELETE FROM {table} WHERE release_id = ?", [release_id])
            con.execute("DELETE FROM private.candidate_set WHERE release_id >= ?", [release_id])
            _drop_judge_memo(con, release_id)
            _insert(con, "private.candidate_release", _with_id(release.table, release_id))
            _insert(con, "private.candidate_counterfeit", _with_id(release.counterfeits, release_id))
            _insert(con, "private.candidate_hosting", _with_id(release.hosting, release_id))
            meta = pd.DataFrame({"release_id": [release_id], "model": [release.model],
                                 "params": [_json(release.params)],
                                 "attributes": [list(release.attributes)]})
            _insert(con, "private.candidate_meta", meta)
            _write_states(con, "candidate_state_", release_id, release.state)

    def publish(self, release_id: int, release: Release, checks: dict[str, bool], utility: dict[str, float],
                verdicts: pd.DataFrame | None = None) -> None:
        """Publish ``release``, a release held in memory, as release ``release_id`` in one transaction:
        published.release, .counterfeit, .domain, .manifest, .verdict (``verdicts``: the judge's counts,
        ``pipeline.verdicts``; none when None), private.hosting, the model state and the content digest
        (``release_digest``). ``publish_candidate`` publishes the staged candidate without reading it.

        Idempotent: publishing a published id again with the same content does nothing; with different content it
        is a StoreError. Refuses an id that is not the next one, and a release whose snapshot was never staged.
        The staged candidates of earlier releases, published before, are dropped (``_drop_published_candidates``).
        """
        digest = release_digest(release)
        with self._transaction() as con:
            if self._published(con, release_id, digest):
                return
            _insert(con, "published.release", _with_id(release.table, release_id))
            _insert(con, "published.counterfeit", _with_id(release.counterfeits, release_id))
            _insert(con, "private.hosting", _with_id(release.hosting, release_id))
            _write_states(con, "state_", release_id, release.state)
            self._record(con, release_id, digest, {
                "model": release.model, "params": _json(release.params), "attributes": list(release.attributes),
                "rows": len(release.table), "groups": release.groups, "counterfeits": release.counterfeit_count,
            }, checks, utility, verdicts)

    def publish_candidate(self, release_id: int, checks: dict[str, bool], utility: dict[str, float],
                          verdicts: pd.DataFrame | None = None) -> dict[str, Any]:
        """Publish the candidate staged for ``release_id`` (``stage_candidate``) as ``publish`` publishes a release,
        inside DuckDB: each part copied by ``INSERT ... SELECT`` from its ``private.candidate_*`` table (the
        table's columns as ``StoreReader.candidate`` reads them: ``release_columns``), its digest by
        ``candidate_digest`` (the value ``release_digest`` gives the candidate read back), its counts by SQL.
        Returns the manifest's ``model``, ``rows``, ``groups`` and ``counterfeits``.

        Idempotent, and refusing what ``publish`` refuses; StoreError when no candidate is staged for
        ``release_id``. Cost: the copies and one read of the candidate as Arrow for its digest (no pandas frame
        of its text: ``query_digest``).
        """
        with self._transaction() as con:
            meta = first_row(con, "SELECT model, params, attributes FROM private.candidate_meta "
                                  "WHERE release_id = ?", [release_id])
            if meta is None:
                raise StoreError(f"release {release_id}: no candidate staged; make the candidate first")
            model, params, attributes = meta
            columns = release_columns(self.spec, attributes)
            digest = candidate_digest(con, release_id, model, json.loads(params), attributes, columns)
            rows, groups = con.execute("SELECT count(*), count(DISTINCT group_id) FROM private.candidate_release "
                                       "WHERE release_id = ?", [release_id]).fetchone() or (0, 0)
            counterfeits = scalar(con, "SELECT coalesce(sum(count), 0) FROM private.candidate_counterfeit "
                                       "WHERE release_id = ?", [release_id])
            summary = {"model": model, "params": _json(json.loads(params)), "attributes": list(attributes), "rows": int(rows),
                       "groups": int(groups), "counterfeits": int(counterfeits)}
            if self._published(con, release_id, digest):
                return summary
            _copy(con, "published.release", "private.candidate_release", release_id, columns)
            _copy(con, "published.counterfeit", "private.candidate_counterfeit", release_id)
            _copy(con, "private.hosting", "private.candidate_hosting", release_id)
            for table in state_tables(con, "candidate_state_"):
                _copy_state(con, table.removeprefix("candidate_state_"), release_id)
            self._record(con, release_id, digest, summary, checks, utility, verdicts)
            return summary

    def _published(self, con: duckdb.DuckDBPyConnection, release_id: int, digest: str) -> bool:
        """Whether release ``release_id`` is published already with content ``digest`` (publishing it again does
        nothing); False when it may be published now. StoreError when it is published with other content, is
        not the next id, or its snapshot was never staged."""
        published = published_ids(con)
        if release_id in published:
            if scalar(con, "SELECT digest FROM private.digest WHERE release_id = ?", [release_id]) == digest:
                return True
            raise StoreError(f"release {release_id} is already published with different content; a published "
                             "release is never replaced")
        expected = (published[-1] if published else 0) + 1
        if release_id != expected:
            raise StoreError(f"release {release_id}: the next release to publish is {expected} "
                             f"(published: {ids_text(published)})")
        if not is_staged(con, release_id):
            raise StoreError(f"release {release_id}: no snapshot staged; stage the snapshot first")
        return False

    def _record(self, con: duckdb.DuckDBPyConnection, release_id: int, digest: str, summary: Mapping[str, Any],
                checks: dict[str, bool], utility: dict[str, float], verdicts: pd.DataFrame | None) -> None:
        """The rest of a publication once its rows are in: the new domain values, the model's state views, the
        digest, the manifest row (``summary``: model, params as JSON, attributes, rows, groups, counterfeits),
        the verdicts; then drop the earlier candidates."""
        bound = self._bound_spec(con, self._binding_columns(con, release_id))
        domain, sensitive = new_domain_rows(con, bound)
        _insert(con, "published.domain", domain)
        _insert(con, "private.sensitive_domain", sensitive)
        _create_state_views(con, bound)
        _insert(con, "private.digest", pd.DataFrame({"release_id": [release_id], "digest": [digest]}))
        manifest = pd.DataFrame({
            "release_id": [release_id],
            **{k: [summary[k]] for k in ("model", "params", "attributes", "rows", "groups", "counterfeits")},
            "created_at": [datetime.now(UTC).replace(tzinfo=None)],
            "checks": [_json({k: bool(v) for k, v in checks.items()})],
            "utility": [_json({k: _finite(v) for k, v in utility.items()})],
        })
        _insert(con, "published.manifest", manifest)
        if verdicts is not None and len(verdicts):
            _insert(con, "published.verdict", _with_id(verdicts, release_id))
        _drop_published_candidates(con, release_id)

    def save_candidate_sets(self, sets: dict[int, np.ndarray]) -> None:
        """Keep the judge's candidate sensitive sets (``History.candidate_sets``) of releases that are staged or
        published, so that the next history reads them instead of recomputing them; a later ``stage_candidate``
        or ``discard`` of a release drops its sets and those of every later release."""
        rows = pd.DataFrame([
            {"release_id": j, "n_rows": css.shape[0], "n_values": css.shape[1],
             "css": np.packbits(css, axis=None).tobytes()}
            for j, css in sorted(sets.items())
        ])
        if not len(rows):
            return
        with self._transaction() as con:
            staged = set(staged_ids(con)) | set(published_ids(con))
            rows = rows[rows["release_id"].isin(staged)]
            con.execute("DELETE FROM private.candidate_set WHERE release_id IN (SELECT unnest(?))",
                        [rows["release_id"].tolist()])
            _insert(con, "private.candidate_set", rows)

    def save_judge_memo(self, memo: Mapping[tuple[str, int], pd.DataFrame]) -> None:
        """Keep the judge's memo (``History.memo``: (name, release id) -> frame) of releases that are staged or
        published, in ``private.judge_memo`` (one blob per release and name, ``memo_blob``); an entry replaces the
        one of its release and name, and drops that name's entries older than its predecessor's (judging release
        j+1 reads those of release j only). A later ``stage_candidate`` or ``discard`` of a release drops its
        entries and those of every later release. Cost: the size of the entries (a zstd pass over their Arrow
        buffers, ``memo_blob``), one delete for all of them, then an insert
        per entry, each blob made just before it is inserted: one entry's Arrow table and blob exist at a time, not
        every entry's (the step raised a 10M-row release 2 by 3.3 GB when they were all made first).

        An entry kept by append (``history.ARCHIVED``) is stored as its schema alone (a marker, no rows) and its
        units not kept yet are appended to ``private.judge_archive_<name>`` (``_archive``), where they stay until a
        discard drops them with their release. The memory Arrow's pool held for an entry is given back to the
        system once it is inserted (``connection.release_arrow_memory``)."""
        if not memo:
            return
        keys = sorted(memo)
        entries = pd.DataFrame({"release_id": np.array([j for _, j in keys], dtype=np.int64),
                                "name": [name for name, _ in keys]})
        with self._transaction() as con:
            con.execute(_JUDGE_MEMO_DDL)
            entries = entries[entries["release_id"].isin(set(staged_ids(con)) | set(published_ids(con)))]
            if not len(entries):
                return
            latest = entries.groupby("name")["release_id"].transform("max")
            entries = entries[entries["release_id"] >= latest - 1]  # what one save per entry, in order, keeps
            for name, j in zip(entries["name"], entries["release_id"], strict=True):
                if name in ARCHIVED:
                    _archive(con, name, unit_columns(name, self.spec.id), int(j), memo[(name, j)])
            with registered(con, entries[["release_id", "name"]]) as frame:
                con.execute(f"DELETE FROM private.judge_memo AS m USING {frame} AS n WHERE m.name = n.name "
                            "AND (m.release_id = n.release_id OR m.release_id < n.release_id - 1)")
            for name, j in zip(entries["name"], entries["release_id"], strict=True):  # one blob in memory at a time
                blob = memo_blob(memo[(name, j)].iloc[:0] if name in ARCHIVED else memo[(name, j)])
                con.execute("INSERT INTO private.judge_memo (release_id, name, frame) VALUES (?, ?, ?)",
                            [int(j), name, blob])
                del blob
                release_arrow_memory()  # the entry's Arrow table, serialised and freed


#: How memo blobs are compressed (``memo_blob``): zstd at level 1, a third to a half of LZ4's size on the judge's
#: entries (ids, codes, bitset words) for two to three times its CPU.
_MEMO_CODEC = pa.Codec("zstd", 1)


def memo_blob(frame: pd.DataFrame) -> memoryview:
    """One entry of the judge's memo as stored in ``private.judge_memo.frame``.

    Args:
        frame: the memo entry (its index is not kept).

    Returns:
        The frame as an Arrow IPC stream (``pa.Table.from_pandas`` without the index, so with pandas' own schema
        metadata: dtypes come back as they went in), its buffers compressed by zstd (level 1), as a view of
        Arrow's buffer (DuckDB takes it as a BLOB parameter: no copy of the blob into Python bytes).
        ``read.memo_frame`` reads it back, and also reads the LZ4 streams and the Parquet blobs of stores written
        by earlier versions (an IPC stream names its codec).

    Cost: O(size of the frame), no Python work per row (``_MEMO_CODEC``; DuckDB copies a blob about four times
    as it inserts it, so its size is memory in the save). A categorical column keeps only the categories its rows
    use (``_used_categories``): an entry with an id column of the window's categories would otherwise carry every
    id of the window in its dictionary, however few rows it has (the forward, cross and backward attacks'
    empty entries: 1.1M ids each at 1M rows).
    """
    table = pa.Table.from_pandas(_used_categories(frame), preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=_MEMO_CODEC)) as writer:
        writer.write_table(table)
    return memoryview(sink.getvalue())


def _used_categories(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each categorical column cut to the categories its rows use (the same values, the same dtype
    kind; the categories keep their order); the frame itself when it has no categorical. O(rows + categories) a
    categorical column."""
    cut = {name: column.cat.remove_unused_categories() for name, column in frame.items()
           if isinstance(column.dtype, pd.CategoricalDtype)}
    return frame.assign(**cut) if cut else frame


#: The judge's memo (``StoreWriter.save_judge_memo``), created on its first save.
_JUDGE_MEMO_DDL = ("CREATE TABLE IF NOT EXISTS private.judge_memo (release_id BIGINT NOT NULL, name VARCHAR NOT NULL, "
                   "frame BLOB NOT NULL)")


def _drop_judge_memo(con: duckdb.DuckDBPyConnection, release_id: int) -> None:
    """Delete the judge's memo of ``release_id`` and every later release, and the units they archived (nothing
    when it was never saved)."""
    if table_exists(con, "private", "judge_memo"):
        con.execute("DELETE FROM private.judge_memo WHERE release_id >= ?", [release_id])
    for table in state_tables(con, ARCHIVE_PREFIX):
        con.execute(f"DELETE FROM private.{table} WHERE archived_at >= ?", [release_id])


def archive_table(name: str) -> str:
    """The table (in ``private``) that keeps the units of the archived memo entry ``name`` (``ARCHIVED``)."""
    return ARCHIVE_PREFIX + re.sub(r"\W", "_", name)


def _archive(con: duckdb.DuckDBPyConnection, name: str, units: tuple[str, ...], release_id: int,
             frame: pd.DataFrame) -> None:
    """Append to ``archive_table(name)`` the rows of ``frame`` (the memo entry ``(name, release_id)``) whose unit
    (its ``units`` columns, ``history.unit_columns``) is not kept yet, with ``archived_at`` (the release) and ``seq`` (their order in the entry),
    creating the table on first use and adding a column an entry brings later (the units kept before hold null
    there). Column types come from the store's contract (``_contract_types``), never from what DuckDB infers of a
    frame: a categorical would become an ENUM of the values seen so far (a later id fails to convert), an empty
    object column DuckDB's NULL type. A unit's rows never change, so a unit kept once stays as it is (a unit the
    store gave back and the fold recorded again is not doubled). Cost: O(rows of the entry) plus DuckDB's
    anti-join against the kept units (a hash join over two integer columns).

    Raises:
        StoreError: naming the table when DuckDB refuses the rows (the message holds no stored value).
    """
    table = f"private.{archive_table(name)}"
    rows = frame.assign(archived_at=np.int64(release_id), seq=np.arange(len(frame), dtype=np.int64))
    types = _contract_types(con, rows)
    try:
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} "
                    f"({', '.join(f'{quote(c)} {kind}' for c, kind in types.items())})")
        kept = {column for column, *_ in con.execute(f"DESCRIBE {table}").fetchall()}
        for column, kind in types.items():
            if column not in kept:  # e.g. a value new to the sensitive domain: earlier units read it as null
                con.execute(f"ALTER TABLE {table} ADD COLUMN {quote(column)} {kind}")
        if not len(rows):
            return
        same = " AND ".join(f"k.{quote(c)} = f.{quote(c)}" for c in units)
        with registered(con, rows) as given:
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {given} AS f "
                        f"WHERE NOT EXISTS (SELECT 1 FROM {table} AS k WHERE {same})")
    except duckdb.Error as exc:
        raise StoreError(refused_rows(table, "archive the judge's", rows, exc)) from exc


def _contract_types(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> dict[str, str]:
    """The SQL type of each column of ``frame`` as the store's contract has it: the type recorded in
    ``private.columns`` for the id and the sensitive column (a judge's memo or a model's state carries them
    under their own names; other columns of such frames hold codes or weights), else ``sql_type`` of the column
    (categoricals as their categories' type, object columns as VARCHAR). O(columns)."""
    recorded = dict(con.execute("SELECT column_name, sql_type FROM private.columns "
                                "WHERE \"role\" IN ('id', 'sensitive')").fetchall())
    return {c: recorded.get(c) or sql_type(frame[c]) for c in frame.columns}


def _drop_staged(con: duckdb.DuckDBPyConnection, release_id: int) -> None:
    """Delete what is staged for ``release_id`` and every later release: snapshots, candidates, the frames kept
    with them, the judge's kept candidate sets and memo. The caller makes sure none of them is published."""
    tables = ["snapshot", "candidate_release", "candidate_counterfeit", "candidate_hosting", "candidate_meta",
              "candidate_set"]
    for table in tables + state_tables(con, "candidate_state_"):
        if table_exists(con, "private", table):
            con.execute(f"DELETE FROM private.{table} WHERE release_id >= ?", [release_id])
    _drop_judge_memo(con, release_id)


def _drop_published_candidates(con: duckdb.DuckDBPyConnection, release_id: int) -> None:
    """Delete the staged candidates (``private.candidate_*``, their kept frames included) of the releases before
    ``release_id``, which is being published: each was published in its turn, and nothing reads a candidate
    after its release (the candidate of ``release_id`` itself is kept, for a publication run again). So the
    candidate tables hold one or two releases however long the history, where they held every release's
    candidate (``private.candidate_release`` as big as ``published.release``); DuckDB's checkpoint drops the
    emptied row groups without re-writing anything. Cost: one delete per table, of one release's rows."""
    tables = ["candidate_release", "candidate_counterfeit", "candidate_hosting", "candidate_meta"]
    for table in tables + state_tables(con, "candidate_state_"):
        con.execute(f"DELETE FROM private.{table} WHERE release_id < ?", [release_id])


def _forget_columns(con: duckdb.DuckDBPyConnection) -> None:
    """Forget the column types recorded from a snapshot that was never published, and drop the (empty) tables
    created from them, so the next snapshot records its own (``StoreWriter._record_columns``). Only while
    nothing is staged or published."""
    for table in ("private.snapshot", "private.hosting", "private.candidate_hosting", "published.release",
                  "private.candidate_release"):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    con.execute("DELETE FROM private.columns")


def _copy(con: duckdb.DuckDBPyConnection, target: str, source: str, release_id: int,
          columns: Sequence[str] | None = None) -> None:
    """``INSERT INTO target BY NAME`` the rows of ``release_id`` in ``source`` (its ``columns`` and release_id;
    every column when None), in stored order, inside DuckDB. StoreError naming both tables when DuckDB refuses
    them (never DuckDB's text, which may quote a value)."""
    what = "release_id, " + ", ".join(quote(c) for c in columns) if columns else "*"
    try:
        con.execute(f"INSERT INTO {target} BY NAME SELECT {what} FROM {source} WHERE release_id = ?", [release_id])
    except duckdb.Error as exc:
        raise StoreError(f"{target}: cannot copy release {release_id} from {source}: DuckDB refused the rows "
                         f"({type(exc).__name__})") from exc


def _copy_state(con: duckdb.DuckDBPyConnection, name: str, release_id: int) -> None:
    """``_write_states`` of the staged state ``name`` of ``release_id`` into ``private.state_<name>``, inside
    DuckDB: the table created with the staged table's columns and types, the release's earlier rows replaced.
    Nothing when the release keeps no rows under ``name``."""
    source = f"private.candidate_state_{name}"
    if not scalar(con, f"SELECT count(*) FROM {source} WHERE release_id = ?", [release_id]):
        return
    kinds = [(c, t) for c, t, *_ in con.execute(f"DESCRIBE {source}").fetchall() if c != "release_id"]
    columns = ["release_id BIGINT NOT NULL"] + [f"{quote(c)} {t}" for c, t in kinds]
    con.execute(f"CREATE TABLE IF NOT EXISTS private.state_{name} ({', '.join(columns)})")
    con.execute(f"DELETE FROM private.state_{name} WHERE release_id = ?", [release_id])
    _copy(con, f"private.state_{name}", source, release_id)


def _insert(con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame) -> None:
    """``INSERT INTO table BY NAME`` the rows of ``frame`` (columns matched by name, never by position)."""
    if len(frame) == 0:
        return
    try:
        with registered(con, frame) as given:
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {given}")
    except duckdb.Error as exc:
        raise StoreError(refused_rows(table, "store the", frame, exc)) from exc


def refused_rows(table: str, what: str, frame: pd.DataFrame, exc: duckdb.Error) -> str:
    """The message for rows of ``frame`` that DuckDB refused to write to ``table`` (``exc``): the table, the count
    and the columns with their pandas types, never DuckDB's text, which quotes the values it refused (ids)."""
    columns = ", ".join(f"{c} ({frame[c].dtype})" for c in frame.columns)
    return (f"{table}: cannot {what} {len(frame)} row(s): DuckDB refused them ({type(exc).__name__}); their "
            f"columns: {columns}")


def _write_states(
    con: duckdb.DuckDBPyConnection, prefix: str, release_id: int, state: Mapping[str, pd.DataFrame]
) -> None:
    """Each state frame into ``private.<prefix><name>`` keyed by release_id (the table created from the first
    frame's dtypes), replacing the rows of ``release_id``."""
    for name, frame in state.items():
        if not _STATE_NAME.match(name):
            raise StoreError(f"model state {name!r}: a state name is lower-case letters, digits and underscores")
        types = _contract_types(con, frame)
        columns = ["release_id BIGINT NOT NULL"] + [f"{quote(c)} {kind}" for c, kind in types.items()]
        con.execute(f"CREATE TABLE IF NOT EXISTS private.{prefix}{name} ({', '.join(columns)})")
        con.execute(f"DELETE FROM private.{prefix}{name} WHERE release_id = ?", [release_id])
        _insert(con, f"private.{prefix}{name}", _with_id(frame, release_id))


def _create_state_views(con: duckdb.DuckDBPyConnection, spec: BoundSpec) -> None:
    """The views the spec's model declares over its published state (``Stage.views``), each created (or replaced)
    as ``private.<view>`` once ``private.state_<stage>`` exists (``schema.permutation_view_sql``). O(views)."""
    model = find(spec.model.name)
    for stage in model.stages if model is not None else ():
        if not table_exists(con, "private", f"state_{stage.name}"):
            continue
        for view, shape in stage.views.items():
            if not _STATE_NAME.match(view):
                raise StoreError(f"model view {view!r}: a view name is lower-case letters, digits and underscores")
            sql = permutation_view_sql(f"private.state_{stage.name}", shape.source(spec), spec)
            con.execute(f"CREATE OR REPLACE VIEW private.{view} AS {sql}")


def _with_id(frame: pd.DataFrame, release_id: int) -> pd.DataFrame:
    """``frame`` with ``release_id`` as its first column, sharing the columns of ``frame`` (a shallow copy: no
    copy of the data, no consolidation of its blocks: ``_insert`` only reads it). ValueError when ``frame`` has a
    ``release_id`` column already. O(rows) for the new column, O(columns) else: no text column is scanned (a
    frame built anew from the columns would have pandas scan every text column for nulls and dates)."""
    if "release_id" in frame.columns:
        raise ValueError("cannot insert release_id, already exists")
    out = frame.copy(deep=False)
    with warnings.catch_warnings():  # a wide frame of many blocks: fragmentation is harmless for a read
        warnings.simplefilter("ignore", pd.errors.PerformanceWarning)
        out.insert(0, "release_id", np.full(len(frame), release_id, dtype=np.int64))
    return out


def _json(value: Any) -> str:
    """JSON text with sorted keys; numpy scalars as plain numbers."""
    return json.dumps(value, sort_keys=True, default=lambda v: v.item() if isinstance(v, np.generic) else str(v))


def _finite(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
