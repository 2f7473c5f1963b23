"""The demo as the UI shows it: its runs are runs of the example code location (the Overview timeline places
them under their job), its sensor ticks log what they did, and a demo of release requests publishes each release
with the attributes of its request, so the attacks that join releases of different attributes run."""

from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
import pytest
from dagster._core.definitions.instigation_logger import get_instigation_log_records
from dagster._core.definitions.repository_definition import SINGLETON_REPOSITORY_NAME

from dagster_privrelease import demo as demos
from dagster_privrelease.core.judge.run import attack_history
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.storage import ReleaseStore

from .conftest import write_spec
from .test_sensor_promises import patients

#: The requests of the small demo of release requests, taken in turn.
REQUESTS = (("age", "sex"), ("sex", "zipcode"))


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A demo home with two small demo tables of text ids: ``clinic`` (k-anonymity, k = 3, source changes) and
    ``visits`` (sequential l-diversity, l = 2, release requests over inserts only)."""
    monkeypatch.setattr(demos, "RESOURCES", tmp_path / "specs")
    (tmp_path / "specs").mkdir()
    write_spec(tmp_path / "specs", {"name": "k_anonymity", "k": 3}, name="clinic")
    write_spec(tmp_path / "specs", {"name": "sequential_l_diversity", "l": 2}, name="visits")
    clinic, visits = patients(400, seed=1), patients(400, seed=2)
    monkeypatch.setattr(demos, "DEMOS", {
        "clinic": demos.Demo("clinic", lambda: clinic, base=200, batch=20, update_fraction=0.0),
        "visits": demos.Demo("visits", lambda: visits, base=80, batch=20, update_fraction=0.0, inserts_only=True,
                             requests=REQUESTS),
    })
    return tmp_path / "home"


def _tick_logs(instance: dg.DagsterInstance, sensor: str) -> list[str]:
    """The messages each recorded tick of ``sensor`` logged (as the UI shows them, after the repository's and the
    sensor's names), oldest tick first."""
    selector = demos.sensor_selector(sensor).get_id()
    ticks = sorted(instance.get_ticks(selector, selector), key=lambda t: t.timestamp)
    assert all(t.log_key for t in ticks)
    prefix = f"{SINGLETON_REPOSITORY_NAME} - {sensor} - "
    messages = [[r["msg"] for r in get_instigation_log_records(instance, t.log_key or [])] for t in ticks]
    assert all(m.startswith(prefix) for tick in messages for m in tick)
    return [" | ".join(m.removeprefix(prefix) for m in tick) for tick in messages]


def test_demo_runs_carry_the_code_locations_origin_and_ticks_log_why(home):
    """Every run of the demo names the example code location, its repository and its job (what the UI's Overview
    timeline groups runs by), and each sensor tick's log says which release it requested and why."""
    demos.run_demo("clinic", 1, home)
    with dg.DagsterInstance.from_config(str(home / ".dagster")) as instance:
        runs = instance.get_runs(dg.RunsFilter(job_name="clinic_release"))
        assert len(runs) == 1
        for run in runs:
            origin = run.remote_job_origin
            assert origin is not None
            assert (origin.location_name, origin.repository_origin.repository_name, origin.job_name) == (
                demos.LOCATION, SINGLETON_REPOSITORY_NAME, "clinic_release")
            assert run.status == dg.DagsterRunStatus.SUCCESS
        assert _tick_logs(instance, "clinic_source_changed") == [
            "requested release 000001 of clinic (the source changed)"]


def test_a_demo_of_requests_publishes_each_request_with_its_attributes_and_its_refusal_is_restored(home):
    """The request demo is released through its request sensor, one request per step, the requests taken in turn:
    the releases publish different attribute sets, so the join and possible-world attacks run (not skipped) and
    find nothing; each tick's log names the request and its attributes.

    Then ``demo_refusal`` deletes rows of its source (sequential l-diversity refuses deletions, Shmueli-Tassa
    §5.3): one failed run of the code location, nothing published, the source restored; asked again, it makes no
    second refusal. (One test: the demo's runs are most of its cost.)"""
    manifest, _ = demos.run_demo("visits", 3, home)
    assert [tuple(a) for a in manifest["attributes"]] == [*REQUESTS, REQUESTS[0]]
    demo = demos.DEMOS["visits"]
    history = ReleaseStore(demo.folder(home) / "releases.duckdb", load_spec(demo.spec)).history()
    reports = attack_history(history, ["join", "possible_worlds"])
    assert [r.name for r in reports] == ["join", "possible_worlds"]
    for report in reports:
        assert "skipped" not in report.summary, report.summary
        assert report.ok, report.summary
    with dg.DagsterInstance.from_config(str(home / ".dagster")) as instance:
        assert _tick_logs(instance, "visits_release_requests") == [
            f"requested release {i:06d} of visits (request {i:02d}.yaml, attributes {', '.join(a)})"
            for i, a in enumerate([*REQUESTS, REQUESTS[0]], start=1)]

    source = demo.source(home)
    with duckdb.connect(source.database) as con:
        before = con.execute(f"SELECT * FROM {source.table} ORDER BY id").df()
    run_id = demos.demo_refusal("visits", rows=5, home=home)
    assert demos.demo_refusal("visits", rows=5, home=home) == run_id
    with dg.DagsterInstance.from_config(str(home / ".dagster")) as instance:
        runs = instance.get_runs(dg.RunsFilter(job_name="visits_release"))
        assert sorted(r.status.value for r in runs) == ["FAILURE", "SUCCESS", "SUCCESS", "SUCCESS"]
        refused = instance.get_run_by_id(run_id)
        assert refused is not None and refused.remote_job_origin is not None
    with duckdb.connect(source.database) as con:
        after = con.execute(f"SELECT * FROM {source.table} ORDER BY id").df()
    pd.testing.assert_frame_equal(before, after)
    assert ReleaseStore(demo.folder(home) / "releases.duckdb", load_spec(demo.spec)).release_ids() == [1, 2, 3]
