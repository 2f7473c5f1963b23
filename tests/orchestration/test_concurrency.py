"""One release of a table at a time: every step of the table claims a slot of its pool before it runs."""

import threading
import time
from pathlib import Path

import dagster as dg
import yaml

from dagster_privrelease.orchestration import DuckDBTableSource, release_definitions

from .conftest import people, write_source
from .test_assets import JOB, PARTITIONS

ROOT = Path(__file__).resolve().parents[2]


def test_a_step_waits_while_another_run_holds_the_tables_pool(tmp_path, spec_path):
    settings = yaml.safe_load((ROOT / "assets" / "dagster.yaml").read_text())
    settings["concurrency"]["pools"]["granularity"] = "op"  # enforced by the executor, no run queue needed
    write_source(tmp_path / "data.duckdb", people(60))
    defs = release_definitions(
        spec_path, tmp_path / "releases.duckdb",
        DuckDBTableSource(database=str(tmp_path / "data.duckdb"), table="source.people"),
    )
    with dg.instance_for_test(overrides=settings) as instance:
        instance.add_dynamic_partitions(PARTITIONS, ["000001"])
        storage = instance.event_log_storage
        storage.initialize_concurrency_limit_to_default("privrelease_patients")
        claim = storage.claim_concurrency_slot("privrelease_patients", "another-run", "another-step")
        assert claim.is_claimed
        done = {}
        job = defs.resolve_job_def(JOB)

        def release():
            done["result"] = job.execute_in_process(partition_key="000001", instance=instance)

        thread = threading.Thread(target=release)
        thread.start()
        time.sleep(8)
        assert thread.is_alive() and "result" not in done  # blocked on the pool
        storage.free_concurrency_slots_for_run("another-run")
        thread.join(timeout=240)
        assert done["result"].success
