"""The Spark session the backend runs in: local (``local[2]``), a cluster master, or Spark Connect.

Quiet and headless by default: no Spark UI, logs at ERROR, Arrow for every transfer between Python and the JVM,
the workers on this interpreter (``PYSPARK_PYTHON``, when unset) so they import the same package; ``JAVA_HOME``
from the ``java`` on the PATH when unset. A session is process-wide (``getOrCreate``): a second call returns it.

A Spark Connect session is a client of a server started elsewhere: it is built by ``pyspark.sql.connect``'s own
builder (so a classic session in the same process, e.g. dagster-pyspark's, does not stand in its way) with the
runtime settings only (the server owns the static ones: its UI, its JVM's options); the kernels' workers run the
server's Python, which must have this package installed.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

__all__ = ["DEFAULTS", "spark_session"]

#: Spark's log configuration for a session started here: ERROR and above, on stderr.
LOG4J = Path(__file__).with_name("log4j2.properties")

#: Settings every session gets unless ``conf`` overrides them; a Spark Connect session gets the runtime ones
#: (``RUNTIME``).
DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.shuffle.partitions": "8",
}

#: The settings of ``DEFAULTS`` a Spark Connect client may set on its session.
RUNTIME = ("spark.sql.execution.arrow.pyspark.enabled", "spark.sql.shuffle.partitions")


def spark_session(master: str = "local[2]", remote: str | None = None,
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """A Spark session on ``master``, or on the Spark Connect server at ``remote`` (``sc://host:port``) when given;
    ``conf`` over ``DEFAULTS``. Starting a local JVM takes a few seconds, once per process."""
    if remote:
        return _connect(remote, conf or {})
    if "JAVA_HOME" not in os.environ and (java := shutil.which("java")):
        os.environ["JAVA_HOME"] = str(Path(java).resolve().parent.parent)
    # the workers run this interpreter, so they import this package and its dependencies
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("privrelease").master(master)
    settings = {**DEFAULTS, "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J}", **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _connect(remote: str, conf: Mapping[str, str]) -> SparkSession:
    """A Spark Connect client session on ``remote`` with ``RUNTIME``'s defaults and ``conf``
    (``spark_session``)."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    builder = ConnectSession.builder.remote(remote)
    for key, value in {**{key: DEFAULTS[key] for key in RUNTIME}, **conf}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()  # pyright: ignore[reportReturnType]  # a Connect session: the same API
