"""The Spark session the backend runs in: local (``local[2]``), a cluster master, or Spark Connect.

Quiet and headless by default: no Spark UI, logs at ERROR, Arrow for every transfer between Python and the JVM,
the workers on this interpreter (``PYSPARK_PYTHON``, when unset) so they import the same package; ``JAVA_HOME``
from the ``java`` on the PATH when unset. A session is process-wide (``getOrCreate``): a second call returns it.
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

#: Settings every session gets unless ``conf`` overrides them.
DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.shuffle.partitions": "8",
}


def spark_session(master: str = "local[2]", remote: str | None = None,
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """A Spark session on ``master``, or on the Spark Connect server at ``remote`` (``sc://host:port``) when given;
    ``conf`` over ``DEFAULTS``. Starting a local JVM takes a few seconds, once per process."""
    if "JAVA_HOME" not in os.environ and (java := shutil.which("java")):
        os.environ["JAVA_HOME"] = str(Path(java).resolve().parent.parent)
    builder = SparkSession.builder.appName("privrelease")
    builder = builder.remote(remote) if remote else builder.master(master)
    if not remote:  # the workers run this interpreter, so they import this package and its dependencies
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    local = {} if remote else {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J}"}
    settings = {**DEFAULTS, **local, **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if not remote:
        session.sparkContext.setLogLevel("ERROR")
    return session
