"""Error types users can catch. Every message names the column, row, key or release and the rule."""


class PrivReleaseError(Exception):
    """Base class of every error this package raises on purpose."""


class SpecError(PrivReleaseError):
    """The release spec is invalid: a key is missing, unknown, or out of range."""


class SnapshotError(PrivReleaseError):
    """A snapshot violates the spec: missing column, null, unknown value, duplicate id, bad type."""


class NotPublishable(PrivReleaseError):
    """The model refuses to publish this snapshot; the message says why and what would make it publishable."""


class StoreError(PrivReleaseError):
    """The release store refuses an operation (out-of-order release, locked file, schema drift)."""


class DatasetUnavailable(PrivReleaseError):
    """A bundled real dataset could not be fetched or verified (no network and no cache, bad checksum)."""


class BackendError(PrivReleaseError):
    """A backend (Spark) failed to run a step of a release: the message names the step and how many partitions or
    rows it had, never the engine's own text (it may quote stored values); nothing was published."""
