"""The layout of a release store: its DDL, the columns recorded on first staging, the drift checks, the domains.

The tables whose columns do not depend on the data are created when the store is first opened (``_FIXED_DDL``).
The types of the identifier and the non-identifiers are not in the spec: they are taken from the first staged
snapshot, recorded in ``private.columns``, and the snapshot, hosting and release tables are created from them.
So is the kind of value (``core.spec.column_kind``) each quasi-identifier and the sensitive column held before
``validate_snapshot`` normalised it. Every later snapshot and spec is checked against that record (schema or type
drift is a StoreError naming the column, its old and new type and what to do), and the leaf order
of each categorical attribute and of the sensitive values is kept (``published.domain``,
``private.sensitive_domain``), so that a rank never changes across releases.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from ..core.hierarchy import Taxonomy
from ..core.spec import BoundSpec, Spec, column_kind
from ..errors import StoreError
from .connection import StoreConnection, first_row, quote, release_rows, scalar, table_exists, transaction

_FIXED_DDL = (
    "CREATE SCHEMA IF NOT EXISTS private",
    "CREATE SCHEMA IF NOT EXISTS published",
    'CREATE TABLE IF NOT EXISTS private.columns ("position" INTEGER PRIMARY KEY, column_name VARCHAR NOT NULL, '
    '"role" VARCHAR NOT NULL, sql_type VARCHAR NOT NULL, kind VARCHAR)',
    # a store created before kinds were recorded gets the column, empty: its kinds are not checked
    "ALTER TABLE private.columns ADD COLUMN IF NOT EXISTS kind VARCHAR",
    'CREATE TABLE IF NOT EXISTS private.sensitive_domain ("value" VARCHAR PRIMARY KEY, "rank" BIGINT NOT NULL)',
    "CREATE TABLE IF NOT EXISTS private.digest (release_id BIGINT PRIMARY KEY, digest VARCHAR NOT NULL)",
    "CREATE TABLE IF NOT EXISTS private.candidate_set (release_id BIGINT PRIMARY KEY, n_rows BIGINT NOT NULL, "
    "n_values BIGINT NOT NULL, css BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS private.candidate_meta (release_id BIGINT NOT NULL, model VARCHAR NOT NULL, "
    "params VARCHAR NOT NULL, attributes VARCHAR[] NOT NULL)",
    'CREATE TABLE IF NOT EXISTS private.candidate_counterfeit (release_id BIGINT NOT NULL, group_id BIGINT NOT NULL, '
    '"count" BIGINT NOT NULL)',
    'CREATE TABLE IF NOT EXISTS published.counterfeit (release_id BIGINT NOT NULL, group_id BIGINT NOT NULL, '
    '"count" BIGINT NOT NULL)',
    'CREATE TABLE IF NOT EXISTS published.domain (attribute VARCHAR NOT NULL, "value" VARCHAR NOT NULL, '
    '"rank" BIGINT NOT NULL, PRIMARY KEY (attribute, "value"))',
    # the judge's verdicts on each published release: counts, never an individual (``pipeline.verdicts``)
    'CREATE TABLE IF NOT EXISTS published.verdict (release_id BIGINT NOT NULL, "name" VARCHAR NOT NULL, '
    '"kind" VARCHAR NOT NULL, blocking BOOLEAN NOT NULL, passed BOOLEAN NOT NULL, violations BIGINT NOT NULL, '
    'summary VARCHAR NOT NULL)',
    'CREATE TABLE IF NOT EXISTS published.manifest (release_id BIGINT PRIMARY KEY, model VARCHAR NOT NULL, '
    'params VARCHAR NOT NULL, attributes VARCHAR[] NOT NULL, created_at TIMESTAMP NOT NULL, "rows" BIGINT NOT NULL, '
    '"groups" BIGINT NOT NULL, counterfeits BIGINT NOT NULL, checks VARCHAR NOT NULL, utility VARCHAR NOT NULL)',
)


def sql_type(series: pd.Series) -> str:
    """The DuckDB type a pandas column is stored as: BOOLEAN, BIGINT, DOUBLE, TIMESTAMP[TZ], else VARCHAR.

    A categorical column is stored as the type of its categories, never as an ENUM: an ENUM's values are fixed
    when its table is created, and the store's columns hold open domains (ids, values that may still appear).
    An object column (empty or all-null included) is VARCHAR, never DuckDB's NULL type."""
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return sql_type(pd.Series(dtype.categories))
    if pd.api.types.is_bool_dtype(dtype):
        return "BOOLEAN"
    if pd.api.types.is_integer_dtype(dtype):
        return "BIGINT"
    if pd.api.types.is_float_dtype(dtype):
        return "DOUBLE"
    if isinstance(dtype, pd.DatetimeTZDtype):
        return "TIMESTAMPTZ"
    if pd.api.types.is_datetime64_dtype(dtype):
        return "TIMESTAMP"
    return "VARCHAR"


class StoreSchema(StoreConnection):
    """The store of one protected table (``path``) under its release spec (``spec``), with its schema in place.

    The read side (``read.StoreReader``) and the write side (``write.StoreWriter``) build on this.
    """

    def __init__(self, path: str | Path, spec: Spec, retries: int = 5, backoff: float = 0.2):
        """StoreError for a file named ``private.<ext>`` or ``published.<ext>``: DuckDB names the database after
        the file, and ``private.snapshot`` would then be ambiguous between that database and the store's
        schema (DuckDB's "Ambiguous reference to catalog or schema")."""
        super().__init__(path, retries, backoff)
        if self.path.stem in ("private", "published"):
            raise StoreError(
                f"{self.path}: a release store cannot be named {self.path.name}: DuckDB names the database after "
                f"the file, which clashes with the store's schema {self.path.stem!r}; name it otherwise, e.g. "
                f"{self.path.with_stem(spec.name + '_' + self.path.stem).name}"
            )
        self.spec = spec
        self._ready = False

    @contextmanager
    def _open(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection with the schema in place: created, and checked against the spec, on the first
        call of this object, or once per ``session()`` for every store object of the same columns and roles (a
        release run makes one store object per Dagster step)."""
        with self.connect() as con:
            session = self.current_session()
            key = ("schema", tuple(self._roles()))
            if not self._ready and (session is None or key not in session.ready):
                self._create(con)
                if session is not None:
                    session.ready.add(key)
            yield con

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """``_open`` inside one transaction (``connection.transaction``)."""
        with self._open() as con, transaction(con):
            yield con

    def ensure_schema(self) -> None:
        """Create ``private`` and ``published`` and their tables (idempotent); refuse a spec whose columns or roles
        differ from the ones the store was built for (StoreError, schema drift)."""
        with self._open() as con:
            self._create(con)

    def _create(self, con: duckdb.DuckDBPyConnection) -> None:
        for ddl in _FIXED_DDL:
            con.execute(ddl)
        stored = stored_columns(con)
        if len(stored):
            _check_roles(stored, self._roles(), self.path, self.spec.name)
            self._create_data_tables(con, dict(zip(stored["column_name"], stored["sql_type"], strict=True)))
        self._ready = True

    def _roles(self) -> list[tuple[str, str]]:
        """``(column, role)`` of every snapshot column, in the spec's order."""
        spec = self.spec
        roles = [(spec.id, "id")]
        roles += [(n, f"quasi_identifier:{q.type}") for n, q in spec.quasi_identifiers.items()]
        roles += [(n, "non_identifier") for n in spec.non_identifiers]
        return roles + [(spec.sensitive, "sensitive")]

    def _create_data_tables(self, con: duckdb.DuckDBPyConnection, types: dict[str, str]) -> None:
        """The tables whose columns depend on the snapshot (``types``: column -> SQL type): snapshot, hosting,
        release and their candidates."""
        spec = self.spec
        nullable = set(spec.non_identifiers)
        snapshot = ["release_id BIGINT NOT NULL"]
        snapshot += [f"{quote(c)} {t}{'' if c in nullable else ' NOT NULL'}" for c, t in types.items()]
        hosting = ["release_id BIGINT NOT NULL", f"{quote(spec.id)} {types[spec.id]} NOT NULL",
                   "group_id BIGINT"]
        release = ["release_id BIGINT NOT NULL", "group_id BIGINT"]
        for name, qi in spec.quasi_identifiers.items():
            bound = "DOUBLE" if qi.numeric else "BIGINT"
            release += [f"{quote(name)} VARCHAR", f"{quote(name + '__lo')} {bound}", f"{quote(name + '__hi')} {bound}"]
        release += [f"{quote(n)} {types[n]}" for n in spec.non_identifiers]
        release.append(f"{quote(spec.sensitive)} VARCHAR")  # null: a release that does not publish it (vertical)
        for table, columns in (
            ("private.snapshot", snapshot),
            ("private.hosting", hosting),
            ("private.candidate_hosting", hosting),
            ("published.release", release),
            ("private.candidate_release", release),
        ):
            con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(columns)})")

    def _column_record(self, frame: pd.DataFrame, raw: pd.DataFrame) -> pd.DataFrame:
        """``private.columns`` as a validated snapshot ``frame`` would record it: position, column_name, role,
        sql_type (of ``frame``'s column) and kind: for the columns ``validate_snapshot`` normalises (the
        quasi-identifiers and the sensitive column), the kind of value they held in ``raw``, the snapshot as
        given (``column_kind``); None for the id and the non-identifiers, stored as they are."""
        normalised = {*self.spec.quasi_identifiers, self.spec.sensitive}
        record = pd.DataFrame(
            [(c, r, sql_type(frame[c]), column_kind(raw[c]) if c in normalised else None) for c, r in self._roles()],
            columns=["column_name", "role", "sql_type", "kind"],
        )
        record.insert(0, "position", np.arange(len(record), dtype=np.int32))
        return record

    def _check_columns(self, stored: pd.DataFrame, frame: pd.DataFrame, raw: pd.DataFrame) -> None:
        """Refuse (StoreError, schema drift) a validated snapshot ``frame`` whose roles or column types differ
        from the ``stored`` record, and (type drift) one whose quasi-identifiers or sensitive column held another
        kind of value in ``raw``, the snapshot as given, than when first recorded. A BIGINT column may arrive as
        DOUBLE holding whole numbers (an integer column with a null reads as float64 in pandas), a DOUBLE column
        as BIGINT, and any column all null; likewise a numeric quasi-identifier's integers as floats holding whole
        numbers, or its floats as integers. Every other change of kind is refused: a categorical's values are
        labels (``1`` and ``1.0`` are two leaves, integers beside text are new leaves), and text in a numeric
        column means the source changed."""
        _check_roles(stored, self._roles(), self.path, self.spec.name)
        incoming = self._column_record(frame, raw)
        incoming["all_null"] = [bool(frame[c].isna().all()) for c in incoming["column_name"]]
        incoming["integral"] = [_integral(frame[c]) for c in incoming["column_name"]]
        merged = stored.merge(incoming, on="column_name", suffixes=("", "_new"))
        widening = (merged["sql_type"] == "DOUBLE") & (merged["sql_type_new"] == "BIGINT")
        whole = (merged["sql_type"] == "BIGINT") & (merged["sql_type_new"] == "DOUBLE") & merged["integral"]
        drift = merged[(merged["sql_type"] != merged["sql_type_new"]) & ~widening & ~whole & ~merged["all_null"]]
        if len(drift):
            changes = ", ".join(f"{r.column_name!r} was {r.sql_type}, now {r.sql_type_new}" for r in drift.itertuples())
            text = drift[drift["sql_type_new"] == "VARCHAR"]["column_name"].tolist()
            hint = (f"; a CSV snapshot's columns are text as written unless the spec's csv.types reads them as "
                    f"numbers (csv: {{types: {{{text[0]}: integer}}}})") if text else ""
            raise StoreError(f"{self.path}: schema drift in the snapshot: {changes}; earlier releases were stored "
                             f"with the old types, so this snapshot cannot join their history{hint}")
        self._check_kinds(merged)

    def _check_kinds(self, merged: pd.DataFrame) -> None:
        """The type-drift half of ``_check_columns`` on its ``merged`` stored and incoming records."""
        numeric = merged["role"] == "quasi_identifier:numeric"
        recorded = merged["kind"].notna()
        widened = numeric & (merged["kind"] == "float") & (merged["kind_new"] == "integer")
        whole = numeric & (merged["kind"] == "integer") & (merged["kind_new"] == "float") & merged["integral"]
        drift = merged[recorded & (merged["kind"] != merged["kind_new"]) & ~widened & ~whole]
        if not len(drift):
            return
        r = next(drift.itertuples())
        column, old, new = str(r.column_name), str(r.kind), str(r.kind_new)
        role = {"quasi_identifier:numeric": "numeric quasi-identifier",
                "quasi_identifier:categorical": "categorical quasi-identifier"}.get(str(r.role), "sensitive column")
        why = ("earlier releases were generalised from another kind of value" if role.startswith("numeric") else
               "its values are published as labels, so they would be new values beside the earlier ones")
        raise StoreError(
            f"{self.path}: type drift in column {column!r} ({role}): it held {old} values in the releases so far "
            f"(recorded with the first staged snapshot) and holds {new} values now; {why}. "
            f"Give {column} its earlier type ({old}) in the snapshot and release again, or start a new store (a "
            "new --db) if the column's meaning changed"
        )

    def _binding_columns(self, con: duckdb.DuckDBPyConnection, release_id: int) -> pd.DataFrame:
        """The columns of the staged T(release_id) that ``Spec.bind`` reads (the categorical quasi-identifiers
        without a written taxonomy, the sensitive column unless its domain is written), in stored order: what a
        bound spec of that release needs, without reading the whole snapshot. O(rows x those columns)."""
        spec = self.spec
        names = [n for n, q in spec.quasi_identifiers.items() if not q.numeric and not q.written]
        names += [] if spec.sensitive_written else [spec.sensitive]
        return release_rows(con, "private.snapshot", release_id, names) if names else pd.DataFrame()

    def _bound_spec(self, con: duckdb.DuckDBPyConnection, snapshot: pd.DataFrame) -> BoundSpec:
        """The spec with the stored domains, then bound to ``snapshot`` (``read.StoreReader.bound_spec``)."""
        spec = self.spec
        domain = con.execute('SELECT attribute, "value" FROM published.domain ORDER BY attribute, "rank"').df()
        stored = domain.groupby("attribute", sort=False)["value"].agg(tuple).to_dict()
        qis = {}
        for name, qi in spec.quasi_identifiers.items():
            leaves = stored.get(name)
            qis[name] = qi
            if not qi.numeric and leaves:
                if qi.written and qi.taxonomy is not None:  # written: always has its taxonomy
                    _check_domain(leaves, qi.taxonomy.leaves, f"the taxonomy of {name!r}", self.path)
                else:
                    qis[name] = dataclasses.replace(qi, taxonomy=Taxonomy.from_mapping({"Any": list(leaves)}))
        values = tuple(con.execute('SELECT "value" FROM private.sensitive_domain ORDER BY "rank"').df()["value"])
        sensitive = spec.sensitive_values
        if values:
            if spec.sensitive_written and spec.sensitive_values is not None:  # written: always set
                _check_domain(values, spec.sensitive_values, f"the domain of {spec.sensitive!r}", self.path)
            else:
                sensitive = values
        return dataclasses.replace(spec, quasi_identifiers=qis, sensitive_values=sensitive).bind(snapshot)


def new_domain_rows(con: duckdb.DuckDBPyConnection, spec: Spec) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The leaves of ``spec``'s categorical quasi-identifiers beyond the stored ones (rows of ``published.domain``:
    attribute, value, rank) and its sensitive values beyond the stored ones (rows of ``private.sensitive_domain``:
    value, rank), ranked after the stored ones. ``spec`` is bound (``StoreSchema._bound_spec``), so the stored
    values are a prefix of its own."""
    leaves = []
    for name, qi in spec.quasi_identifiers.items():
        if qi.numeric or qi.taxonomy is None:  # bound: every categorical has its taxonomy
            continue
        known = scalar(con, "SELECT count(*) FROM published.domain WHERE attribute = ?", [name])
        new = list(qi.taxonomy.leaves[known:])
        leaves.append(pd.DataFrame({"attribute": name, "value": new, "rank": np.arange(known, known + len(new))}))
    known = scalar(con, "SELECT count(*) FROM private.sensitive_domain")
    values = list((spec.sensitive_values or ())[known:])
    sensitive = pd.DataFrame({"value": values, "rank": np.arange(known, known + len(values))})
    domain = pd.concat(leaves, ignore_index=True) if leaves else pd.DataFrame(columns=["attribute", "value", "rank"])
    return domain, sensitive


def release_columns(spec: Spec, attributes: Iterable[str]) -> list[str]:
    """The columns of ``Release.table`` for the released ``attributes``: ``group_id``; per attribute ``A``, ``A``,
    ``A__lo``, ``A__hi``; the non-identifiers; the sensitive column."""
    columns = ["group_id"]
    for name in attributes:
        columns += [name, f"{name}__lo", f"{name}__hi"]
    return columns + [*spec.non_identifiers, spec.sensitive]


def stored_columns(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """``private.columns`` (column_name, role, sql_type, kind) in position order; empty before the first staging."""
    return con.execute('SELECT column_name, "role", sql_type, kind FROM private.columns ORDER BY "position"').df()


def stored_snapshot(
    con: duckdb.DuckDBPyConnection, release_id: int, columns: list[str] | None = None
) -> pd.DataFrame | None:
    """T(release_id) as staged, without release_id (only ``columns``, in that order, when given: ``[]`` gives a
    frame of no column, one row per staged row, counted without reading any), or None when it was never staged.
    A scan of the snapshots; reading one column costs about 1/d of reading them all."""
    if not table_exists(con, "private", "snapshot"):
        return None
    if columns == []:
        rows = snapshot_size(con, release_id)
        return pd.DataFrame(index=pd.RangeIndex(rows)) if rows else None
    frame = release_rows(con, "private.snapshot", release_id, columns)
    return frame if len(frame) else None


def snapshot_size(con: duckdb.DuckDBPyConnection, release_id: int) -> int:
    """How many rows T(release_id) has as staged (0 when it was never staged), without reading them: a count
    over the snapshots' release_id column."""
    if not table_exists(con, "private", "snapshot"):
        return 0
    return int(scalar(con, "SELECT count(*) FROM private.snapshot WHERE release_id = ?", [release_id]))


def is_staged(con: duckdb.DuckDBPyConnection, release_id: int) -> bool:
    """Whether T(release_id) is staged (without reading it)."""
    return table_exists(con, "private", "snapshot") and first_row(
        con, "SELECT 1 FROM private.snapshot WHERE release_id = ? LIMIT 1", [release_id]) is not None


def published_ids(con: duckdb.DuckDBPyConnection) -> list[int]:
    """The published release ids, ascending."""
    return [int(r) for (r,) in con.execute("SELECT release_id FROM published.manifest ORDER BY 1").fetchall()]


def staged_ids(con: duckdb.DuckDBPyConnection) -> list[int]:
    """The release ids with a staged snapshot (published or not), ascending."""
    if not table_exists(con, "private", "snapshot"):
        return []
    return [int(r) for (r,) in con.execute("SELECT DISTINCT release_id FROM private.snapshot ORDER BY 1").fetchall()]


def ids_text(ids: list[int]) -> str:
    """Release ids for a message: ``none``, ``[1, 2]`` or ``1..7``."""
    if not ids:
        return "none"
    return f"{ids[0]}..{ids[-1]}" if ids == list(range(ids[0], ids[-1] + 1)) and len(ids) > 2 else str(ids)


def state_tables(con: duckdb.DuckDBPyConnection, prefix: str) -> list[str]:
    """The tables of ``private`` named ``<prefix><name>``: the model state (``state_``) or the staged candidate's
    (``candidate_state_``), by name."""
    names = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'private' AND starts_with(table_name, ?)"
        " ORDER BY 1", [prefix]
    ).fetchall()
    return [n for (n,) in names]


def permutation_view_sql(state: str, source: str, spec: BoundSpec) -> str:
    """The SELECT of a model's ``PermutationView`` over the state table ``state``: ``(world, <id>, <sensitive>)``,
    one row per world and individual of the latest release holding the state, world 0 the true world (T's own
    values), every world of the state the sensitive value in T of the tuple its ``source`` column names (e.g.
    Shmueli-Tassa's fake worlds, eq. (5)). A view, so the worlds are stored once, as permutations (one join per
    read: O(worlds x n)).

    Args:
        state: the qualified state table (``private.state_<stage>``), with ``world``, the id and ``source``.
        source: the column of ``state`` naming the tuple whose value an individual takes.
        spec: the table's spec (its id and sensitive columns).

    Returns:
        The SELECT, every identifier quoted.
    """
    ident, sensitive, src = quote(spec.id), quote(spec.sensitive), quote(source)
    return (
        f"WITH latest AS (SELECT max(release_id) AS release_id FROM {state}), "
        "t AS (SELECT s.* FROM private.snapshot s JOIN latest USING (release_id)) "
        f"SELECT 0::BIGINT AS world, t.{ident}, t.{sensitive} FROM t "
        f"UNION ALL SELECT w.world::BIGINT, w.{ident}, t.{sensitive} FROM {state} w "
        f"JOIN latest USING (release_id) JOIN t ON t.{ident} = w.{src}"
    )


def _integral(series: pd.Series) -> bool:
    """Whether a float column holds whole numbers only (nulls aside)."""
    if not pd.api.types.is_float_dtype(series.dtype):
        return False
    values = series.dropna().to_numpy(dtype=np.float64)
    return bool(np.all(np.isfinite(values) & (values == np.round(values))))


def _check_roles(stored: pd.DataFrame, roles: list[tuple[str, str]], path: Path, spec: str) -> None:
    """Refuse spec ``spec`` when its columns or roles differ from the ones recorded when the store was created,
    naming the differing columns and both ways out: the wrong spec (pass the store's own), or a table whose
    columns changed (schema drift: a history has one schema, so a new store file)."""
    before = list(zip(stored["column_name"], stored["role"], strict=True))
    if before == roles:
        return
    gone = [f"{c} ({r})" for c, r in before if (c, r) not in roles]
    new = [f"{c} ({r})" for c, r in roles if (c, r) not in before]
    raise StoreError(
        f"{path}: spec {spec!r} does not match the store's history (schema drift): in the store, not in the spec: "
        f"{gone or 'none'}; in the spec, not in the store: {new or 'none'}. If this is the wrong spec, pass the one "
        "the store was built with; if the table's columns changed, publish them to a new store file (a release "
        "history has one schema)"
    )


def _check_domain(stored: tuple[str, ...], written: tuple[str, ...], what: str, path: Path) -> None:
    if tuple(written) != tuple(stored):
        raise StoreError(
            f"{path}: schema drift: {what} in the spec differs from the one published earlier "
            f"({len(stored)} values stored, {len(written)} in the spec); leaf ranks of earlier releases would change"
        )
