"""The example code location: loads fast without touching data, validates, and its demo stream changes rows."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_workspace_validates_without_touching_data(tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "PRIVRELEASE_HOME": str(home), "DAGSTER_HOME": str(tmp_path)}
    (tmp_path / "dagster.yaml").write_text((ROOT / "assets" / "dagster.yaml").read_text())
    done = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "All code locations passed validation" in done.stdout + done.stderr
    assert not home.exists()  # loading the code location created no file and fetched no data


def test_instance_settings_limit_each_table_to_one_run():
    settings = yaml.safe_load((ROOT / "assets" / "dagster.yaml").read_text())
    with dg.instance_for_test(overrides=settings) as instance:
        pools = instance.get_concurrency_config().pool_config
        assert pools.default_pool_limit == 1
        assert pools.pool_granularity.value == "run"


def test_definitions_hold_both_demos():
    from assets import defs

    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    for table in ("adult", "census_kdd"):
        assert {f"{table}/snapshot", f"{table}/release_candidate", f"{table}/published_release"} <= keys
        assert defs.resolve_job_def(f"{table}_release").executor_def.name == "in_process"
        assert defs.resolve_sensor_def(f"{table}_source_changed")
        assert defs.resolve_sensor_def(f"{table}_release_requests")
        assert defs.resolve_job_def(f"{table}_demo_changes")
        published = defs.resolve_assets_def(dg.AssetKey([table, "published_release"]))
        assert published.node_def.pool == f"privrelease_{table}"


def test_demo_stream_inserts_deletes_and_updates(tmp_path, adult, monkeypatch):
    from dagster_privrelease import demo as demos

    demo = demos.Demo("adult", lambda: adult, base=2_000, batch=100, update_fraction=0.05)
    monkeypatch.setitem(demos.DEMOS, "adult", demo)
    first = demos.demo_changes("adult", tmp_path)
    assert first == {"inserts": 2_000, "deletes": 0, "updates": 0}
    step = demos.demo_changes("adult", tmp_path)
    assert (step["inserts"], step["deletes"]) == (100, 100)
    assert step["updates"] == round(0.05 * 1_900)
    with duckdb.connect(str(tmp_path / "adult" / "data.duckdb"), read_only=True) as con:
        counts = "SELECT (SELECT count(*) FROM source.people), (SELECT count(*) FROM source.pool)"
        rows, pool = con.execute(counts).fetchone()
    assert rows == 2_000 and pool == len(adult) - 2_100
