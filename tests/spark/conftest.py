"""One Spark ``local[2]`` session for the whole test run (``spark``), skipped with the reason when the ``[spark]``
extra or Java is missing; ``connect``, a Spark Connect client of a Connect server started on demand in that same
JVM (on a free port chosen when the session starts), so the run still starts one JVM.

The kernels these tests ship to Spark's Python workers live in test modules, which a worker may not import the way
pytest did: they travel by value (``cloudpickle.register_pickle_by_value``), the package's own by reference.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The run's Spark session (``dagster_privrelease.spark.spark_session("local[2]")``), stopped at the end."""
    pytest.importorskip("pyspark", reason="pyspark is not installed (the [spark] extra)")
    if "JAVA_HOME" not in os.environ and shutil.which("java") is None:
        pytest.skip("no Java on the PATH and JAVA_HOME unset: Spark needs Java 17")
    from pyspark import cloudpickle

    from dagster_privrelease.spark import spark_session

    for name in [m for m in sys.modules if m == "tests.partitioned_checks" or m.startswith("tests.spark.")]:
        cloudpickle.register_pickle_by_value(sys.modules[name])
    with socket.socket() as probe:  # a free port for the Connect server, should a test start it
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]
    session = spark_session("local[2]", conf={"spark.sql.shuffle.partitions": "4",
                                               "spark.connect.grpc.binding.port": str(port)})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connect(spark) -> object:
    """A Spark Connect session (``spark_session(remote=...)``) on a Connect server started in ``spark``'s JVM;
    skipped with the reason when the server cannot start here."""
    pytest.importorskip("grpc", reason="the Spark Connect client needs grpcio (pyspark[connect])")
    from dagster_privrelease.spark import spark_session

    port = spark.conf.get("spark.connect.grpc.binding.port")
    try:
        spark._jvm.org.apache.spark.sql.connect.service.SparkConnectService.start(spark._jsc.sc())
    except Exception as exc:  # no Connect server jar, or the port taken since
        pytest.skip(f"a Spark Connect server cannot start in this JVM ({type(exc).__name__})")
    return spark_session(remote=f"sc://localhost:{port}")
