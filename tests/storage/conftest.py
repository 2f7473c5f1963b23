"""A small protected table, its spec and a store to put it in, for the tests of the release store."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dagster_privrelease.core.release import Release, build_release, release_rng
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.storage import ReleaseStore
from dagster_privrelease.testing.contract import CLINIC

#: The contract suite's clinic table under the name "clinic", published with k-anonymity.
SPEC = {**CLINIC, "name": "clinic", "model": {"name": "k_anonymity", "k": 2}}


def snapshot(ids, sexes=("F", "M"), diseases=("flu", "hiv", "gastritis"), seed=0) -> pd.DataFrame:
    """A small synthetic table with one row per id."""
    rng = np.random.default_rng(seed)
    n = len(ids)
    return pd.DataFrame({
        "pid": np.asarray(ids, dtype=np.int64),
        "age": rng.integers(20, 70, n),
        "sex": rng.choice(list(sexes), n),
        "region": rng.choice(["n1", "n2", "s1", "s2"], n),
        "visits": rng.integers(0, 9, n),
        "disease": rng.choice(list(diseases), n),
    })


def candidate(store: ReleaseStore, release_id: int, fakes: int = 0) -> Release:
    """A homogeneous release of the staged snapshot: pairs by age (a 2-anonymous partition), ``fakes`` counterfeits
    in group 0, and a small model state."""
    snap = store.snapshot(release_id)
    spec = store.bound_spec(snap)
    order = np.argsort(snap["age"].to_numpy(), kind="stable")
    groups = np.empty(len(snap), dtype=np.int64)
    groups[order] = np.minimum(np.arange(len(snap)) // 2, len(snap) // 2 - 1)
    counterfeits = pd.DataFrame({"group_id": [0] * fakes, "disease": ["flu"] * fakes}) if fakes else None
    state = {"signature": pd.DataFrame({"pid": snap["pid"], "bucket": groups})}
    return build_release(snap, groups, spec, release_rng(spec, release_id), counterfeits, state=state)


@pytest.fixture
def store(tmp_path) -> ReleaseStore:
    """A store whose calls share one connection (opening a DuckDB file costs ~50 ms); the locked-file test opens
    the file afresh on every call."""
    with ReleaseStore(tmp_path / "clinic.duckdb", parse_spec(SPEC)).session() as store:
        yield store


def publish(store: ReleaseStore, release_id: int, rows: pd.DataFrame, fakes: int = 0) -> Release:
    """Stage ``rows`` as T(release_id) and publish ``candidate`` of it."""
    store.stage_snapshot(release_id, rows)
    release = candidate(store, release_id, fakes)
    store.publish(release_id, release, {"k_anonymity": True}, {"lm": 0.25})
    return release


def published_rows(store: ReleaseStore) -> int:
    """The number of rows in published.release."""
    with store.connect() as con:
        return con.execute("SELECT count(*) FROM published.release").fetchall()[0][0]


def probe(db: Path) -> str:
    """Another process opening the store at ``db`` (one retry): "opened", or its refusal."""
    code = textwrap.dedent(f"""
        from dagster_privrelease.errors import StoreError
        from dagster_privrelease.storage import open_duckdb
        try:
            open_duckdb({str(db)!r}, retries=1, backoff=0.01).close()
            print("opened")
        except StoreError as exc:
            print(exc)
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          check=True).stdout.strip()
