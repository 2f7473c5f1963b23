"""The release store, and where a table's partition-parallel steps run, as Dagster resources.

Every asset of a protected table reads and writes through ``ReleaseStore`` (the ``storage`` package owns all the SQL),
never through an IO manager: the pandas DuckDB IO manager inserts positionally, so a reordered column would
silently corrupt a partition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import dagster as dg
from pydantic import Field, PrivateAttr

from ..core.partitioned import Backend, LocalBackend
from ..core.spec import Spec, load_spec, parse_spec
from ..errors import SpecError
from ..storage import ReleaseStore, open_duckdb
from ..storage.connection import table_exists


class ReleaseStoreResource(dg.ConfigurableResource):
    """The DuckDB release store of one protected table (schemas ``private`` and ``published``)."""

    database: str = Field(
        description="Path of the DuckDB file holding the release store of this table; created on first use. "
        "One file per protected table; point it wherever you keep the releases."
    )
    spec: str = Field(
        description="Path of the release spec (YAML) of this table, or of the file that holds it inline (inline)."
    )
    inline: dict[str, Any] | None = Field(
        default=None,
        description="The spec's keys when written inline in the file 'spec' (a component's defs.yaml): taxonomy "
        "files named in it are read from that file's folder. None: 'spec' is the spec file.",
    )

    #: The spec as parsed when this run (or sensor tick) started (``setup_for_execution``); None outside one.
    _loaded: Spec | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Parse the spec once for the run (or the sensor tick) about to use this resource: every step of the run
        reads this one parse (``loaded_spec``), and an edited spec is read again by the next run."""
        self._loaded = self._read()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Forget the run's parse: the next run reads the spec file again."""
        self._loaded = None

    def loaded_spec(self) -> Spec:
        """The spec as written (unbound; the store binds it to the snapshots): the run's parse inside a run or
        sensor tick, else read from the file now."""
        return self._loaded if self._loaded is not None else self._read()

    def _read(self) -> Spec:
        """The spec parsed from ``inline`` or read from the file ``spec`` (``core.spec``); SpecError naming the key."""
        return load_spec(self.spec) if self.inline is None else parse_spec(self.inline, base=Path(self.spec).parent)

    def published_ids(self) -> list[int]:
        """The published release ids, read from ``published.manifest`` read-only and briefly (a sensor must not
        create the store or hold it); none while the file or its manifest does not exist. StoreError when the
        file stays locked by a writer (``storage.open_duckdb``'s retries)."""
        path = Path(self.database)
        if not path.exists():
            return []
        con = open_duckdb(path, read_only=True, what="release store")
        try:
            if not table_exists(con, "published", "manifest"):
                return []
            return [int(r) for (r,) in con.execute("SELECT release_id FROM published.manifest ORDER BY 1").fetchall()]
        finally:
            con.close()

    def store(self) -> ReleaseStore:
        """A store on ``database`` (it creates its schema on first use)."""
        return ReleaseStore(self.database, self.loaded_spec())


class PrivreleaseBackend(dg.ConfigurableResource):
    """Where a table's partition-parallel steps run (``core.partitioned``: m-invariance's split, Mondrian below a
    cut), and the global steps' aggregations and joins (``partitioned.Aggregations``: counts per signature and
    value, the judge's look-ups and lag by individual): this process's threads (``kind: local``, the default)
    or Apache Spark (``kind: spark``, the ``[spark]`` extra). The release candidate is made, and judged, on
    ``backend()`` (``pipeline.make_candidate``, the judge check), so the release job is the same either way, and so
    are the published release and the verdicts (``docs/scaling.md``). The session is process-wide:
    the first step that needs it starts it (a local JVM: a few seconds), the next ones reuse it."""

    kind: Literal["local", "spark"] = Field(
        default="local", description="'local': threads of the run's process; 'spark': a Spark session."
    )
    master: str = Field(
        default="local[2]", description="The Spark master of a 'spark' backend (local[N], spark://host:port, yarn)."
    )
    remote: str | None = Field(
        default=None,
        description="A Spark Connect URL (sc://host:port); when set, the session is remote and 'master' is unused. "
        "Never shown in the UI (it may carry a token).",
    )
    spark_conf: dict[str, str] = Field(
        default_factory=dict, description="Spark settings over the package's defaults (spark.executor.memory, ...)."
    )

    def backend(self) -> Backend:
        """The backend: a ``LocalBackend``, or a ``SparkBackend`` on the session (started on first use). SpecError
        naming the kind when the ``[spark]`` extra is not installed."""
        if self.kind == "local":
            return LocalBackend()
        try:
            from ..spark import SparkBackend, spark_session
        except ImportError:
            raise SpecError("backend kind 'spark': pyspark is not installed (pip install "
                            "'dagster-privrelease[spark]')") from None
        return SparkBackend(spark_session(self.master, self.remote, self.spark_conf))

    def where(self) -> str:
        """Where the steps run, as the UI and the run log say it: ``local``, ``spark (local[2])``, ``spark (Spark
        Connect)``; never the remote URL."""
        if self.kind == "local":
            return "local"
        return "spark (Spark Connect)" if self.remote else f"spark ({self.master})"
