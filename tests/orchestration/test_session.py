"""One store session per release run: the DuckDB file is opened once by ``run_release`` (and once per step by a
run launched without it), stays locked against another process for the whole run, and the spec is parsed once
by the run; the UI's history chart is drawn without a plotting library."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import duckdb
import pytest

from dagster_privrelease import pipeline
from dagster_privrelease.core import spec as core_spec
from dagster_privrelease.orchestration import DuckDBTableSource, release_definitions, run_release
from dagster_privrelease.orchestration.report import history_svg
from tests.storage.conftest import probe

from .conftest import people, write_source
from .test_assets import JOB, PARTITIONS

#: The steps of a k-anonymity release run: snapshot, candidate, the judge's checks, the GE check, publication.
STEPS = 5


@pytest.fixture
def opens(monkeypatch):
    """The paths of every ``duckdb.connect`` from now on."""
    opened: list[Path] = []
    connect = duckdb.connect

    def counting(database=":memory:", *args, **kwargs):
        opened.append(Path(str(database)))
        return connect(database, *args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", counting)
    return opened


@pytest.fixture
def parses(monkeypatch):
    """How many times a spec file is parsed from now on."""
    calls: list[str] = []
    load = core_spec.load_spec

    def counting(path):
        calls.append(str(path))
        return load(path)

    for module in ("dagster_privrelease.orchestration.definitions", "dagster_privrelease.orchestration.resources"):
        monkeypatch.setattr(f"{module}.load_spec", counting)
    return calls


def test_run_release_opens_the_store_once_locks_it_throughout_and_parses_the_spec_twice(
    tmp_path, spec_path, instance, opens, parses, monkeypatch
):
    """Each ``run_release`` opens the store file once and parses the spec twice (its own parse, and the run's:
    ``ReleaseStoreResource.setup_for_execution``). Another process opening the store while the judge's check
    of release 2 runs (after the snapshot and candidate steps wrote, before the publication) finds it locked by
    this process and is refused after its retries; after the run it opens."""
    db = tmp_path / "releases.duckdb"
    seen = []
    judge = pipeline.judge

    def judged_while_probed(store, release_id):
        if release_id == 2:
            seen.append(probe(db))
        return judge(store, release_id)

    monkeypatch.setattr(pipeline, "judge", judged_while_probed)
    first = people(90)
    for j, frame in enumerate((first, first.iloc[8:]), 1):
        opens.clear()
        parses.clear()
        row = run_release(spec_path, db, frame, instance=instance)
        assert (row["outcome"], row["release_id"]) == ("published", j)
        assert opens.count(db) == 1, opens
        assert len(parses) == 2, parses
    (refused,) = seen
    assert "the release store is locked by" in refused and f"PID {os.getpid()}" in refused, refused
    assert probe(db) == "opened"
    opens.clear()
    assert run_release(spec_path, db, first.iloc[8:], instance=instance)["outcome"] == "unchanged"
    assert opens.count(db) == 1


def test_a_run_without_run_release_opens_the_store_once_per_step(tmp_path, spec_path, instance, opens):
    """A run as the daemon launches it (no session around it): one session per step."""
    write_source(tmp_path / "data.duckdb", people(80))
    db = tmp_path / "releases.duckdb"
    defs = release_definitions(spec_path, db, DuckDBTableSource(database=str(tmp_path / "data.duckdb"),
                                                                table="source.people"))
    instance.add_dynamic_partitions(PARTITIONS, ["000001"])
    opens.clear()
    assert defs.resolve_job_def(JOB).execute_in_process(partition_key="000001", instance=instance).success
    assert 1 <= opens.count(db) <= STEPS, opens


@pytest.mark.parametrize(("loss", "counterfeits"), [
    ([0.25], [0]),
    ([0.1, None, 0.3, float("nan"), 0.2], [0, 4, 2, 0, 1]),
    ([0.0] * 30, [0] * 30),
])
def test_the_history_chart_is_plain_svg_with_a_point_per_figure_and_a_bar_per_release(loss, counterfeits):
    releases = list(range(1, len(loss) + 1))
    svg = history_svg(releases, loss, counterfeits, "ncp")
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg" and not list(root.iter(f"{ns}script"))
    finite = [v for v in loss if v is not None and v == v]
    assert len(list(root.iter(f"{ns}circle"))) == len(finite)
    assert len(list(root.iter(f"{ns}rect"))) == 1 + len(releases)  # the frame and one bar per release
    labels = {t.text for t in root.iter(f"{ns}text")}
    assert {"release", "ncp", "counterfeits", str(releases[0]), str(releases[-1])} <= labels
    heights = [float(r.get("height", 0)) for r in list(root.iter(f"{ns}rect"))[1:]]
    assert all(h >= 0 for h in heights)
    assert (max(heights) > 0) == (max(counterfeits) > 0)


def test_the_console_script_ends_with_the_commands_status_output_and_exit_handlers(tmp_path):
    """``privrelease`` as the console script ends through ``cli.leave``: the command's exit status (0, or 1 for a
    refusal), its whole output on stdout and stderr, and the process's exit handlers run (``atexit``)."""
    marker = tmp_path / "exit-handlers-ran"
    script = textwrap.dedent(f"""
        import atexit, pathlib, sys
        atexit.register(pathlib.Path({str(marker)!r}).write_text, "ran")
        from dagster_privrelease.cli import app
        sys.argv = ["privrelease", *sys.argv[1:]]
        app()
        raise AssertionError("app() returned")
    """)

    def privrelease(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120,
                              check=False)

    missing = privrelease("show", "--db", str(tmp_path / "nothing.duckdb"))
    assert missing.returncode == 1 and "error:" in missing.stderr and "no release store there" in missing.stderr
    assert marker.read_text() == "ran"
    marker.unlink()
    ok = privrelease("--help")
    assert ok.returncode == 0 and "release" in ok.stdout and ok.stdout.rstrip().endswith("─╯"), ok.stdout
    assert marker.read_text() == "ran"
