"""How a protected table's definitions are named: ``ReleaseTranslator`` (asset keys, groups, pools) and
``ReleaseTable`` (everything one table's assets, checks and sensors are wired with).

As with ``dagster-dbt``'s ``DagsterDbtTranslator``, a code location that wants other names subclasses the
translator, overrides the methods it cares about, and passes an instance to ``release_definitions(...,
translator=...)``; the defaults are the names the package has always used.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import dagster as dg


class ReleaseTranslator:
    """The names Dagster shows for a protected table. ``step`` is ``source`` (the external source asset),
    ``snapshot``, a model stage's name (e.g. ``possible_worlds``), ``release_candidate`` or
    ``published_release``."""

    def get_asset_key(self, table: str, step: str) -> dg.AssetKey:
        """The key of ``table``'s asset ``step``; default ``[table, step]`` (``patients/snapshot``)."""
        return dg.AssetKey([table, step])

    def get_group_name(self, table: str) -> str | None:
        """The asset group of ``table``'s assets; default the table's name."""
        return table

    def get_owners(self, table: str) -> list[str]:
        """The owners of ``table``'s assets, as Dagster writes them (``team:privacy``, an e-mail address); default
        none."""
        return []

    def get_pool(self, table: str) -> str:
        """The concurrency pool every step of ``table`` runs in; default ``privrelease_<table>``. With a pool limit
        of 1 (``assets/dagster.yaml``), one release of the table runs at a time."""
        return f"privrelease_{table}"


@dataclass(frozen=True)
class ReleaseTable:
    """One protected table as its definitions see it: its name (the spec's ``name``), its dynamic partitions
    ``<table>_releases``, its resource keys ``<table>_store``, ``<table>_source`` and ``<table>_backend``, its
    translator, and the folder it exports to (if any)."""

    name: str
    translator: ReleaseTranslator
    #: The folder published releases are exported to, with their certificates (``assets.export_asset``); None:
    #: no export.
    export: Path | None = None

    @property
    def partitions_name(self) -> str:
        """The name of the table's dynamic partitions, ``<table>_releases``."""
        return f"{self.name}_releases"

    @cached_property
    def partitions(self) -> dg.DynamicPartitionsDefinition:
        """One dynamic partition per release (``partitions.partition_key``)."""
        return dg.DynamicPartitionsDefinition(name=self.partitions_name)

    @property
    def store(self) -> str:
        """Resource key of the release store (``ReleaseStoreResource``)."""
        return f"{self.name}_store"

    @property
    def source(self) -> str:
        """Resource key of the source (a ``sources.Source``)."""
        return f"{self.name}_source"

    @property
    def backend(self) -> str:
        """Resource key of where the partition-parallel steps run (``PrivreleaseBackend``)."""
        return f"{self.name}_backend"

    @property
    def pool(self) -> str:
        """The pool every step of the table claims a slot of."""
        return self.translator.get_pool(self.name)

    @property
    def group(self) -> str | None:
        """The asset group of the table's assets."""
        return self.translator.get_group_name(self.name)

    @property
    def owners(self) -> list[str]:
        """The owners of the table's assets."""
        return self.translator.get_owners(self.name)

    def asset_key(self, step: str) -> dg.AssetKey:
        """The key of the table's asset ``step``."""
        return self.translator.get_asset_key(self.name, step)
