"""The example code location, the dg project ``examples/privrelease_demo``: loads without touching data, validates,
declares the demo tables of ``demo.py``, and its demo stream changes rows."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import yaml

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "examples" / "privrelease_demo"


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


def test_the_dg_project_declares_the_demo_tables_as_demo_py_does(tmp_path, monkeypatch):
    """The example dg project (a defs.yaml per demo table) loads the same definitions as ``demo.build_definitions``
    (what ``privrelease demo`` runs): the same assets, checks, sensors and jobs, the same files under
    ``$PRIVRELEASE_HOME``, and the location name under which the demo records its sensor ticks."""
    from dagster_privrelease import demo

    monkeypatch.setenv("PRIVRELEASE_HOME", str(tmp_path))
    monkeypatch.syspath_prepend(str(PROJECT / "src"))
    defs = dg.load_from_defs_folder(path_within_project=PROJECT / "src" / "privrelease_demo")
    python = demo.build_definitions(tmp_path)
    assert set(defs.resolve_all_asset_keys()) == set(python.resolve_all_asset_keys())
    assert defs.resolve_asset_graph().asset_check_keys == python.resolve_asset_graph().asset_check_keys
    assert {s.name for s in defs.sensors or []} == {s.name for s in python.sensors or []}
    assert {j.name for j in defs.jobs or []} == {j.name for j in python.jobs or []}
    assert {k: r.model_dump() for k, r in defs.resources.items()} == {
        k: r.model_dump() for k, r in python.resources.items()
    }
    for table in demo.DEMOS:
        assert defs.resolve_job_def(f"{table}_release").executor_def.name == "in_process"
        published = defs.resolve_assets_def(dg.AssetKey([table, "published_release"]))
        assert published.node_def.pool == f"privrelease_{table}"
    (location,) = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]
    assert location["python_module"]["location_name"] == demo.LOCATION
    assert not any(tmp_path.iterdir())  # loading touched no demo file


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
