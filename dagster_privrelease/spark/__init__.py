"""Apache Spark behind the partition seam (``core.partitioned``), installed with the ``[spark]`` extra.

``SparkBackend(session)`` runs a kernel's partitions on Spark's executors; ``spark_session`` makes a quiet local,
cluster or Spark Connect session. Importing this package imports pyspark; nothing else in the package does, except
through here (``orchestration.resources.PrivreleaseBackend`` when its kind is "spark").
"""

from .backend import SparkBackend
from .session import spark_session

__all__ = ["SparkBackend", "spark_session"]
