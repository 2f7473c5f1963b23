"""The ``privrelease`` command on small synthetic tables (typer's CliRunner, files under tmp_path)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from dagster_privrelease import cli
from dagster_privrelease.core.models import attack_history
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.core.stream import split_base_pool, stream
from dagster_privrelease.storage import ReleaseStore

RESOURCES = Path(__file__).resolve().parents[1] / "resources"

SPEC = {
    "name": "clinic",
    "id": "pid",
    "sensitive": "disease",
    "quasi_identifiers": {"age": {"type": "numeric"}, "sex": {"type": "categorical"}},
    "non_identifiers": ["visits"],
    "model": {"name": "l_diversity", "l": 2},
}

#: Two releases in which Alice (pid 1) stays in a group with Bob, then with Erin: the intersection of her two
#: groups' sensitive values is {flu} (Xiao-Tao §1, the attack that motivates m-invariance). Bob leaving is a
#: critical absence, Erin arriving a critical addition.
FIRST = pd.DataFrame({"pid": [1, 2, 3, 4], "age": [20, 21, 60, 61], "sex": ["F", "M", "F", "M"],
                      "visits": [1, 2, 3, 4], "disease": ["flu", "hiv", "flu", "hiv"]})
THIRD = pd.DataFrame({"pid": range(6), "age": [20, 21, 22, 60, 61, 62], "sex": ["F", "M"] * 3,
                      "visits": range(6), "disease": ["flu", "hiv", "gastritis"] * 2})
SECOND = pd.DataFrame({"pid": [1, 5, 3, 4], "age": [20, 22, 60, 61], "sex": ["F", "F", "F", "M"],
                       "visits": [1, 5, 3, 4], "disease": ["flu", "gastritis", "flu", "hiv"]})


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Rich tables 200 columns wide, so that names are never wrapped in the captured output."""
    monkeypatch.setattr(cli, "console", Console(width=200))
    monkeypatch.setattr(cli, "errors", Console(width=200, stderr=True))


@pytest.fixture
def files(tmp_path):
    spec = tmp_path / "clinic.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    FIRST.to_csv(tmp_path / "first.csv", index=False)
    THIRD.to_csv(tmp_path / "third.csv", index=False)
    SECOND.to_parquet(tmp_path / "second.parquet")
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(cli.app, [str(a) for a in args])


def released(files):
    db = files / "clinic.duckdb"
    return run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "first.csv")


def test_release_then_show(files):
    db = files / "clinic.duckdb"
    first = released(files)
    assert first.exit_code == 0, first.output
    assert "release 1 published" in first.output and "l_diversity" in first.output
    second = run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "second.parquet")
    assert second.exit_code == 0, second.output
    assert "release 2 published" in second.output
    assert "intersection failed" in second.output  # reported, not blocking, for the l-diversity baseline
    shown = run("show", "--db", db)
    assert shown.exit_code == 0, shown.output
    assert "2 release(s)" in shown.output and "l=2" in shown.output and "age, sex" in shown.output
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT release_id, rows FROM published.manifest ORDER BY 1").fetchall() == [(1, 4), (2, 4)]
    assert run("show", "--db", db, "--spec", files / "clinic.yaml").exit_code == 0


def test_attack_exits_non_zero_on_disclosure(files):
    db = files / "clinic.duckdb"
    released(files)
    assert run("attack", "--spec", files / "clinic.yaml", "--db", db).exit_code == 0  # one release: no disclosure
    run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "second.parquet")
    result = run("attack", "--spec", files / "clinic.yaml", "--db", db, "--attack", "intersection")
    assert result.exit_code == 1
    assert "intersection" in result.output and "broken" in result.output and "disclosed=1" in result.output
    unknown = run("attack", "--spec", files / "clinic.yaml", "--db", db, "--attack", "telepathy")
    assert unknown.exit_code == 2 and "telepathy" in unknown.output


def test_verify_exits_non_zero_when_a_guarantee_is_broken(files):
    db = files / "clinic.duckdb"
    released(files)
    result = run("verify", "--spec", files / "clinic.yaml", "--db", db)
    assert result.exit_code == 0, result.output
    assert "l_diversity" in result.output and "holds" in result.output
    with duckdb.connect(str(db)) as con:  # tamper: every published row says flu, so no group is 2-diverse
        con.execute("UPDATE published.release SET disease = 'flu'")
    result = run("verify", "--spec", files / "clinic.yaml", "--db", db)
    assert result.exit_code == 1
    assert "broken" in result.output


def test_refusals_exit_non_zero_with_the_reason(files):
    db = files / "clinic.duckdb"
    bad = FIRST.copy()
    bad.loc[2, "pid"] = 1
    bad.to_csv(files / "bad.csv", index=False)
    result = run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "bad.csv")
    assert result.exit_code == 1
    assert "error:" in result.stderr and "duplicate id(s) [1]" in result.stderr
    (files / "broken.parquet").write_text("not parquet")
    result = run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "broken.parquet")
    assert result.exit_code == 1 and "cannot read the snapshot as PARQUET" in result.stderr
    result = run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "first.csv",
                 "--attributes", "age,height")
    assert result.exit_code == 1 and "['height'] are not quasi-identifiers" in result.stderr
    result = run("verify", "--spec", files / "clinic.yaml", "--db", files / "absent.duckdb")
    assert result.exit_code == 2 and "no release store there" in result.output
    result = run("show", "--db", db)
    assert result.exit_code == 0 and "0 release(s)" in result.output  # nothing was published


def test_discard_then_release_other_rows(files):
    db = files / "clinic.duckdb"
    strict = dict(SPEC, model={"name": "l_diversity", "l": 3})
    (files / "strict.yaml").write_text(yaml.safe_dump(strict))
    refused = run("release", "--spec", files / "strict.yaml", "--db", db, "--snapshot", files / "first.csv")
    assert refused.exit_code == 1 and "l=3 is larger than the 2 distinct values" in refused.stderr
    again = run("release", "--spec", files / "strict.yaml", "--db", db, "--snapshot", files / "third.csv")
    assert again.exit_code == 1 and "staged earlier from other rows" in again.stderr
    assert run("discard", "--spec", files / "strict.yaml", "--db", db, "--release", "1").exit_code == 0
    result = run("release", "--spec", files / "strict.yaml", "--db", db, "--snapshot", files / "third.csv")
    assert result.exit_code == 0, result.output


def test_demo_publishes_adult_through_dagster(adult, tmp_path, monkeypatch):
    """The demo runs the example code location: sensor ticks, release runs on a persistent instance the UI can
    open, m-invariance; a smaller stream than the default keeps the test short."""
    import assets

    monkeypatch.setitem(assets.DEMOS, "adult", assets.Demo("adult", lambda: adult, base=3_000, batch=200,
                                                           update_fraction=0.01))
    stale = tmp_path / "adult" / "releases.duckdb"
    stale.parent.mkdir()
    stale.write_text("an earlier demo")  # the demo starts over
    result = run("demo", "--home", tmp_path, "--releases", "2")
    assert result.exit_code == 0, result.output
    assert "dagster dev -w workspace.yaml" in result.output and str(stale) in result.output
    with duckdb.connect(str(stale), read_only=True) as con:
        query = "SELECT release_id, model, rows - counterfeits FROM published.manifest ORDER BY 1"
        rows = con.execute(query).fetchall()
    assert rows == [(1, "m_invariance", 3_000), (2, "m_invariance", 3_000)]
    with dg.DagsterInstance.from_config(str(tmp_path / ".dagster")) as instance:
        runs = instance.get_runs(dg.RunsFilter(job_name="adult_release"))
        assert sorted(r.tags["dagster/partition"] for r in runs) == ["000001", "000002"]
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)


@pytest.mark.slow
@pytest.mark.realdata
def test_census_kdd_stream_of_twenty_releases_through_the_cli(census_kdd, tmp_path):
    """Xiao-Tao's protocol on Census-KDD workers (T(1) 20,000 rows, r = 2,000, m = 4, the 7 QIs of
    resources/census_kdd.yaml): 20 releases published by ``privrelease release``, i.e. through the Dagster
    release job and its blocking checks, and then judged again: ``verify`` and ``attack`` on the store, and the
    intersection attack with every candidate set recomputed rather than read back from the store."""
    spec_path = RESOURCES / "census_kdd.yaml"
    spec = load_spec(spec_path)
    rng = np.random.default_rng(spec.seed)
    base, pool = split_base_pool(census_kdd[spec.columns], 20_000, rng)
    db = tmp_path / "census.duckdb"
    for i, snapshot in enumerate(stream(base, pool, 2_000, 20, rng), start=1):
        path = tmp_path / f"t{i}.parquet"
        snapshot.to_parquet(path)
        result = run("release", "--spec", spec_path, "--db", db, "--snapshot", path)
        assert result.exit_code == 0, (i, result.output, result.stderr)
    assert run("verify", "--spec", spec_path, "--db", db).exit_code == 0
    assert run("attack", "--spec", spec_path, "--db", db).exit_code == 0
    history = ReleaseStore(db, spec).history()
    assert history.release_ids == list(range(1, 21))
    (fresh,) = attack_history(dataclasses.replace(history, candidate_sets={}), ["intersection"])
    assert fresh.ok and fresh.summary["attacked"] > 20_000 and fresh.summary["min_candidates"] >= 4
