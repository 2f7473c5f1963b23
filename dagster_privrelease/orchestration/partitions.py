"""Partition keys of a protected table, and the partition a step works on.

One dynamic partition per release. Keys are zero-padded and increase, so they sort in release order. A key is a release id for a plain source
table and a log position for a change log (positions have gaps), so a key's release id is its rank among the
table's keys (``release_number``), and the release before it is the key just below it (``predecessor``).
Dagster has no self-dependency for dynamic partitions, so a step refuses (``Partition.require``) while its
predecessor is not far enough along. Every step opens with ``step``: its refusals, its partition, and one store
session for the step's whole body.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg
import duckdb

from ..core.progress import LineReporter, reporting
from ..errors import PrivReleaseError, StoreError
from ..storage import unreadable

if TYPE_CHECKING:
    from dagster import AssetCheckExecutionContext, AssetExecutionContext

    from ..storage import ReleaseStore
    from .translator import ReleaseTable

#: Width of a partition key: keys are zero-padded so that they sort in release order.
KEY_WIDTH = 6


def partition_key(position: int) -> str:
    """The partition key of a release id or log position: zero-padded, so keys sort as numbers do.
    StoreError for a position below 1."""
    if position < 1:
        raise StoreError(f"partition key: a release id or log position is at least 1, got {position}")
    return f"{position:0{KEY_WIDTH}d}"


def missing_keys(keys: list[str], count: int) -> list[str]:
    """The keys to add after the highest of ``keys`` so that the table has ``count`` of them, each one past the
    one before: the partitions of releases published without one (by ``run_release`` on an instance of its own,
    as ``privrelease release`` does); none when ``keys`` already number ``count``."""
    top = max((int(k) for k in keys), default=0)
    return [partition_key(top + i) for i in range(1, count - len(keys) + 1)]


def predecessor(keys: list[str], key: str) -> str | None:
    """The partition key released just before ``key`` (keys sort in release order), or None for the first."""
    earlier = sorted(k for k in keys if k < key)
    return earlier[-1] if earlier else None


def release_number(keys: list[str], key: str) -> int:
    """The release id of partition ``key``: its rank among the partition keys (releases are numbered 1, 2, ...
    by the store, while a change-log source's keys are log positions with gaps). StoreError when ``key`` is not
    one of ``keys``."""
    if key not in keys:
        raise StoreError(f"partition {key!r} is not a partition of this table; add it first (the sensors do)")
    return sorted(keys).index(key) + 1


@dataclass(frozen=True)
class Partition:
    """The release one asset or check works on: the table's store, the table's partition keys, this partition's
    key and its release id. Every step of a table opens with ``Partition.of(context, table)``."""

    table: str
    store: ReleaseStore
    keys: list[str]
    key: str
    release_id: int

    @classmethod
    def of(cls, context: AssetExecutionContext | AssetCheckExecutionContext, table: ReleaseTable) -> Partition:
        """The partition ``context`` runs for; StoreError when its key is not a partition of ``table``."""
        keys = list(context.instance.get_dynamic_partitions(table.partitions_name))
        store = getattr(context.resources, table.store).store()
        key = context.partition_key
        return cls(table.name, store, keys, key, release_number(keys, key))

    def require(self, done: bool, what: str) -> None:
        """Refuse (``Failure`` naming it) to go on while this release's predecessor is not ``what`` yet (``done``
        is False); the first release has no predecessor and always goes on."""
        before = predecessor(self.keys, self.key)
        if before is not None and not done:
            raise dg.Failure(
                description=f"{self.table} release {self.key}: its predecessor {before} is not {what}; materialise "
                f"{before} first (releases are made in key order)",
                metadata={"predecessor": before},
                allow_retries=False,
            )

    def require_published(self) -> None:
        """``require`` that release ``release_id - 1`` is published (what the model reads of the past)."""
        self.require(self.release_id - 1 in self.store.release_ids(), "published")


class Refusal(dg.Failure):
    """The ``Failure`` of a step that refused: its description is the reason and what would make the release
    publishable, and it carries the package's error (``error``) for ``run_release``, outside the exception chain:
    Dagster shows a failure's chain of causes, each with its own stack, and the run's summary should be the reason
    alone."""

    def __init__(self, description: str, error: PrivReleaseError):
        super().__init__(description=description, metadata={"refusal": type(error).__name__}, allow_retries=False)
        self.error = error


@contextmanager
def refusals(context: AssetExecutionContext | AssetCheckExecutionContext, table: ReleaseTable) -> Iterator[None]:
    """Turn the package's own errors raised inside (an expected refusal: a bad snapshot, a model that cannot
    publish, an out-of-order release, a locked store) into a ``Refusal`` whose description is the reason,
    ``<table> release <key>: <message>``, without retries (the same input is refused again); a DuckDB error
    likewise, as a StoreError re-worded from names (``storage.unreadable``). It is raised without a cause or a
    context (``from None``), so the step's failure and the run's summary show the reason once, with no chained
    error (an error of DuckDB's may quote stored values); ``run_release`` finds the error on ``Refusal.error``."""
    try:
        yield
    except (PrivReleaseError, duckdb.Error) as exc:
        if isinstance(exc, PrivReleaseError):
            reason = type(exc)(str(exc))
        else:
            reason = StoreError(unreadable(getattr(context.resources, table.store).database, "release store", exc))
        raise Refusal(f"{table.name} release {context.partition_key}: {reason}", reason) from None


@contextmanager
def step(context: AssetExecutionContext | AssetCheckExecutionContext, table: ReleaseTable) -> Iterator[Partition]:
    """What every asset and check of ``table`` opens with: the ``Partition`` it works on, inside ``refusals``, with
    one session of the release store (``StoreConnection.session``) for the whole block, so a step opens the store
    file once however many reads and writes it makes (and none when the run is already inside a session of the
    file, as ``run_release``'s is). The store stays locked for the step, as for any of its transactions. The
    release's steps run inside (``core.progress``: staging, the model's phases, the judge's verifiers and attacks,
    publication) are logged to the run's event log as they end, one line each (``<step>: <seconds> s``)."""
    with refusals(context, table), reporting(LineReporter(context.log.info)):
        part = Partition.of(context, table)
        with part.store.session():
            yield part
