"""The YAML component (``ProtectedTableComponent``): a defs.yaml loaded through Dagster's component sandbox and
released end to end through its sensor, and the ``dg`` commands (scaffold, check yaml, list) on a temp project."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
import pytest
import yaml
from dagster.components.testing import create_defs_folder_sandbox

from dagster_privrelease import ProtectedTableComponent, SpecError
from dagster_privrelease.orchestration import DuckDBChangeLogSource, sensors
from dagster_privrelease.orchestration.definitions import QUIET
from dagster_privrelease.storage.read import read_manifest

from .conftest import people, write_source, write_spec

DG = Path(sys.executable).parent / "dg"
ROOT = Path(__file__).resolve().parents[2]


def _text_ids(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ids ``p000``, ``p001``, ... (text ids, as a warehouse keeps them)."""
    return frame.assign(id=[f"p{i:03d}" for i in frame["id"]])


def _attributes(folder: Path, inline: bool = False, **extra) -> dict:
    """A defs.yaml of the component over ``folder``'s spec (a file, or its keys ``inline``), store and source,
    relative paths only."""
    path = write_spec(folder, {"name": "m_invariance", "m": 2})
    spec = yaml.safe_load(path.read_text()) if inline else "patients.yaml"
    if inline:
        path.unlink()
    return {
        "type": "dagster_privrelease.ProtectedTableComponent",
        "attributes": {
            "spec": spec,
            "store": "releases.duckdb",
            "source": {"kind": "duckdb_table", "database": "data.duckdb", "table": "source.people"},
            **extra,
        },
    }


def test_a_defs_yaml_releases_a_stream_through_its_sensor(instance):
    """Two releases of a text-id table whose spec is written inline in the defs.yaml, each requested by the source
    sensor of the definitions the defs.yaml built, published by the release job with its blocking checks passed;
    nothing published holds an id."""
    with create_defs_folder_sandbox() as sandbox:
        folder = sandbox.defs_folder_path / "patients"
        folder.mkdir()
        (folder / "defs.yaml").write_text(yaml.safe_dump(_attributes(folder, inline=True)))
        assert not (folder / "patients.yaml").exists()
        with sandbox.load_component_and_build_defs(defs_path=folder) as (component, defs):
            assert isinstance(component, ProtectedTableComponent)
            job = defs.resolve_job_def("patients_release")
            stream = [_text_ids(people(60)), _text_ids(pd.concat([people(60).iloc[6:], people(8, seed=1, start=60)]))]
            cursor = None
            for rows in stream:
                write_source(folder / "data.duckdb", rows)
                data = sensors.tick(defs, instance, "patients_source_changed", cursor)
                cursor = data.cursor
                (request,) = data.run_requests
                result = job.execute_in_process(partition_key=request.partition_key, tags=request.tags,
                                                instance=instance, run_config=QUIET)
                assert result.success
                checks = result.get_asset_check_evaluations()
                assert {e.check_name for e in checks} == {"guarantee", "attacks", "expectations"}
                assert all(e.passed for e in checks)
        manifest = read_manifest(folder / "releases.duckdb")
        assert list(manifest["release_id"]) == [1, 2]
        assert list(manifest["model"]) == ["m_invariance", "m_invariance"]
        with duckdb.connect(str(folder / "releases.duckdb"), read_only=True) as con:
            tables = con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'published'"
            ).fetchall()
            published = [con.execute(f'SELECT * FROM published."{t}"').df() for (t,) in tables]
        assert sum(len(p) for p in published) >= len(stream[0]) + len(stream[1])  # both releases' rows are out
        assert not any(re.search(r"\bp\d{3}\b", p.to_csv()) for p in published)  # no id, in any column


def test_translation_and_a_change_log_source(monkeypatch):
    """The translation block renames keys, group and pool; ``kind: duckdb_change_log`` builds a change-log source
    on the file named (a template) relative to the defs.yaml; ``requests`` adds the request sensor."""
    monkeypatch.setenv("LOG_DIR", "logs")
    with create_defs_folder_sandbox() as sandbox:
        folder = sandbox.defs_folder_path / "patients"
        folder.mkdir()
        body = _attributes(folder, requests="requests",
                           translation={"key_prefix": ["warehouse"], "group_name": "private", "pool": "shared"})
        body["attributes"]["source"] = {"kind": "duckdb_change_log", "database": "{{ env.LOG_DIR }}/log.duckdb",
                                        "table": "source.people_log"}
        (folder / "defs.yaml").write_text(yaml.safe_dump(body))
        with sandbox.load_component_and_build_defs(defs_path=folder) as (_, defs):
            published = defs.resolve_assets_def(dg.AssetKey(["warehouse", "patients", "published_release"]))
            assert published.group_names_by_key[published.key] == "private"
            assert published.node_def.pool == "shared"
            source = defs.resources["patients_source"]
            assert isinstance(source, DuckDBChangeLogSource)
            assert Path(source.database) == folder / "logs" / "log.duckdb"
            assert defs.resolve_sensor_def("patients_release_requests")
        assert not (folder / "logs").exists() and not (folder / "releases.duckdb").exists()  # no data touched


def test_a_bad_spec_is_named_with_its_file_and_key():
    """Loading a defs.yaml whose inline spec breaks a rule fails with the package's one-line message naming the
    defs.yaml, the key and the rule."""
    with create_defs_folder_sandbox() as sandbox:
        folder = sandbox.defs_folder_path / "patients"
        folder.mkdir()
        body = _attributes(folder, inline=True)
        body["attributes"]["spec"]["model"]["m"] = 1
        (folder / "defs.yaml").write_text(yaml.safe_dump(body))
        error = _load_error(sandbox)
    assert str(error) == f"{folder / 'defs.yaml'} (attributes.spec): model.m: must be at least 2, got 1"


def _load_error(sandbox) -> SpecError:
    """The package's SpecError under the exception building the sandbox's definitions raises (Dagster wraps it)."""
    with pytest.raises(Exception) as caught, sandbox.build_all_defs():
        pass
    error = caught.value
    while not isinstance(error, SpecError) and error.__cause__ is not None:
        error = error.__cause__
    assert isinstance(error, SpecError)
    return error


def test_a_backend_block_picks_where_the_split_runs():
    """``backend:`` in the defs.yaml becomes the table's ``PrivreleaseBackend`` (no session started while loading);
    a block with an unknown kind is refused with one line naming the defs.yaml and the key."""
    from dagster_privrelease.orchestration import PrivreleaseBackend

    with create_defs_folder_sandbox() as sandbox:
        folder = sandbox.defs_folder_path / "patients"
        folder.mkdir()
        body = _attributes(folder, backend={"kind": "spark", "master": "local[3]"})
        (folder / "defs.yaml").write_text(yaml.safe_dump(body))
        with sandbox.load_component_and_build_defs(defs_path=folder) as (_, defs):
            backend = defs.resources["patients_backend"]
            assert isinstance(backend, PrivreleaseBackend) and backend.where() == "spark (local[3])"
        body["attributes"]["backend"] = {"kind": "dask"}
        (folder / "defs.yaml").write_text(yaml.safe_dump(body))
        error = _load_error(sandbox)
    assert str(error) == (f"{folder / 'defs.yaml'}: attributes.backend: invalid kind (the fields of "
                          "PrivreleaseBackend: kind local|spark, master, remote, spark_conf)")


@pytest.fixture
def project(tmp_path) -> tuple[Path, dict]:
    """An empty ``dg`` project ``tmpproj`` (src layout) and the environment that imports it and this package."""
    (tmp_path / "src" / "tmpproj" / "defs").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "tmpproj"\nversion = "0.1.0"\n\n[tool.dg]\ndirectory_type = "project"\n\n'
        '[tool.dg.project]\nroot_module = "tmpproj"\n'
    )
    (tmp_path / "src" / "tmpproj" / "__init__.py").write_text("")
    (tmp_path / "src" / "tmpproj" / "definitions.py").write_text(
        "from pathlib import Path\n\nimport dagster as dg\n\n\n@dg.definitions\ndef defs():\n"
        "    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)\n"
    )
    path = os.pathsep.join([str(tmp_path / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return tmp_path, {**os.environ, "PYTHONPATH": path, "NO_COLOR": "1"}


def _dg(project: tuple[Path, dict], *args: str) -> subprocess.CompletedProcess:
    folder, env = project
    return subprocess.run([str(DG), *args], cwd=folder, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_dg_scaffolds_checks_and_lists_a_table(project):
    """``dg scaffold defs`` writes a commented defs.yaml and a spec that load as they are; ``dg list defs`` shows
    the table's assets, checks, sensor and job; ``dg check yaml`` refuses a misspelt key, naming it and its line."""
    folder = project[0] / "src" / "tmpproj" / "defs" / "patients"
    scaffold = _dg(project, "scaffold", "defs", "dagster_privrelease.ProtectedTableComponent", "patients")
    assert scaffold.returncode == 0, scaffold.stderr[-2000:]
    text = (folder / "defs.yaml").read_text()
    assert text.count("\n  # ") >= 8  # every attribute is explained
    assert yaml.safe_load(text)["attributes"]["source"]["kind"] == "duckdb_table"

    listed = _dg(project, "list", "defs", "--json")
    assert listed.returncode == 0, listed.stderr[-2000:]
    defs = json.loads(listed.stdout)
    assert {a["asset_key"] for a in defs["assets"]} == {"patients/source", "patients/snapshot",
                                                  "patients/release_candidate", "patients/published_release"}
    assert {c["key"] for c in defs["asset_checks"]} >= {"patients/release_candidate:guarantee"}
    assert {s["name"] for s in defs["sensors"]} == {"patients_source_changed"}
    assert {j["name"] for j in defs["jobs"]} == {"patients_release"}
    assert not (folder / "source.duckdb").exists() and not (folder / "releases.duckdb").exists()

    lines = text.splitlines()
    line = next(i for i, s in enumerate(lines, start=1) if s.startswith("  store:"))
    lines[line - 1] = lines[line - 1].replace("store:", "stroe:")
    (folder / "defs.yaml").write_text("\n".join(lines) + "\n")
    checked = _dg(project, "check", "yaml")
    assert checked.returncode != 0
    assert f"defs.yaml:{line} - dagster_privrelease.ProtectedTableComponent attributes.stroe" in checked.stdout
    assert "'stroe' was unexpected" in checked.stdout


def test_dg_lists_the_component_through_its_entry_point(project):
    """The package's ``dagster_dg_cli.registry_modules`` entry point makes ``dg list components`` show it (the
    installed metadata: reinstall the package after changing pyproject.toml)."""
    listed = _dg(project, "list", "components", "--json")
    assert listed.returncode == 0, listed.stderr[-2000:]
    keys = {c["key"] for c in json.loads(listed.stdout)["items"]}
    assert "dagster_privrelease.ProtectedTableComponent" in keys
