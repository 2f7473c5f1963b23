"""Where the partition seam's backend is chosen (``core.partitioned``): the pipeline runs a model's publish inside
``using(backend)``, the steps name the backend, and the local backend's threads come from ``PRIVRELEASE_WORKERS``,
refused in one line when unreadable, without publishing anything."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dagster_privrelease import cli, pipeline
from dagster_privrelease.core.partitioned import LocalBackend, Seeds
from dagster_privrelease.core.progress import LineReporter, reporting
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.storage import ReleaseStore

SPEC = {"name": "ward", "id": "pid", "sensitive": "disease", "model": {"name": "m_invariance", "m": 3},
        "quasi_identifiers": {"age": {"type": "numeric"}, "zip": {"type": "numeric"}}}


def ward(ids: range, seed: int) -> pd.DataFrame:
    """People with zero-padded text ids, six diseases in equal numbers."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"pid": [f"{i:04d}" for i in ids], "age": rng.integers(20, 90, len(ids)),
                         "zip": rng.integers(1000, 1100, len(ids)),
                         "disease": [f"d{i % 6}" for i in range(len(ids))]})


class Counting(LocalBackend):
    """The local backend under another name, counting its runs."""

    name = "counting"

    def __init__(self) -> None:
        super().__init__(workers=3)
        self.runs = 0

    def run(self, kernel, columns, seeds: Seeds) -> np.ndarray:
        self.runs += 1
        return super().run(kernel, columns, seeds)


@pytest.fixture
def store(tmp_path) -> ReleaseStore:
    (tmp_path / "ward.yaml").write_text(yaml.safe_dump(SPEC))
    return ReleaseStore(tmp_path / "ward.duckdb", load_spec(tmp_path / "ward.yaml"))


def test_the_candidate_is_made_on_the_backend_passed_in_and_the_step_names_it(store):
    first = ward(range(120), 1)
    with store.session():
        pipeline.stage(store, 1, first)
        heard: list[str] = []
        backend = Counting()
        with reporting(LineReporter(heard.append)):
            candidate = pipeline.make_candidate(store, 1, backend=backend)
        assert backend.runs == 1  # the split of every bucket, in one run
        assert "model / split on counting" in [line.split(":")[0] for line in heard]
        again = pipeline.make_candidate(store, 1, backend=LocalBackend(workers=1))
    pd.testing.assert_frame_equal(candidate.table, again.table)
    pd.testing.assert_frame_equal(candidate.hosting, again.hosting)


def release(tmp_path, snapshot: pd.DataFrame, workers: str, monkeypatch):
    """``privrelease release`` of ``snapshot`` with ``PRIVRELEASE_WORKERS=workers``."""
    monkeypatch.setenv("PRIVRELEASE_WORKERS", workers)
    snapshot.to_csv(tmp_path / "snapshot.csv", index=False)
    return CliRunner().invoke(cli.app, ["release", "--spec", str(tmp_path / "ward.yaml"), "--db",
                                        str(tmp_path / "ward.duckdb"), "--snapshot", str(tmp_path / "snapshot.csv")])


def published(tmp_path) -> pd.DataFrame:
    with duckdb.connect(str(tmp_path / "ward.duckdb"), read_only=True) as con:
        return con.sql("SELECT * EXCLUDE (created_at) FROM published.manifest ORDER BY release_id").df()


def test_an_unreadable_worker_count_is_refused_in_one_line_and_the_next_good_run_publishes(tmp_path, monkeypatch,
                                                                                            store):
    first = ward(range(120), 1)
    refused = release(tmp_path, first, "two", monkeypatch)
    assert refused.exit_code != 0
    assert "PRIVRELEASE_WORKERS: expected a positive integer (the local backend's threads), got 'two'" in \
        refused.output
    assert "Traceback" not in refused.output
    assert [line for line in refused.output.splitlines() if not line.startswith("staging: ")] == [
        "error: PRIVRELEASE_WORKERS: expected a positive integer (the local backend's threads), got 'two'"]
    assert published(tmp_path).empty
    assert release(tmp_path, first, "2", monkeypatch).exit_code == 0
    assert published(tmp_path)["release_id"].tolist() == [1]

