"""The demo tables share one Dagster instance (``<home>/.dagster``): one table's demo never deletes another's
history, and running it again replaces only its own; after the demo, the sensor (turned on with no cursor)
publishes the next change."""

from pathlib import Path

import dagster as dg
import pytest

from dagster_privrelease import demo as demos
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.orchestration import sensors
from dagster_privrelease.storage import ReleaseStore

from .conftest import write_spec
from .test_sensor_promises import patients


def _demo_table(name: str, seed: int) -> demos.Demo:
    rows = patients(400, seed=seed)
    return demos.Demo(name, lambda: rows, base=200, batch=20, update_fraction=0.0)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A demo home with two small demo tables of text ids, ``clinic`` and ``ward`` (k-anonymity, k = 3)."""
    monkeypatch.setattr(demos, "RESOURCES", tmp_path / "specs")
    (tmp_path / "specs").mkdir()
    for name in ("clinic", "ward"):
        write_spec(tmp_path / "specs", {"name": "k_anonymity", "k": 3}, name=name)
    monkeypatch.setattr(demos, "DEMOS", {"clinic": _demo_table("clinic", 1), "ward": _demo_table("ward", 2)})
    return tmp_path / "home"


def test_a_demo_table_never_deletes_another_tables_history_and_its_sensor_publishes_the_next_change(home):
    """Two demo tables in one home share the Dagster instance: running one keeps the other's runs and partitions,
    and running one again replaces only its own. The demo leaves the daemon's cursor of the sensor empty: its
    first tick compares the source with the last published release, so the next change is published as the next
    release (ward's 4th), not swallowed. (One test: the demo runs are most of its cost.)"""
    demos.run_demo("clinic", 2, home)
    demos.run_demo("ward", 3, home)

    def history(instance: dg.DagsterInstance, name: str) -> tuple[list[str], int, int]:
        runs = instance.get_runs(dg.RunsFilter(job_name=f"{name}_release"))
        selector = demos.sensor_selector(f"{name}_source_changed").get_id()
        ticks = instance.get_ticks(selector, selector)
        return sorted(instance.get_dynamic_partitions(f"{name}_releases")), len(runs), len(ticks)

    with dg.DagsterInstance.from_config(str(home / ".dagster")) as instance:
        assert history(instance, "clinic") == (["000001", "000002"], 2, 2)
        assert history(instance, "ward") == (["000001", "000002", "000003"], 3, 3)
    demos.run_demo("clinic", 1, home)  # clinic starts over; ward keeps its history
    with dg.DagsterInstance.from_config(str(home / ".dagster")) as instance:
        assert history(instance, "clinic") == (["000001"], 1, 1)
        assert history(instance, "ward") == (["000001", "000002", "000003"], 3, 3)

    demos.demo_changes("ward", home)
    defs = demos.build_definitions(home)
    with dg.DagsterInstance.from_config(str(home / ".dagster")) as instance:
        data = sensors.tick(defs, instance, "ward_source_changed", None)
        (request,) = data.run_requests or []
        assert request.partition_key == "000004"
        run = defs.resolve_job_def("ward_release").execute_in_process(
            partition_key=request.partition_key, tags=request.tags, instance=instance
        )
        assert run.success
    demo = demos.DEMOS["ward"]
    assert ReleaseStore(demo.folder(home) / "releases.duckdb", load_spec(demo.spec)).release_ids() == [1, 2, 3, 4]
