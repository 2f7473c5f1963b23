"""The Dagster layer: wires the core and the release store into assets, checks, sensors and a release job.

All algorithms stay in ``core``; all SQL of the release store in ``storage``. Entry points:
``release_definitions`` (one protected table's definitions) and ``run_release`` (one release, in-process).
"""

from .factory import release_definitions, run_release
from .resources import ReleaseStoreResource
from .source import DuckDBSource, FrameSource

__all__ = ["DuckDBSource", "FrameSource", "ReleaseStoreResource", "release_definitions", "run_release"]
