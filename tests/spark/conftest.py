"""One Spark ``local[2]`` session for the whole test run (``spark``), skipped with the reason when the ``[spark]``
extra or Java is missing.

The kernels these tests ship to Spark's Python workers live in test modules, which a worker may not import the way
pytest did: they travel by value (``cloudpickle.register_pickle_by_value``), the package's own by reference.
"""

from __future__ import annotations

import os
import shutil
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
    session = spark_session("local[2]", conf={"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()
