"""The read side of the release store: published releases, the staged candidate, and what a model or the judge
may read of them.

A model reads what its descriptor says (``ModelDescriptor.reads``): nothing, release n-1 and its private side
(Xiao-Tao Lemma 4), or every published release as well (``previous``). The judge reads a ``History``: the
published tables, the private snapshots and hosting groups, and the models' private state, which only a model's
own ``judged`` view interprets; the store knows nothing of any model.
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..core.encoding import narrow_integers
from ..core.judge.history import ARCHIVED, History, unit_columns
from ..core.models.recorded import RECORDED
from ..core.release import PreviousRelease, Release
from ..core.spec import BoundSpec
from ..errors import StoreError
from .connection import (
    first_row,
    is_text,
    open_duckdb,
    query_frame,
    quote,
    registered,
    release_arrow_memory,
    release_rows,
    scalar,
    table_exists,
)
from .schema import (
    StoreSchema,
    ids_text,
    is_staged,
    published_ids,
    release_columns,
    snapshot_size,
    state_tables,
    stored_snapshot,
)
from .write import archive_table, frame_digest, query_digest

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from ..core.models.base import PreviousPart, Reads


def read_manifest(path: str | Path) -> pd.DataFrame:
    """``published.manifest`` of the store at ``path`` without its spec (read-only): see ``StoreReader.manifest``.
    StoreError when there is no store at ``path``."""
    con = open_duckdb(Path(path), read_only=True)
    try:
        if not table_exists(con, "published", "manifest"):
            raise StoreError(f"{path}: not a release store (no published.manifest table)")
        return _manifest(con)
    finally:
        con.close()


@dataclass(frozen=True)
class PublishedRelease:
    """What ``published`` says of one release (``read_published``): all a reader outside the publisher has.

    manifest:     ``published.manifest`` of releases 1..release_id (``read_manifest``'s columns), the history.
    verdicts:     the judge's verdicts on the release (``published.verdict``: name, kind, blocking, passed,
                  violations, summary as a mapping); empty for a release published before verdicts were kept.
    counterfeits: R(j): ``group_id, count`` per group with counterfeits (Xiao-Tao Def. 3).
    group_sizes:  ``size, groups``: how many groups have each number of published rows (counterfeits included, as
                  a reader counts them); a group is a ``group_id`` with its generalised values, so the rows of a
                  release without groups (``group_id`` null) group by their generalised values.
    """

    release_id: int
    manifest: pd.DataFrame
    verdicts: pd.DataFrame
    counterfeits: pd.DataFrame
    group_sizes: pd.DataFrame


def read_published(path: str | Path, release_id: int) -> PublishedRelease:
    """``PublishedRelease`` of release ``release_id`` of the store at ``path``, read from ``published`` only
    (read-only). StoreError when there is no store at ``path`` or the release is not published (naming the
    published ids). Cost: the manifest, and one aggregate over the release's rows."""
    con = open_duckdb(Path(path), read_only=True)
    try:
        if not table_exists(con, "published", "manifest"):
            raise StoreError(f"{path}: not a release store (no published.manifest table)")
        manifest = _manifest(con)
        published = [int(j) for j in manifest["release_id"]]
        if release_id not in published:
            raise StoreError(f"release {release_id} is not published in {path} (published: {ids_text(published)})")
        attributes = manifest.set_index("release_id").loc[release_id, "attributes"]
        verdicts = pd.DataFrame(columns=["name", "kind", "blocking", "passed", "violations", "summary"])
        if table_exists(con, "published", "verdict"):
            verdicts = query_frame(con, "SELECT * EXCLUDE (release_id) FROM published.verdict WHERE release_id = ?",
                                   [release_id])
            verdicts["summary"] = verdicts["summary"].map(json.loads)
        by = ", ".join(["group_id", *(quote(a) for a in attributes)])
        sizes = query_frame(con, (
            f"SELECT size, count(*) AS groups FROM (SELECT count(*) AS size FROM published.release "
            f"WHERE release_id = ? GROUP BY {by}) GROUP BY size ORDER BY size"), [release_id])
        counterfeits = release_rows(con, "published.counterfeit", release_id)
    finally:
        con.close()
    return PublishedRelease(release_id, manifest[manifest["release_id"] <= release_id].reset_index(drop=True),
                            verdicts, counterfeits, sizes)


class StoreReader(StoreSchema):
    """What can be read of a release store. Each call reads in one connection (``StoreConnection.connect``)."""

    def release_ids(self) -> list[int]:
        """The published release ids, ascending."""
        with self._open() as con:
            return published_ids(con)

    def snapshot(self, release_id: int, columns: list[str] | None = None) -> pd.DataFrame | None:
        """T(release_id) as staged (columns ``spec.columns``, or only ``columns``, in that order), or None when it
        was never staged. A scan of the snapshots; reading few columns costs a share of reading them all."""
        with self._open() as con:
            return stored_snapshot(con, release_id, columns)

    def bound_spec(self, snapshot: pd.DataFrame) -> BoundSpec:
        """The spec bound with the stored domains, then extended with ``snapshot``'s values.

        Leaf ranks of flat taxonomies and codes of the sensitive values are those of ``published.domain`` and
        ``private.sensitive_domain``; new values are appended (``Spec.bind``), so a rank never changes across
        releases. A written taxonomy or sensitive domain that changed since it was stored is schema drift.
        """
        with self._open() as con:
            return self._bound_spec(con, snapshot)

    def staged_bound_spec(self, release_id: int) -> BoundSpec:
        """``bound_spec`` of the staged T(release_id), read from the columns ``Spec.bind`` reads alone
        (``_binding_columns``: none when the spec writes every domain, as Census-KDD's does), not the whole
        snapshot. StoreError when T(release_id) was never staged. O(rows x those columns)."""
        with self._open() as con:
            if not is_staged(con, release_id):
                raise StoreError(f"release {release_id}: no snapshot staged; stage the snapshot first")
            return self._bound_spec(con, self._binding_columns(con, release_id))

    def holds_ids(self, release_id: int, frame: pd.DataFrame) -> bool:
        """Whether ``frame`` (a snapshot, validated or not) has as many rows as the staged T(release_id) and the
        same ids (``frame_digest`` of the id columns; the stored one read as Arrow, ``query_digest``). False
        when T(release_id) was never staged. Equal digests imply both (equal canonical frames have equal
        canonical columns), so False here already says "not the same rows": the answer for every release that
        inserts or deletes a tuple. Cost: a count; when it agrees, a read of one column and two digests of it."""
        with self._open() as con:
            if snapshot_size(con, release_id) != len(frame):
                return False
            stored = query_digest(con, f"SELECT {quote(self.spec.id)} FROM private.snapshot WHERE release_id = ?",
                                  [release_id])
        return frame_digest(frame[[self.spec.id]]) == stored

    def holds_snapshot(self, release_id: int, frame: pd.DataFrame, same_ids: bool = False) -> bool:
        """Whether the validated snapshot ``frame`` holds exactly the rows of the staged T(release_id), i.e. whether
        their ``frame_digest``s are equal (False when T(release_id) was never staged).

        The digests are compared only after the cheaper tests of ``holds_ids`` (the same count, the same ids),
        which equal digests imply; so a store whose snapshots carry no digest of their own is answered exactly as
        by comparing whole digests. ``same_ids``: the caller found ``holds_ids`` true for ``frame``'s ids
        already (``pipeline.unchanged``), so it is not asked again. Cost: ``holds_ids``; when the ids agree, the
        stored T(release_id) digested as DuckDB reads it (``query_digest``: Arrow, a Python string per distinct
        text) and ``frame`` digested.
        """
        if not same_ids and not self.holds_ids(release_id, frame):
            return False
        with self._open() as con:
            if not is_staged(con, release_id):
                return False
            stored = query_digest(con, "SELECT * EXCLUDE (release_id) FROM private.snapshot WHERE release_id = ?",
                                  [release_id])
        return frame_digest(frame) == stored

    def previous(
        self, release_id: int, reads: Reads = "previous", columns: Mapping[PreviousPart, Sequence[str]] | None = None,
        returning: bool = False,
    ) -> PreviousRelease | None:
        """What release ``release_id``'s model may read of the past, as its descriptor says (``reads``).

        ``"nothing"``: None. ``"previous"`` (Xiao-Tao Lemma 4): T(n-1), T*(n-1), R(n-1), the hosting groups and
        the model state of release n-1; reads one release, so its cost does not grow with n. ``"all"``: the same
        plus ``PreviousRelease.earlier``, every ``published.release`` row of releases 1..n-1 with its
        ``release_id`` (a scan of all published rows). None for release 1; StoreError when n-1 is not published
        or ``reads`` is none of the three.

        ``columns`` (``ModelDescriptor.previous_columns``): per part of the release (``snapshot``, ``table``,
        ``counterfeits``, ``hosting``) the only columns to read, in that order; a part it leaves out (or names no
        column of) is read whole. DuckDB stores columns apart, so the cost is that of the columns read: O(rows of
        release n-1 x columns read) (about 0.02 s of CPU for m-invariance's columns of 120k Census-KDD rows).

        ``returning``: also read ``PreviousRelease.returning`` and ``returning_groups`` (``_returning``), the last
        appearance of every tuple of the staged T(n) that T(n-1) does not hold but an earlier release published.
        """
        if reads not in ("nothing", "previous", "all"):
            raise StoreError(f"release {release_id}: a model reads 'nothing', 'previous' or 'all', not {reads!r}")
        if release_id < 1:
            raise StoreError(f"release {release_id}: release ids start at 1")
        if release_id == 1 or reads == "nothing":
            return None
        prior = release_id - 1
        with self._open() as con:
            published = published_ids(con)
            if prior not in published:
                raise StoreError(
                    f"release {release_id} needs its predecessor, release {prior}, published first "
                    f"(published: {ids_text(published)})"
                )
            attributes = scalar(con, "SELECT attributes FROM published.manifest WHERE release_id = ?", [prior])
            earlier = None
            if reads == "all":
                earlier = query_frame(con, "SELECT * FROM published.release WHERE release_id <= ?", [prior])
            narrow = columns or {}

            def part(name: PreviousPart, table: str, every: list[str] | None = None) -> pd.DataFrame:
                """The rows of release n-1 in ``table``: the columns ``narrow`` names for ``name``, else ``every``
                (all when None)."""
                chosen = narrow.get(name)
                return release_rows(con, table, prior, list(chosen) if chosen else every)

            return PreviousRelease(
                release_id=prior,
                snapshot=part("snapshot", "private.snapshot"),
                table=part("table", "published.release", release_columns(self.spec, attributes)),
                counterfeits=part("counterfeits", "published.counterfeit"),
                hosting=part("hosting", "private.hosting"),
                state=_states(con, "state_", prior),
                earlier=earlier,
                **(_returning(con, self.spec.id, self.spec.sensitive, release_id) if returning else {}),
            )

    def candidate(self, release_id: int) -> Release:
        """The candidate staged for ``release_id``, its state included (StoreError when there is none)."""
        with self._open() as con:
            meta = first_row(con, "SELECT model, params, attributes FROM private.candidate_meta WHERE release_id = ?",
                             [release_id])
            if meta is None:
                raise StoreError(f"release {release_id}: no candidate staged; make the candidate first")
            model, params, attributes = meta
            return Release(
                table=release_rows(con, "private.candidate_release", release_id, release_columns(self.spec, attributes)),
                hosting=release_rows(con, "private.candidate_hosting", release_id),
                counterfeits=release_rows(con, "private.candidate_counterfeit", release_id),
                model=model,
                params=json.loads(params),
                attributes=tuple(attributes),
                state=_states(con, "candidate_state_", release_id),
            )

    def candidate_measures(self, release_id: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """What the utility summary (``core.judge.utility.summarise``) reads of the candidate staged for
        ``release_id`` and of T(release_id), never a label: the candidate table's ``group_id``, the bounds of its
        released attributes and its sensitive column; its counterfeit counts; the snapshot's quasi-identifiers
        and sensitive column. Text comes as categoricals (``_coded_frame``: a code per cell, not a Python
        string; the integer bounds in the narrowest of int16 and int32 that holds them, ``_narrowed``: 10M rows,
        twelve leaf-rank bounds, 0.7 GB less than as int64). StoreError when no candidate is staged. O(rows x
        those columns)."""
        spec = self.spec
        with self._open() as con:
            attributes = scalar(con, "SELECT attributes FROM private.candidate_meta WHERE release_id = ?",
                                [release_id])
            if attributes is None:
                raise StoreError(f"release {release_id}: no candidate staged; make the candidate first")
            bounds = [c for a in attributes for c in (f"{a}__lo", f"{a}__hi")]
            table = ", ".join(quote(c) for c in ["group_id", *bounds, spec.sensitive])
            microdata = ", ".join(quote(c) for c in [*spec.quasi_identifiers, spec.sensitive])
            return (
                _coded_frame(con, [(f"SELECT {table} FROM private.candidate_release WHERE release_id = ?",
                                    [release_id])], narrow=bounds),
                release_rows(con, "private.candidate_counterfeit", release_id),
                _coded_frame(con, [(f"SELECT {microdata} FROM private.snapshot WHERE release_id = ?", [release_id])]),
            )

    def snapshot_changes(self, release_id: int, held: Mapping[int, pd.Series]) -> dict[str, int]:
        """``core.stream.changes`` of T(release_id - 1) and T(release_id) as staged, each less the ids ``held``
        gives for it (the tuples its release holds back), counted inside DuckDB: ``inserts`` (ids only in
        T(release_id)), ``deletes`` (ids only in T(release_id - 1); none for release 1) and ``updates`` (ids in
        both with another value in some column, two nulls equal). StoreError when T(release_id) was never staged.

        Each snapshot is read as its ids and one 64-bit hash of each row's other columns (DuckDB's ``hash``,
        under which two nulls, NaNs, or 0.0 and -0.0 hash alike, as ``IS NOT DISTINCT FROM`` equates them), and
        the two are joined by id: an update is an id whose hashes differ, so one whose two rows hash alike (a
        chance of 2^-64 a tuple) would be counted unchanged. Cost: one hash join of (id, hash) pairs, about 0.09
        GB at 1M rows (joining the rows whole held every column of both: 1.1 GB); the held-back ids by an anti
        join; nothing read into Python but three counts."""
        ident = quote(self.spec.id)
        others = [quote(n) for n in self.spec.columns if n != self.spec.id]
        row = f"hash({', '.join(f's.{c}' for c in others)})" if others else "0"
        kept = [pd.DataFrame({"release_id": np.int64(j), "id": ids.to_numpy()}) for j, ids in held.items() if len(ids)]

        def published(release: str, frame: str | None) -> str:
            """(id, row hash) of the tuples of T(``release``) its release publishes."""
            anti = (f" ANTI JOIN {frame} AS h ON h.release_id = s.release_id AND h.id = s.{ident}"
                    if frame else "")
            return f"SELECT s.{ident} AS id, {row} AS h FROM private.snapshot AS s{anti} WHERE s.release_id = {release}"

        with self._open() as con:
            if not is_staged(con, release_id):
                raise StoreError(f"release {release_id}: no snapshot staged; stage the snapshot first")
            with registered(con, pd.concat(kept, ignore_index=True)) if kept else contextlib.nullcontext() as frame:
                counts = first_row(con, (
                    f"WITH c AS ({published('$now', frame)}), p AS ({published('$before', frame)}) "
                    "SELECT count(*) FILTER (WHERE p.id IS NULL), count(*) FILTER (WHERE c.id IS NULL), "
                    "count(*) FILTER (WHERE c.id IS NOT NULL AND p.id IS NOT NULL AND c.h <> p.h) "
                    "FROM c FULL OUTER JOIN p ON c.id = p.id"), {"now": release_id, "before": release_id - 1})
        inserts, deletes, updates = counts or (0, 0, 0)
        return {"inserts": int(inserts), "deletes": int(deletes), "updates": int(updates)}

    def staged_state(self, release_id: int) -> dict[str, pd.DataFrame]:
        """The private frames kept with the staged release ``release_id`` (``StoreWriter.stage_state``, and the
        staged candidate's ``Release.state``), by name, without release_id; a name with no rows for the release is
        left out. One scan per ``private.candidate_state_<name>`` table."""
        with self._open() as con:
            return _states(con, "candidate_state_", release_id)

    def state(self, release_id: int, name: str) -> pd.DataFrame | None:
        """The private state frame ``name`` of release ``release_id`` (``Release.state``), without release_id: the
        published one, else the one staged with its candidate; None when neither has rows. A scan of one or two
        tables, whatever else the release keeps."""
        with self._open() as con:
            for prefix in ("state_", "candidate_state_"):
                if table_exists(con, "private", prefix + name):
                    frame = release_rows(con, f"private.{prefix}{name}", release_id)
                    if len(frame):
                        return frame
        return None

    def history(self, upto: int | None = None, candidate: int | None = None, since: int = 1) -> History:
        """Published releases 1..``upto`` (default: all) with their snapshots, hosting groups and model state; with
        ``candidate=i`` (then ``upto`` defaults to i-1 and must be i-1), the staged candidate appended as release
        i. This is what the judge reads before publication. The spec is bound to the last snapshot.

        ``History.states``: for each state name, the rows of ``private.state_<name>`` of releases 1..upto, then
        (with a candidate) those of ``private.candidate_state_<name>`` of release i, with ``release_id``; a name
        with no such rows is left out. Snapshots are as staged: what a model's state changes about them is the
        model's ``judged`` view. The published rows, R(j), the snapshots and the hosting groups are read with
        their text columns as categoricals (``_rows_upto``), the hosting groups' ids with the snapshots'
        categories (``_sharing_ids``), the published rows' integer bounds (``A__lo``, ``A__hi``: leaf ranks)
        in the narrowest of int16 and int32 that holds them (``_narrowed``; 1M rows, release 2: the window's
        twelve leaf-rank bounds of 2.0M rows, 0.19 GB as int64, 0.05 GB as int16). ``History.memo``: the judge's
        memo of release ``last - 1``, each id that the snapshots hold the same Python string as theirs
        (``_vocabulary``). So the window holds one string per person, not one per frame (1M rows, release 2: four
        copies of 1.1M ids, about 60 MB each, were). The memory Arrow's pool held for the reading is given back to
        the system when it ends (``release_arrow_memory``): the frames are the window's memory, not the batches
        they were read from.

        ``since``: the first release whose rows are read (``History.first``); 1 reads every published row (cost
        linear in the history's size), ``last - 1`` a window of two releases (cost independent of the history's
        length), which is what the judge reads before publication. The state of recorded releases (``RECORDED``,
        a row per published attribute) is always read whole: the judge discounts what they disclosed.
        """
        with self._open() as con:
            published = published_ids(con)
            if candidate is not None:
                upto = candidate - 1 if upto is None else upto
                if candidate != upto + 1:
                    raise StoreError(f"history: candidate {candidate} must follow release {upto}")
                if first_row(con, "SELECT 1 FROM private.candidate_meta WHERE release_id = ?", [candidate]) is None:
                    raise StoreError(f"release {candidate}: no candidate staged; make the candidate first")
            elif upto is None:
                upto = published[-1] if published else 0
            missing = sorted(set(range(1, upto + 1)) - set(published))
            if missing:
                raise StoreError(f"history up to release {upto}: release(s) {missing} are not published "
                                 f"(published: {ids_text(published)})")
            if upto == 0 and candidate is None:
                raise StoreError(f"{self.path}: no release has been published yet")
            last = upto if candidate is None else candidate
            since = max(1, min(since, last))

            def read(published_table: str, candidate_table: str, narrow: Collection[str] = ()) -> pd.DataFrame:
                """Rows of releases since..upto, then the candidate's (tables are in insertion = release order)."""
                return _rows_upto(con, published_table, since, upto,
                                  candidate_table if candidate is not None else None, candidate, narrow=narrow)

            states = {}
            stored = set(state_tables(con, "state_"))
            staged = set(state_tables(con, "candidate_state_")) if candidate is not None else set()
            for name in sorted({t.removeprefix("state_") for t in stored}
                               | {t.removeprefix("candidate_state_") for t in staged}):
                frame = _rows_upto(con, f"private.state_{name}" if f"state_{name}" in stored else None,
                                   1 if name == RECORDED else since, upto,
                                   f"private.candidate_state_{name}" if f"candidate_state_{name}" in staged else None,
                                   candidate)
                if len(frame):
                    states[name] = frame

            snapshots = _rows_upto(con, "private.snapshot", since, last, None, None)
            bounds = [f"{name}__{side}" for name in self.spec.quasi_identifiers for side in ("lo", "hi")]
            hosting = _sharing_ids(read("private.hosting", "private.candidate_hosting"), snapshots, self.spec.id)
            history = History(
                spec=self._bound_spec(con, self._binding_columns(con, last)),
                releases=read("published.release", "private.candidate_release", bounds),
                counterfeits=read("published.counterfeit", "private.candidate_counterfeit"),
                snapshots=snapshots,
                hosting=hosting,
                candidate_sets=_candidate_sets(con, last),
                memo=_judge_memo(con, last - 1, self.spec.id,
                                 "private.candidate_hosting" if candidate is not None else "private.hosting",
                                 _vocabulary(snapshots, self.spec.id)),
                states=states,
                first=since,
            )
        release_arrow_memory()  # the Arrow batches of the window, converted and freed: numpy's frames come next
        return history

    def published_columns(self) -> list[tuple[str, str]]:
        """``(name, DuckDB type)`` of every column of ``published.release``, in table order (the catalogue, no
        row read)."""
        sql = ("SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'published' "
               "AND table_name = 'release' ORDER BY ordinal_position")
        with self._open() as con:
            return [(str(name), str(kind)) for name, kind in con.execute(sql).fetchall()]

    def manifest(self) -> pd.DataFrame:
        """``published.manifest``, one row per release: release_id, model, params (dict), attributes (list),
        created_at (UTC), rows, groups, counterfeits, checks (dict name -> passed), utility (dict name -> value)."""
        with self._open() as con:
            return _manifest(con)


def _rows_upto(
    con: duckdb.DuckDBPyConnection, table: str | None, since: int, upto: int, candidate_table: str | None,
    candidate: int | None, coded: bool | None = None, narrow: Collection[str] = (),
) -> pd.DataFrame:
    """The rows of releases ``since``..``upto`` in ``table``, then those of release ``candidate`` in
    ``candidate_table``, with release_id (tables are in insertion = release order); a None table contributes
    nothing. The parts are joined as Arrow tables and converted once (``pd.concat`` of frames with all-null text
    columns cost 70% of reading a 2 x 100k-row window).

    ``coded`` (default: every table but the models' state tables, ``private.state_*`` and
    ``private.candidate_state_*``, which only a model's ``judged`` view reads): the text columns come back as
    pandas categoricals whose categories are the distinct values in sorted order (``_coded_frame``), so that
    they sort, group and compare as the text does, a null stays a null, and a cell costs a code of one or two
    bytes instead of an 8-byte pointer and Python string (the judge's window of a 1M-row release holds 9 text
    columns of 2M rows); the batches are converted one at a time, so DuckDB's Arrow result of the whole window
    never exists beside the frame. Parts whose columns differ are read as plain text. ``narrow``: the integer
    columns of these names come back as the narrowest of int16 and int32 that holds them (``_narrowed``).
    O(rows x columns); coded, the plain text of one batch (``_BATCH_ROWS``) at a time."""
    if coded is None:
        coded = not any(t is not None and t.startswith(("private.state_", "private.candidate_state_"))
                        for t in (table, candidate_table))
    queries = []
    if table is not None:
        queries.append((f"SELECT * FROM {table} WHERE release_id BETWEEN ? AND ?", [since, upto]))
    if candidate_table is not None:
        queries.append((f"SELECT * FROM {candidate_table} WHERE release_id = ?", [candidate]))
    if not queries:
        return pd.DataFrame()
    if coded and len({tuple(con.sql(sql, params=params).columns) for sql, params in queries}) == 1:
        return _coded_frame(con, queries, narrow)
    parts = [con.sql(sql, params=params).to_arrow_table() for sql, params in queries]
    filled = [p for p in parts if p.num_rows] or parts[:1]
    frame = pa.concat_tables(filled, promote_options="permissive").to_pandas()
    for name in narrow:
        if name in frame.columns:
            frame[name] = _narrowed(frame[name])
    return frame


def _narrowed(column: pd.Series) -> pd.Series:
    """``column`` as ``encoding.narrow_integers`` gives it when it is a numpy integer column wider than two bytes,
    else itself (floats, pandas' nullable integers). The values are the same: what reads them as numbers, compares
    or sorts them sees no difference (the judge's readers of bounds widen to float64); a cell costs 2 or 4 bytes
    instead of 8. O(rows)."""
    if not isinstance(column.dtype, np.dtype) or column.dtype.kind not in "iu" or column.dtype.itemsize <= 2 \
            or not len(column):
        return column
    values = narrow_integers(column.to_numpy())
    if values.dtype.itemsize >= column.dtype.itemsize:
        return column
    return pd.Series(values, index=column.index, name=column.name)


#: Rows per Arrow batch of a coded read (``_coded_frame``): the plain text of one batch exists at a time.
_BATCH_ROWS = 1 << 17


class _TextCodes:
    """One text column read batch by batch as batch-local dictionary codes, ended as a pandas categorical with
    sorted categories (``frame``). All in Arrow and numpy: a hash per cell, no Python work per value (the
    batches' dictionaries are kept as Arrow text, not as Python strings)."""

    def __init__(self) -> None:
        self.words: list[pa.Array] = []
        self.parts: list[np.ndarray] = []

    def add(self, column: pa.Array) -> None:
        """Append one batch's column: its dictionary encoding (a hash per cell), the codes with -1 for a null."""
        encoded = pc.dictionary_encode(column.cast(pa.string()) if pa.types.is_string_view(column.type) else column)
        self.words.append(encoded.dictionary)
        self.parts.append(pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int32, copy=False))

    def frame(self) -> pd.Categorical:
        """The column as a categorical whose categories are its distinct values sorted as Python sorts text
        (code points: UTF-8's byte order, in which Arrow sorts), so that the codes order as the text does; a null
        is code -1. The batches' dictionaries are encoded once more into one vocabulary, and each batch's codes
        mapped through it. Frees the parts. O(cells + distinct values x log)."""
        starts = np.cumsum([0, *(len(w) for w in self.words[:-1])])  # where each batch's words begin
        vocabulary = pc.dictionary_encode(pa.concat_arrays(self.words))
        self.words = []
        order = pc.array_sort_indices(vocabulary.dictionary).to_numpy()
        rank = np.empty(len(order), dtype=np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        ranked = np.append(rank[vocabulary.indices.to_numpy()], np.int32(-1))  # batch words in turn -> rank; -1
        codes = np.concatenate([ranked[np.where(part >= 0, part + start, -1)]
                                for part, start in zip(self.parts, starts, strict=True)])
        self.parts = []
        categories = vocabulary.dictionary.take(pa.array(order)).to_numpy(zero_copy_only=False)
        return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object), validate=False)


def _coded_frame(con: duckdb.DuckDBPyConnection, queries: list[tuple[str, list]],
                 narrow: Collection[str] = ()) -> pd.DataFrame:
    """The results of ``queries`` (``(sql, params)`` with the same columns), one after the other, as one frame,
    read in Arrow batches of ``_BATCH_ROWS`` rows: text columns as categoricals
    with sorted categories (``_TextCodes``), the others as ``Table.to_pandas`` gives them per batch, joined
    column by column, the integer columns named in ``narrow`` narrowed once joined (``_narrowed``). Each batch is
    converted and released before the next is read: DuckDB's Arrow batches hold one allocation for all their
    columns, so keeping any column of a batch would keep all its text alive. O(rows x columns); memory: the frame,
    one batch, and one column's parts while it is joined."""
    text: dict[str, _TextCodes] = {}
    others: dict[str, list[pd.Series]] = {}
    schema = None
    rows = 0
    for sql, params in queries:
        reader = con.sql(sql, params=params).to_arrow_reader(_BATCH_ROWS)
        if schema is None:
            schema = reader.schema
            text = {f.name: _TextCodes() for f in schema if is_text(f.type)}
            others = {f.name: [] for f in schema if f.name not in text}
        for batch in reader:
            rows += batch.num_rows
            for name, codes in text.items():
                codes.add(batch.column(name))
            if others:
                converted = pa.Table.from_batches([batch.select(list(others))]).to_pandas()
                for name in others:
                    others[name].append(converted[name])
            del batch
        del reader
    assert schema is not None
    if not rows:
        empty = schema.empty_table().to_pandas()
        return empty.astype({name: "category" for name in text})
    columns = {}
    for field in schema:
        if field.name in text:
            columns[field.name] = text[field.name].frame()
        else:
            parts = others.pop(field.name)
            joined = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
            del parts
            columns[field.name] = _narrowed(joined) if field.name in narrow else joined
            del joined
    return pd.DataFrame(columns, copy=False)


def _states(con: duckdb.DuckDBPyConnection, prefix: str, release_id: int) -> dict[str, pd.DataFrame]:
    """The state frames of ``release_id`` stored under ``prefix``, without release_id (a name with no rows for it
    is left out)."""
    out = {}
    for table in state_tables(con, prefix):
        frame = release_rows(con, f"private.{table}", release_id)
        if len(frame):
            out[table.removeprefix(prefix)] = frame
    return out


def _candidate_sets(con: duckdb.DuckDBPyConnection, upto: int) -> dict[int, np.ndarray]:
    """The kept candidate sensitive sets of releases ``upto - 1`` and ``upto`` (``StoreWriter.save_candidate_sets``):
    the attacks read earlier releases through the judge's memo (``History.memo``), and recompute a set they lack."""
    if not table_exists(con, "private", "candidate_set"):
        return {}
    rows = con.execute("SELECT release_id, n_rows, n_values, css FROM private.candidate_set "
                       "WHERE release_id BETWEEN ? AND ?", [upto - 1, upto]).fetchall()
    return {
        int(j): np.unpackbits(np.frombuffer(blob, dtype=np.uint8), count=n * v).astype(bool).reshape(n, v)
        for j, n, v, blob in rows
    }


def _returning(con: duckdb.DuckDBPyConnection, ident: str, sensitive: str, release_id: int) -> dict[str, pd.DataFrame]:
    """``PreviousRelease.returning`` and ``returning_groups`` of ``release_id``: each tuple of its staged snapshot
    that is not hosted in release n-1 but was hosted earlier, with its last release, hosting group and sensitive
    value then, and the published rows of those groups. Cost: a semi-join of the hosting table (every release's
    rows) with the ids of the new tuples, then reads of the few groups found; nothing per row in Python."""
    key, value = quote(ident), quote(sensitive)
    returning = query_frame(con, (
        f"WITH arrived AS (SELECT {key} FROM private.snapshot WHERE release_id = $1 "
        f"EXCEPT SELECT {key} FROM private.hosting WHERE release_id = $1 - 1), "
        f"last AS (SELECT {key}, max(release_id) AS release_id FROM private.hosting "
        f"WHERE release_id < $1 - 1 AND {key} IN (SELECT {key} FROM arrived) GROUP BY {key}) "
        f"SELECT l.{key}, l.release_id, h.group_id, s.{value} FROM last AS l "
        f"JOIN private.hosting AS h ON h.release_id = l.release_id AND h.{key} = l.{key} "
        f"JOIN private.snapshot AS s ON s.release_id = l.release_id AND s.{key} = l.{key} "
        f"ORDER BY l.release_id, h.group_id, l.{key}"), [release_id])
    con.register("returning_hosts", returning[["release_id", "group_id"]].drop_duplicates())
    try:
        groups = query_frame(con, (
            f"SELECT r.release_id, r.group_id, r.{value} FROM published.release AS r "
            "SEMI JOIN returning_hosts AS g ON r.release_id = g.release_id AND r.group_id = g.group_id "
            "ORDER BY r.release_id, r.group_id"))
    finally:
        con.unregister("returning_hosts")
    return {"returning": returning, "returning_groups": groups}


def _sharing_ids(hosting: pd.DataFrame, snapshots: pd.DataFrame, ident: str) -> pd.DataFrame:
    """``hosting`` with its id column recoded to the categories of ``snapshots``' (the same ``pd.Index``, so one
    Python string per id for both frames) when they hold all of its own, as the store's invariants say (every
    hosted tuple is a row of its release's snapshot); ``hosting`` as it is otherwise, or when either id column is
    not a categorical. The codes still order as the text does (both category lists are sorted). O(categories)
    look-ups (a hash table of the snapshots' categories while it runs), then O(rows) to recode."""
    theirs, ours = snapshots.get(ident), hosting.get(ident)
    if theirs is None or ours is None or not (isinstance(theirs.dtype, pd.CategoricalDtype)
                                              and isinstance(ours.dtype, pd.CategoricalDtype)):
        return hosting
    if not ours.cat.categories.isin(theirs.cat.categories).all():
        return hosting
    codes = theirs.cat.categories.get_indexer(ours.cat.categories)[ours.cat.codes.to_numpy()]
    hosting[ident] = pd.Categorical.from_codes(codes, dtype=theirs.dtype, validate=False)
    return hosting


def _vocabulary(snapshots: pd.DataFrame, ident: str) -> tuple[pa.Array, np.ndarray] | None:
    """The window's ids as ``_interned`` looks them up: their texts as Arrow strings and the Python strings of
    ``snapshots``' id categories in the same order; None when the id is not a text categorical. O(ids)."""
    column = snapshots.get(ident)
    if column is None or not isinstance(column.dtype, pd.CategoricalDtype):
        return None
    objects = column.cat.categories.to_numpy(dtype=object)
    return pa.array(objects, type=pa.string()), objects


def _interned(column: pa.ChunkedArray, vocabulary: tuple[pa.Array, np.ndarray]) -> np.ndarray:
    """``column`` (text) as an object array whose cells found in ``vocabulary`` (``_vocabulary``) are its Python
    strings, not new ones: a memo entry of 1M ids then adds 8 MB of pointers, not 60 MB of strings. The cells not
    found (people the window's snapshots do not hold, nulls) are converted as Arrow converts them. O(rows) hash
    look-ups (``pc.index_in``)."""
    words, objects = vocabulary
    found = pc.index_in(column, value_set=words)
    out = np.empty(len(column), dtype=object)
    known = np.asarray(found.is_valid())
    out[known] = objects[np.asarray(found.drop_null(), dtype=np.intp)]
    if not known.all():
        out[~known] = column.filter(pa.array(~known)).to_numpy(zero_copy_only=False)
    return out


def _judge_memo(con: duckdb.DuckDBPyConnection, release_id: int, ident: str, hosting: str,
                vocabulary: tuple[pa.Array, np.ndarray] | None = None) -> dict[tuple[str, int], pd.DataFrame]:
    """The judge's memo of release ``release_id`` (``StoreWriter.save_judge_memo``): what judging the next release
    (whose hosting rows are in the table ``hosting``) folds its own release into. Empty when none was saved. An
    entry kept by append (``ARCHIVED``) is read from its table, for the units of the persons of the next release
    who are not in release ``release_id`` only (``_archived``). A text id column (``ident``) of an entry is read
    with the Python strings of ``vocabulary`` where it holds them (``memo_frame``)."""
    if not table_exists(con, "private", "judge_memo"):
        return {}
    rows = con.execute("SELECT name, frame FROM private.judge_memo WHERE release_id = ?", [release_id]).fetchall()
    shared = {ident: vocabulary} if vocabulary is not None else None
    memo = {(name, release_id): memo_frame(blob, shared) for name, blob in rows}
    for name in ARCHIVED:
        if (name, release_id) in memo:
            memo[(name, release_id)] = _archived(con, name, release_id, ident, hosting, memo[(name, release_id)])
    return memo


def _archived(con: duckdb.DuckDBPyConnection, name: str, release_id: int, ident: str, hosting: str,
              marker: pd.DataFrame) -> pd.DataFrame:
    """The rows of the archived memo entry ``(name, release_id)`` (``ARCHIVED``, ``write.archive_table``) that the
    next release needs: every unit kept by release ``release_id`` with a person of the next release (``hosting``,
    its rows at ``release_id + 1``) who is not in release ``release_id``, whole, in the order archived, with the
    columns and dtypes of ``marker`` (the entry's stored schema; a categorical as plain values). Cost: DuckDB's scan of the archive's id column
    and a semi-join; the rows read are those of the units given back, not the archive."""
    table = f"private.{archive_table(name)}"
    if not table_exists(con, "private", archive_table(name)):
        return marker
    columns = unit_columns(name, ident)
    key, same = quote(ident), " AND ".join(f"u.{quote(c)} = a.{quote(c)}" for c in columns)
    units = ", ".join(quote(c) for c in columns)
    frame = con.execute(
        f"WITH arrived AS (SELECT {key} FROM {hosting} WHERE release_id = $next "
        f"EXCEPT SELECT {key} FROM private.hosting WHERE release_id = $this), "
        f"units AS (SELECT DISTINCT {units} FROM {table} WHERE archived_at <= $this "
        f"AND {key} IN (SELECT {key} FROM arrived)) "
        f"SELECT a.* EXCLUDE (archived_at, seq) FROM {table} AS a WHERE a.archived_at <= $this "
        f"AND EXISTS (SELECT 1 FROM units AS u WHERE {same}) ORDER BY a.archived_at, a.seq",
        {"this": release_id, "next": release_id + 1}).df()
    if not len(frame):
        return marker
    # a categorical column of the marker is read back as plain values: its categories are those of the entry's
    # own release, and the units given back hold ids and values from other releases
    dtypes = {c: object if isinstance(t, pd.CategoricalDtype) else t for c, t in marker.dtypes.items()}
    # a bitset word the entry gained later (a value new to the vocabulary) holds no value of the units kept before
    words = {c: 0 for c, t in dtypes.items() if pd.api.types.is_unsigned_integer_dtype(t) and frame[c].isna().any()}
    return frame[list(marker.columns)].fillna(words).astype(dtypes)


_PARQUET_MAGIC = b"PAR1"


def memo_frame(blob: bytes | memoryview, shared: Mapping[str, tuple[pa.Array, np.ndarray]] | None = None) -> pd.DataFrame:
    """An entry of the judge's memo as ``write.memo_blob`` stored it (an Arrow IPC stream), or as stores written
    before it did (a Parquet file, told by its leading magic bytes ``PAR1``; an IPC stream starts with a
    continuation marker ``FF FF FF FF``). The Arrow buffers are read in place (no copy beyond the codec's
    decompression), then converted to pandas once, each text cell its own string: an entry's text is mostly ids,
    one per row, which Arrow's de-duplication (``deduplicate_objects``) would hash into a table as large as the
    strings to find none equal (it raised reading the 300k-row entries of a Census-KDD window by 0.1 GB a table).
    A text column named in ``shared`` is read instead with the Python strings its vocabulary holds
    (``_interned``). O(size of the entry)."""
    if bytes(blob[:4]) == _PARQUET_MAGIC:
        return pd.read_parquet(io.BytesIO(blob))
    table = pa.ipc.open_stream(pa.py_buffer(blob)).read_all()
    interned = {name: _interned(table.column(name), vocabulary) for name, vocabulary in (shared or {}).items()
                if name in table.column_names and is_text(table.schema.field(name).type)}
    frame = table.drop_columns(list(interned)).to_pandas(deduplicate_objects=False)
    for name, values in interned.items():
        frame.insert(table.column_names.index(name), name, values)
    return frame


def _manifest(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    frame = con.execute("SELECT * FROM published.manifest ORDER BY release_id").df()
    for name in ("params", "checks", "utility"):
        frame[name] = frame[name].map(json.loads)
    frame["attributes"] = frame["attributes"].map(list)
    return frame
