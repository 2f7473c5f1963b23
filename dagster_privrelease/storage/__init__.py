"""The release store: one DuckDB file per protected table, laid out as the DuckDB contract (``docs/duckdb.md``)
says.

Two schemas. ``private`` never leaves the publisher:

- ``snapshot(release_id, <id>, <quasi-identifiers>, <non-identifiers>, <sensitive>)``: T(j), written once;
- ``hosting(release_id, <id>, group_id)``: each genuine tuple's hosting group (Xiao-Tao Def. 2);
- ``sensitive_domain(value, rank)``: the order of the sensitive values, so codes never move;
- ``columns(position, column_name, role, sql_type)``: the table's columns as first staged (schema drift check);
- ``digest(release_id, digest)``: a hash of each published release's content (idempotent re-publication);
- ``candidate_release``, ``candidate_counterfeit``, ``candidate_hosting``, ``candidate_meta``: the staged
  candidate of a release, before the judge lets it out; ``candidate_set``: the judge's memo;
- ``state_<name>(release_id, ...)`` and ``candidate_state_<name>``: a model's private state (``Release.state``)
  and the frames its stages keep with a staged release; opaque to the store.

``published`` is what goes out: ``release``, ``counterfeit`` (R(j), Xiao-Tao Def. 3), ``domain(attribute, value,
rank)`` (the leaf order of each categorical quasi-identifier) and ``manifest`` (one row per release).

The package along its seams: ``connection`` (opening a file under another process's lock, transactions, the SQL
primitives), ``schema`` (DDL, recorded columns, drift, domains), ``write`` (stage, candidate, publish, discard)
and ``read`` (previous release, history, manifest). ``ReleaseStore`` is the read and the write side together.
"""

from __future__ import annotations

from .connection import open_duckdb, quote, unreadable
from .read import PublishedRelease, StoreReader, read_manifest, read_published
from .schema import sql_type
from .write import StoreWriter, frame_digest, release_digest

__all__ = ["PublishedRelease", "ReleaseStore", "frame_digest", "open_duckdb", "quote", "read_manifest",
           "read_published", "release_digest", "sql_type", "unreadable"]


class ReleaseStore(StoreReader, StoreWriter):
    """The DuckDB file of one protected table (``path``) under its release spec (``spec``).

    Release ids start at 1 and increase by 1; a release is staged (its snapshot), then a candidate is staged,
    then published. Each method opens the file for its own duration, so several processes can take turns
    (``retries`` and ``backoff``: how long a call waits for another process's lock, ``open_duckdb``), unless
    called inside a ``session()`` of the file, which keeps one connection open (and the file locked) for every
    store object of that file in the thread: ``orchestration.run_release`` and the CLI's ``release`` hold one
    for the whole release, each Dagster step one for its own body.

    Args:
        path: the DuckDB file (created on first use).
        spec: the table's spec; a store keeps the columns and domains it was first staged with and refuses a
            spec that drifts from them.
        retries: how many times a call retries a file locked by another process (``open_duckdb``).
        backoff: the first wait between those retries, in seconds, doubled each time.

    Raises:
        StoreError: the file is locked by another process past the retries, or the spec drifted.

    Example:
        ```python
        from dagster_privrelease import ReleaseStore, load_spec

        store = ReleaseStore("patients_releases.duckdb", load_spec("specs/patients.yaml"))
        print(store.release_ids(), store.manifest())
        ```
    """
