"""The YAML way to protect a table: ``ProtectedTableComponent``, a Dagster component configured by a ``defs.yaml``.

A ``defs.yaml`` of type ``dagster_privrelease.ProtectedTableComponent`` names the release spec, the release store,
the source (a ``source:`` block, ``SourceBlock``), optionally a folder of release requests and a
``translation:`` block; loading it calls ``release_definitions``, so the table gets exactly the assets, checks,
sensors and job of the Python factory. ``dg scaffold defs dagster_privrelease.ProtectedTableComponent <name>``
writes a commented ``defs.yaml`` and an example spec (``ProtectedTableScaffolder``). Relative paths are read
from the folder of the ``defs.yaml``. Loading touches no data: the spec file is parsed, nothing else is opened.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import dagster as dg
from pydantic import Field, ValidationError

from ..errors import SpecError
from .definitions import release_definitions
from .landing_zone import LandingZoneSource
from .postgres_source import PostgresTableSource
from .resources import PrivreleaseBackend
from .sources import DuckDBChangeLogSource, DuckDBTableSource, Source
from .translator import ReleaseTranslator


class SourceKind(dg.Resolvable, dg.Model):
    """One kind of a component's ``source:`` block: its ``kind`` names it and its other keys configure it;
    ``build`` makes the ``Source``. A new kind is a subclass with a ``kind`` literal of its own, added to
    ``SourceBlock``."""

    def build(self, folder: Path) -> Source:
        """The configured source; relative file paths are read from ``folder`` (the folder of the defs.yaml)."""
        raise NotImplementedError(type(self).__name__)


class DuckDBTableKind(SourceKind):
    """``kind: duckdb_table``: a plain DuckDB table (``DuckDBTableSource``)."""

    kind: Literal["duckdb_table"] = Field(description="A plain DuckDB table, one row per individual.")
    database: str = Field(description="The DuckDB file holding the table; relative to the folder of the defs.yaml.")
    table: str = Field(description="The table, e.g. 'source.people'.")

    def build(self, folder: Path) -> DuckDBTableSource:
        """A ``DuckDBTableSource`` on ``folder / database``."""
        return DuckDBTableSource(database=str(folder / self.database), table=self.table)


class DuckDBChangeLogKind(SourceKind):
    """``kind: duckdb_change_log``: a DuckDB change log (``DuckDBChangeLogSource``)."""

    kind: Literal["duckdb_change_log"] = Field(
        description="A DuckDB change log (position, op, <id>, <columns>); a release's key is its log position."
    )
    database: str = Field(description="The DuckDB file holding the log; relative to the folder of the defs.yaml.")
    table: str = Field(description="The change-log table, e.g. 'source.people_log'.")

    def build(self, folder: Path) -> DuckDBChangeLogSource:
        """A ``DuckDBChangeLogSource`` on ``folder / database``."""
        return DuckDBChangeLogSource(database=str(folder / self.database), table=self.table)


class PostgresTableKind(SourceKind):
    """``kind: postgres_table``: a PostgreSQL table replayed from its change feed (``PostgresTableSource``); the
    connection string is read from an environment variable when the source is used, so neither the defs.yaml nor
    the UI shows it."""

    kind: Literal["postgres_table"] = Field(
        description="A PostgreSQL table with the change feed `privrelease change-feed` installs; a release's key is "
        "the feed's commit position."
    )
    table: str = Field(description="The table, 'schema.table' or 'table'.")
    dsn_env: str = Field(
        default="PRIVRELEASE_DSN", description="The environment variable holding the libpq connection string."
    )
    feed_schema: str = Field(default="privrelease", description="The schema of the change feed's tables.")

    def build(self, folder: Path) -> PostgresTableSource:
        """A ``PostgresTableSource`` whose DSN is ``dg.EnvVar(dsn_env)``."""
        return PostgresTableSource(dsn=dg.EnvVar(self.dsn_env), table=self.table, feed_schema=self.feed_schema)


class LandingZoneKind(SourceKind):
    """``kind: landing_zone``: a folder of Parquet/CSV snapshot and changes files (``LandingZoneSource``)."""

    kind: Literal["landing_zone"] = Field(
        description="A folder of complete snapshot-*/changes-* Parquet or CSV files, applied in name order."
    )
    folder: str = Field(description="The folder the files land in; relative to the folder of the defs.yaml.")
    op: str = Field(default="op", description="The column of a changes file holding insert, update or delete.")

    def build(self, folder: Path) -> LandingZoneSource:
        """A ``LandingZoneSource`` on ``folder / self.folder``."""
        return LandingZoneSource(folder=str(folder / self.folder), op=self.op)


#: A component's ``source:`` block: one of the kinds, told apart by its ``kind`` key (each kind's ``Literal``; a
#: plain union, as Dagster's component models also accept a template string in every field).
SourceBlock = DuckDBTableKind | DuckDBChangeLogKind | PostgresTableKind | LandingZoneKind


class Translation(dg.Resolvable, dg.Model):
    """The ``translation:`` block: other names for the table's assets, group and pool (``ReleaseTranslator``)."""

    key_prefix: list[str] = Field(
        default_factory=list,
        description="Prefix of every asset key: ['warehouse'] gives warehouse/<table>/<step>. Default: none.",
    )
    group_name: str | None = Field(default=None, description="The asset group. Default: the spec's name.")
    pool: str | None = Field(
        default=None, description="The concurrency pool of every step. Default: privrelease_<spec name>."
    )


class TranslatedNames(ReleaseTranslator):
    """A ``ReleaseTranslator`` that applies a ``translation:`` block over the default names."""

    def __init__(self, translation: Translation):
        self.translation = translation

    def get_asset_key(self, table: str, step: str) -> dg.AssetKey:
        """``[*key_prefix, table, step]``."""
        return super().get_asset_key(table, step).with_prefix(self.translation.key_prefix)

    def get_group_name(self, table: str) -> str | None:
        """``group_name``, or the table's name."""
        return self.translation.group_name or super().get_group_name(table)

    def get_pool(self, table: str) -> str:
        """``pool``, or ``privrelease_<table>``."""
        return self.translation.pool or super().get_pool(table)


#: What ``dg scaffold defs`` writes: a ``defs.yaml`` whose comments document every attribute.
DEFS_TEMPLATE = """\
type: {type_name}

attributes:
  # The release spec (docs/spec.md): the table's name, id, sensitive column, quasi-identifiers and model.
  # A path relative to this folder, or the spec's keys written here (spec: {{name: ..., id: ..., ...}}).
  spec: spec.yaml

  # The DuckDB release store of this table (schemas private and published), created on first use.
  # Relative to this folder, or absolute; templates work, e.g. "{{{{ env('RELEASES_DIR', '.') }}}}/x.duckdb".
  store: releases.duckdb

  # Where the rows come from. kind: duckdb_table (a plain table, captured at each release),
  # duckdb_change_log (position, op, <id>, <columns>; a release's key is its log position),
  # postgres_table (table, dsn_env: the variable holding the connection string, default PRIVRELEASE_DSN;
  # `privrelease change-feed` installs its feed) or landing_zone (folder of snapshot-*/changes-* files).
  source:
    kind: duckdb_table
    database: source.duckdb
    table: source.people

  # Optional: a folder of release-request files (attributes: [...]) the request sensor turns into releases
  # (the vertical models, e.g. sequential l-diversity). Default: no request sensor.
  # requests: requests

  # Optional: a folder each published release is exported to as Parquet (release_id=N/ folders), with its
  # certificate. Default: no export.
  # export: export

  # Optional: where the partition-parallel steps run (m-invariance's split, Mondrian): kind local (default,
  # threads) or spark (the [spark] extra; master: local[2], spark://host:7077, yarn; or remote: sc://host:15002).
  # backend:
  #   kind: spark
  #   master: local[2]
  #   spark_conf: {{spark.executor.memory: 4g}}

  # Optional: other names for the assets, group and pool. Defaults: <spec name>/<step>, group <spec name>,
  # pool privrelease_<spec name>.
  # translation:
  #   key_prefix: [warehouse]
  #   group_name: private_releases
  #   pool: privrelease_shared
"""

#: The example spec written beside it: m-invariance over three quasi-identifiers of a ``source.people`` table.
SPEC_TEMPLATE = """\
# The release spec of this table (docs/spec.md lists every key). Edit the columns to your table's.
name: {name}
id: id                      # the identifier column: never published
sensitive: disease          # the sensitive column
quasi_identifiers:
  age:
    type: numeric
  sex:
    type: categorical
  zipcode:
    type: numeric
model:
  name: m_invariance        # docs/models lists the models and their parameters
  m: 2
"""


class ProtectedTableScaffolder(dg.Scaffolder):
    """``dg scaffold defs dagster_privrelease.ProtectedTableComponent <name>``: a commented ``defs.yaml`` and an
    example ``spec.yaml`` named after the folder, in the new folder."""

    def scaffold(self, request: dg.ScaffoldRequest) -> None:
        """Write ``defs.yaml`` and ``spec.yaml`` into ``request.target_path`` (two small files); the spec's name is
        the folder's, with any character a spec name refuses (``core.spec.NAME``) replaced by ``_``."""
        folder = request.target_path
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "defs.yaml").write_text(DEFS_TEMPLATE.format(type_name=request.type_name))
        (folder / "spec.yaml").write_text(SPEC_TEMPLATE.format(name=re.sub(r"[^A-Za-z0-9_]", "_", folder.name)))


@dg.scaffold_with(ProtectedTableScaffolder)
class ProtectedTableComponent(dg.Component, dg.Resolvable, dg.Model):
    """One protected table, republished release after release under the model of its spec.

    The table gets the definitions of ``release_definitions``: the snapshot, model stages, release candidate and
    published release assets (one dynamic partition per release), the candidate's blocking checks, the source
    sensor (and the request sensor with ``requests``) and the release job. Relative paths are read from the
    folder of the ``defs.yaml``.

    Example:
        ```yaml
        type: dagster_privrelease.ProtectedTableComponent
        attributes:
          spec: patients.yaml
          store: patients_releases.duckdb
          source:
            kind: duckdb_table
            database: warehouse.duckdb
            table: source.patients
        ```
    """

    spec: str | dict[str, Any] = Field(
        description="The release spec (docs/spec.md): a path relative to the folder of the defs.yaml, or the spec's "
        "keys inline (taxonomy files named in it are read from that folder)."
    )
    store: str = Field(
        description="The DuckDB release store of this table, created on first use; relative to the folder of the "
        "defs.yaml."
    )
    source: SourceBlock = Field(description="Where the rows come from; its 'kind' key names the kind of source.")
    requests: str | None = Field(
        default=None,
        description="A folder of release-request files the request sensor turns into releases; relative to the "
        "folder of the defs.yaml. Default: no request sensor.",
    )
    translation: Translation | None = Field(
        default=None, description="Other names for the assets, group and pool. Default: the package's names."
    )
    export: str | None = Field(
        default=None,
        description="A folder each published release is exported to as Parquet partitioned by release, with its "
        "certificate (the asset exported_release); relative to the folder of the defs.yaml. Default: no export.",
    )
    backend: dict[str, Any] | None = Field(
        default=None,
        description="Where the partition-parallel steps run: the fields of PrivreleaseBackend, e.g. {kind: spark, "
        "master: 'local[2]'} or {kind: spark, remote: 'sc://host:15002'}. Default: threads of the run's process.",
    )

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        """``release_definitions`` with the attributes' paths read from ``context.path`` (the defs.yaml's folder).

        Parses the spec; opens no store and no source and starts no Spark session. SpecError for a bad spec, naming
        the file (the spec file, or the defs.yaml's ``spec:`` for an inline spec), the key and the rule, or for a bad
        ``backend:`` block, naming its keys.
        """
        folder = Path(context.path)
        inline = self.spec if isinstance(self.spec, dict) else None
        spec_path = folder / ("defs.yaml" if inline is not None else str(self.spec))
        try:
            backend = None if self.backend is None else PrivreleaseBackend(**self.backend)
        except ValidationError as exc:
            keys = ", ".join(".".join(map(str, e["loc"])) for e in exc.errors())
            raise SpecError(f"{folder / 'defs.yaml'}: attributes.backend: invalid {keys} (the fields of "
                            "PrivreleaseBackend: kind local|spark, master, remote, spark_conf)") from None
        try:
            return release_definitions(
                spec_path,
                folder / self.store,
                self.source.build(folder),
                requests=None if self.requests is None else folder / self.requests,
                translator=None if self.translation is None else TranslatedNames(self.translation),
                export=None if self.export is None else folder / self.export,
                inline_spec=inline,
                backend=backend,
            )
        except SpecError as exc:
            where = f"{spec_path} (attributes.spec)" if inline is not None else str(spec_path)
            raise SpecError(f"{where}: {exc}") from None
