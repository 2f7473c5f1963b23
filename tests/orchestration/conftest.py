"""Fixtures of the Dagster tests: a small synthetic table, its spec, a source DuckDB file, a Dagster instance."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml

DISEASES = ["flu", "gastritis", "dyspepsia", "bronchitis", "pneumonia"]


def people(n: int, seed: int = 0, start: int = 0) -> pd.DataFrame:
    """``n`` synthetic people with ids ``start..start+n-1``: age, sex, zipcode, a non-identifier, a disease."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "id": np.arange(start, start + n, dtype=np.int64),
        "age": rng.integers(20, 70, n).astype(np.int64),
        "sex": rng.choice(["F", "M"], n),
        "zipcode": rng.integers(10000, 60000, n).astype(np.int64),
        "visits": rng.integers(0, 9, n).astype(np.int64),
        "disease": rng.choice(DISEASES, n),
    })


def write_spec(folder: Path, model: dict, name: str = "patients") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name,
        "id": "id",
        "sensitive": "disease",
        "quasi_identifiers": {
            "age": {"type": "numeric", "min_width": 1},
            "sex": {"type": "categorical"},
            "zipcode": {"type": "numeric"},
        },
        "non_identifiers": ["visits"],
        "model": model,
    }))
    return path


def write_source(path: Path, frame: pd.DataFrame, table: str = "source.people") -> None:
    """Replace ``table`` in the DuckDB file ``path`` with ``frame``."""
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA IF NOT EXISTS source")
        con.register("frame", frame)
        con.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM frame")


@pytest.fixture
def spec_path(tmp_path: Path) -> Path:
    return write_spec(tmp_path, {"name": "k_anonymity", "k": 3})


#: Instance settings without compute-log capture: Dagster's local capture starts a ``tail`` and a watcher
#: process for each of a step's streams (about 65 ms of CPU per step); no test reads the captured logs.
NO_COMPUTE_LOGS = {
    "compute_logs": {"module": "dagster._core.storage.noop_compute_log_manager", "class": "NoOpComputeLogManager"}
}


@pytest.fixture(scope="session")
def empty_instance(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of an empty ``instance`` (its dagster.yaml, run and schedule databases), made once per test
    process: a copy of it opens in 0.2 s of CPU where making the databases costs 0.8 s."""
    folder = tmp_path_factory.mktemp("empty_instance")
    with dg.instance_for_test(overrides=NO_COMPUTE_LOGS, temp_dir=str(folder)):
        pass
    return folder


@pytest.fixture
def instance(tmp_path: Path, empty_instance: Path) -> Iterator[dg.DagsterInstance]:
    """A persistent Dagster instance of the test's own (sensor ticks need one), without compute-log capture: a copy
    of ``empty_instance`` in ``tmp_path/dagster_instance``."""
    folder = shutil.copytree(empty_instance, tmp_path / "dagster_instance")
    with dg.instance_for_test(overrides=NO_COMPUTE_LOGS, temp_dir=str(folder)) as inst:
        yield inst


@contextmanager
def locked_by_another_process(path: Path) -> Iterator[int]:
    """A child process holding the DuckDB file ``path`` open (locked) until the block ends; yields its PID."""
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, time
            con = duckdb.connect({str(path)!r})
            print("locked", flush=True)
            time.sleep(60)
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()
