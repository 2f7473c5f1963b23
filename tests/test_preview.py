"""Preview (``pipeline.preview``, ``privrelease preview``): what the next release would publish, with nothing
written to the store."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from dagster_privrelease import cli, pipeline
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.errors import NotPublishable
from dagster_privrelease.storage import ReleaseStore
from dagster_privrelease.testing.contract import CLINIC, clinic_people

SPEC = {**CLINIC, "name": "clinic", "model": {"name": "m_invariance", "m": 2}}


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Rich tables 200 columns wide, so that names are never wrapped in the captured output."""
    monkeypatch.setattr(cli, "console", Console(width=200))
    monkeypatch.setattr(cli, "errors", Console(width=200, stderr=True))


def people() -> pd.DataFrame:
    """40 people with text ids ``p000``..``p039``; release j publishes rows 4(j-1) to 4(j-1)+29."""
    frame = clinic_people(40, np.random.default_rng(1))
    frame.insert(0, "pid", [f"p{i:03d}" for i in range(40)])
    return frame


def rows(j: int) -> pd.DataFrame:
    return people().iloc[4 * (j - 1): 4 * (j - 1) + 30].reset_index(drop=True)


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """A store with releases 1 and 2 published, made once for the module."""
    store = ReleaseStore(tmp_path_factory.mktemp("preview") / "clinic.duckdb", parse_spec(SPEC))
    with store.session():
        for j in (1, 2):
            pipeline.release_next(store, rows(j))
    return store.path


@pytest.fixture
def store(published, tmp_path) -> ReleaseStore:
    """A copy of ``published`` of the test's own."""
    return ReleaseStore(shutil.copy(published, tmp_path / "clinic.duckdb"), parse_spec(SPEC))


def contents(path: Path) -> dict[str, tuple]:
    """Every table of the store, private and published: its row count and the sum of its rows' hashes."""
    with duckdb.connect(str(path), read_only=True) as con:
        tables = con.sql("SELECT table_schema || '.' || table_name FROM information_schema.tables "
                         "WHERE table_type = 'BASE TABLE' ORDER BY 1").fetchall()
        return {t: con.sql(f"SELECT count(*), sum(hash(t)) FROM {t} AS t").fetchall()[0] for (t,) in tables}


def test_preview_writes_nothing_and_the_real_release_publishes_what_it_showed(store):
    before = contents(store.path)
    shown = pipeline.preview(store, rows(3))
    assert contents(store.path) == before
    assert shown["outcome"] == "publishable" and shown["release_id"] == 3
    assert (shown["inserts"], shown["deletes"]) == (4, 4)
    assert {r.name for r in shown["reports"]} >= {"m_invariance", "intersection"} and all(r.ok for r in shown["reports"])
    with store.session():
        real = pipeline.release_next(store, rows(3))
    assert real["outcome"] == "published" and real["release_id"] == 3
    for key in ("rows", "groups", "counterfeits", "inserts", "deletes", "updates"):
        assert real[key] == shown[key], key
    assert real["utility"] == pytest.approx(shown["utility"], nan_ok=True)
    assert store.release_ids() == [1, 2, 3]
    assert pipeline.preview(store, rows(3)) == {"release_id": 3, "outcome": "unchanged"}


def test_a_refused_preview_leaves_the_store_as_it_was_and_the_next_release_publishes(store):
    before = contents(store.path)
    refused = rows(3).assign(disease="flu")  # everyone the same disease: no group can be 2-invariant
    copy = ReleaseStore(shutil.copy(store.path, store.path.with_name("copy.duckdb")), store.spec)
    with pytest.raises(NotPublishable) as raised:  # what the real release says
        pipeline.release_next(copy, refused)
    shown = pipeline.preview(store, refused)
    assert shown["outcome"] == "refused" and shown["reason"] == str(raised.value)
    assert contents(store.path) == before
    with store.session():
        assert pipeline.release_next(store, rows(3))["outcome"] == "published"


def test_preview_of_a_store_that_does_not_exist_creates_no_file(tmp_path):
    store = ReleaseStore(tmp_path / "new.duckdb", parse_spec(SPEC))
    shown = pipeline.preview(store, rows(1))
    assert shown["outcome"] == "publishable" and shown["release_id"] == 1 and shown["inserts"] == 30
    assert not list(tmp_path.iterdir())


def test_the_command_shows_the_verdicts_or_the_refusal_in_one_line(store, tmp_path):
    spec = tmp_path / "clinic.yaml"
    spec.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    rows(3).to_parquet(tmp_path / "next.parquet")
    rows(3).assign(disease="flu").to_parquet(tmp_path / "bad.parquet")
    rows(3).to_csv(tmp_path / "text.csv", index=False)  # visits read as text: refused by the store's types
    before = contents(store.path)
    runner = CliRunner()
    base = ["preview", "--spec", str(spec), "--db", str(store.path), "--snapshot"]
    drift = runner.invoke(cli.app, [*base, str(tmp_path / "text.csv")])
    assert drift.exit_code == 1 and drift.output.startswith(f"error: {store.path}: schema drift in the snapshot")
    shown = runner.invoke(cli.app, [*base, str(tmp_path / "next.parquet")])
    assert shown.exit_code == 0, shown.output
    assert f"preview: release 3 would be published to {store.path} (nothing was written)" in shown.output
    assert "the judge's verdicts on release 3" in shown.output and "m_invariance" in shown.output
    refused = runner.invoke(cli.app, [*base, str(tmp_path / "bad.parquet")])
    assert refused.exit_code == 1
    (line,) = refused.output.strip().splitlines()
    assert line.startswith("refused: ") and line.endswith(f"(preview: nothing was written to {store.path})")
    assert contents(store.path) == before
    assert "p0" not in shown.output + refused.output  # no id in what the command prints
