"""The Dagster layer: wires the core and the release store into assets, checks, sensors and a release job.

All algorithms stay in ``core``; all SQL of the release store in ``storage``. Entry points:
``release_definitions`` (one protected table's definitions, from a spec, a store path and a ``Source``) and
``run_release`` (one release, in-process). Modules: ``definitions`` (those two), ``assets`` (one factory per
asset), ``checks``, ``expectations``, ``sensors``, ``sources`` (the ``Source`` protocol and its DuckDB and frame kinds),
``postgres_source`` (a PostgreSQL table with its change feed), ``landing_zone`` (a folder of Parquet/CSV files),
``partitions`` (keys and the partition a step works on), ``translator`` (asset keys, group, pool), ``resources``
(the store, and ``PrivreleaseBackend``: where the partition-parallel steps run) and ``report`` (UI metadata).
"""

from .definitions import release_definitions, run_release
from .landing_zone import LandingZoneSource
from .postgres_source import PostgresTableSource
from .resources import PrivreleaseBackend, ReleaseStoreResource
from .sources import DuckDBChangeLogSource, DuckDBTableSource, Fingerprint, FrameSource, Source
from .translator import ReleaseTranslator

__all__ = [
    "DuckDBChangeLogSource", "DuckDBTableSource", "Fingerprint", "FrameSource", "LandingZoneSource",
    "PostgresTableSource", "PrivreleaseBackend", "ReleaseStoreResource", "ReleaseTranslator", "Source", "release_definitions", "run_release",
]
