"""The sensor path keeps the CLI's promises, run the way the daemon runs it: ``sensors.tick`` on a persistent
instance (its partition requests applied), the run requests executed, the cursor carried from tick to tick.

A source equal to the last published release publishes nothing, whether it is seen by a tick or only by the run;
the partition a refusal left pending is retired, never published as a copy; the first tick compares the source
with the store's last published snapshot; a refusal never blocks the next good change."""

import re

import dagster as dg
import pandas as pd
import pytest

from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.orchestration import DuckDBTableSource, release_definitions, run_release
from dagster_privrelease.orchestration.sensors import tick
from dagster_privrelease.storage import ReleaseStore

from .conftest import people, write_source, write_spec
from .test_assets import JOB

SENSOR = "patients_source_changed"
PARTITIONS = "patients_releases"
#: An id of the tables below, as it could leak into a message.
ID = re.compile(r"\bp\d{3}\b|\b\d{3}\b")


def patients(n: int, seed: int = 0, start: int = 0) -> pd.DataFrame:
    """``people`` with text ids ``p000``, ``p001``, ... (zero-padded: ``p007`` is not ``p7``)."""
    rows = people(n, seed, start)
    return rows.assign(id=[f"p{i:03d}" for i in rows["id"]])


def _flu(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with all but four of them sick with flu: no l = 4 model can publish them."""
    return rows.assign(disease=["flu"] * (len(rows) - 4) + list(rows["disease"].iloc[-4:]))


class Daemon:
    """The sensor daemon over one table: ticks on a persistent instance, its run requests launched in-process."""

    def __init__(self, tmp_path, instance: dg.DagsterInstance):
        self.spec = write_spec(tmp_path, {"name": "l_diversity", "l": 4})
        self.source = tmp_path / "data.duckdb"
        self.db = tmp_path / "releases.duckdb"
        self.defs = release_definitions(
            self.spec, self.db, DuckDBTableSource(database=str(self.source), table="source.people")
        )
        self.instance = instance
        self.cursor: str | None = None

    def write(self, rows: pd.DataFrame) -> None:
        write_source(self.source, rows)

    def tick(self):
        """One tick; its cursor is carried to the next. No message of it holds an id."""
        data = tick(self.defs, self.instance, SENSOR, self.cursor)
        self.cursor = data.cursor
        assert not ID.search(data.skip_message or ""), data.skip_message
        return data

    def launch(self, data) -> list[dg.ExecuteInProcessResult]:
        """The tick's run requests, executed as the daemon's run launcher would."""
        return [
            self.defs.resolve_job_def(JOB).execute_in_process(
                partition_key=r.partition_key, tags=r.tags, instance=self.instance, raise_on_error=False
            )
            for r in data.run_requests or []
        ]

    def release(self, rows: pd.DataFrame) -> str:
        """Write ``rows``, tick, run what it requests; the key published."""
        self.write(rows)
        data = self.tick()
        (request,) = data.run_requests
        (run,) = self.launch(data)
        assert run.success
        return str(request.partition_key)

    def releases(self) -> list[int]:
        return ReleaseStore(self.db, load_spec(self.spec)).release_ids()

    def partitions(self) -> list[str]:
        return sorted(self.instance.get_dynamic_partitions(PARTITIONS))


@pytest.fixture
def persistent(tmp_path):
    """A persistent Dagster instance in its own DAGSTER_HOME, as the daemon and the UI use."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        yield instance


FIRST, SECOND, THIRD = patients(90), patients(95, seed=4), patients(100, seed=5, start=40)


def test_restoring_the_last_release_after_a_refusal_publishes_nothing_and_retires_the_partition(tmp_path, persistent):
    daemon = Daemon(tmp_path, persistent)
    assert [daemon.release(FIRST), daemon.release(SECOND)] == ["000001", "000002"]
    daemon.write(_flu(SECOND))
    refused = daemon.tick()
    assert [r.partition_key for r in refused.run_requests] == ["000003"]
    assert not daemon.launch(refused)[0].success
    daemon.write(SECOND)  # the operator puts release 2's rows back
    restored = daemon.tick()
    assert not restored.run_requests and "release 2" in restored.skip_message
    assert daemon.partitions() == ["000001", "000002"]  # the refused partition is retired
    assert "unchanged" in daemon.tick().skip_message
    assert daemon.release(THIRD) == "000003"  # the refusal blocks nothing
    assert daemon.releases() == [1, 2, 3] and daemon.partitions() == ["000001", "000002", "000003"]


def test_a_run_whose_source_was_restored_before_it_started_publishes_nothing(tmp_path, persistent):
    daemon = Daemon(tmp_path, persistent)
    daemon.release(FIRST)
    daemon.release(SECOND)
    daemon.write(THIRD)
    requested = daemon.tick()
    assert [r.partition_key for r in requested.run_requests] == ["000003"]
    daemon.write(SECOND)  # restored before the run starts
    (run,) = daemon.launch(requested)
    assert run.success and daemon.releases() == [1, 2]
    assert not [e for e in run.get_asset_materialization_events() if e.asset_key.path[-1] == "published_release"]
    logs = [e.user_message for e in persistent.all_logs(run.run_id)]
    assert any("rows of release 2" in m for m in logs), logs
    after = daemon.tick()  # the next tick sees the restored source and requests no copy either
    assert not after.run_requests and "release 2" in after.skip_message
    assert daemon.partitions() == ["000001", "000002"]
    assert daemon.release(THIRD) == "000003"
    assert daemon.releases() == [1, 2, 3]


def test_the_first_tick_compares_with_the_last_published_release(tmp_path, persistent):
    """Releases made outside the sensor (``run_release``, what ``privrelease release`` calls, on an instance of
    its own): the first tick on the same rows records the fingerprint and adds the published releases' partitions;
    a change made before the sensor was turned on is published as the next release, never as 000001."""
    daemon = Daemon(tmp_path, persistent)
    for rows in (FIRST, SECOND):
        assert run_release(daemon.spec, daemon.db, rows)["outcome"] == "published"
    daemon.write(SECOND)
    first = daemon.tick()
    assert not first.run_requests and "release 2" in first.skip_message and daemon.cursor
    assert daemon.partitions() == ["000001", "000002"]
    assert daemon.release(THIRD) == "000003"
    daemon.cursor = None  # the sensor turned off and on again (its cursor reset), after a change
    assert daemon.release(patients(90, seed=6, start=20)) == "000004"
    assert daemon.releases() == [1, 2, 3, 4]


def test_a_change_before_the_first_tick_after_outside_releases_is_published(tmp_path, persistent):
    daemon = Daemon(tmp_path, persistent)
    for rows in (FIRST, SECOND):
        run_release(daemon.spec, daemon.db, rows)
    assert daemon.release(THIRD) == "000003"
    assert daemon.partitions() == ["000001", "000002", "000003"] and daemon.releases() == [1, 2, 3]
