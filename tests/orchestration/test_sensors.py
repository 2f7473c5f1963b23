"""Sensor ticks as the daemon evaluates them: cursor, dynamic partition requests, run requests."""

import dagster as dg
import duckdb
import pandas as pd

from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.orchestration import DuckDBChangeLogSource, DuckDBTableSource, release_definitions
from dagster_privrelease.storage import ReleaseStore

from .conftest import people, write_source, write_spec
from .test_assets import JOB


def _tick(defs, name, instance, cursor=None):
    """One tick as the sensor daemon evaluates it: through an instance ref, so that the run requests are resolved
    against the instance's partitions plus the ones the same tick adds."""
    with dg.build_sensor_context(
        instance_ref=instance.get_ref(), cursor=cursor, definitions=defs, resources=defs.resources
    ) as context:
        return defs.resolve_sensor_def(name).evaluate_tick(context)


def _apply(instance, data):
    """The tick's partition requests applied to ``instance``, in order, as the sensor daemon does."""
    for request in data.dynamic_partitions_requests:
        if isinstance(request, dg.DeleteDynamicPartitionsRequest):
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)
        else:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))


def test_source_sensor_releases_on_inserts_deletes_and_updates(tmp_path, spec_path, instance):
    path = tmp_path / "data.duckdb"
    defs = release_definitions(
        spec_path, tmp_path / "releases.duckdb", DuckDBTableSource(database=str(path), table="source.people")
    )
    sensor = "patients_source_changed"
    missing = _tick(defs, sensor, instance)
    assert not missing.run_requests and "no such file" in missing.skip_message
    write_source(path, people(90))
    first = _tick(defs, sensor, instance)
    (request,) = first.run_requests
    assert request.partition_key == "000001" and request.tags["privrelease/table"] == "patients"
    assert [list(r.partition_keys) for r in first.dynamic_partitions_requests] == [["000001"]]
    _apply(instance, first)
    run = defs.resolve_job_def(JOB).execute_in_process(
        partition_key=request.partition_key, tags=request.tags, instance=instance
    )
    assert run.success
    unchanged = _tick(defs, sensor, instance, first.cursor)
    assert not unchanged.run_requests and "unchanged" in unchanged.skip_message
    for change in (
        "UPDATE source.people SET visits = visits + 1 WHERE id = 3",
        "DELETE FROM source.people WHERE id = 4",
        "INSERT INTO source.people SELECT id + 500, age, sex, zipcode, visits, disease FROM source.people LIMIT 1",
    ):
        with duckdb.connect(str(path)) as con:
            con.execute(change)
        moved = _tick(defs, sensor, instance, unchanged.cursor)
        assert [r.partition_key for r in moved.run_requests] == ["000002"], change
    # a sensor whose cursor was lost compares the source with release 1: the pending change goes to 000002
    fresh = _tick(defs, sensor, instance)
    assert [r.partition_key for r in fresh.run_requests] == ["000002"] and fresh.cursor


def test_request_sensor_turns_files_into_releases(tmp_path, spec_path, instance):
    path = tmp_path / "data.duckdb"
    write_source(path, people(90))
    folder = tmp_path / "requests"
    folder.mkdir()
    defs = release_definitions(
        spec_path, tmp_path / "releases.duckdb", DuckDBTableSource(database=str(path), table="source.people"),
        requests=folder,
    )
    sensor = "patients_release_requests"
    assert "no new request" in _tick(defs, sensor, instance).skip_message
    (folder / "a.yaml").write_text("attributes: [zipcode, age, sex]\nnote: quarterly\n")
    (folder / "b.yaml").write_text("attributes: [age, sex]\n")
    (folder / "c.yaml").write_text("attributes: [age, salary]\n")
    accepted = _tick(defs, sensor, instance)
    (request,) = accepted.run_requests
    assert request.partition_key == "000001"
    assert request.tags["privrelease/attributes"] == "age,sex,zipcode"
    assert request.tags["privrelease/request"] == "a.yaml"
    _apply(instance, accepted)
    run = defs.resolve_job_def(JOB).execute_in_process(
        partition_key=request.partition_key, tags=request.tags, instance=instance
    )
    assert run.success
    subset = _tick(defs, sensor, instance, accepted.cursor)
    assert not subset.run_requests
    assert "b.yaml" in subset.skip_message and "k_anonymity publishes every quasi-identifier" in subset.skip_message
    unknown = _tick(defs, sensor, instance, subset.cursor)
    assert not unknown.run_requests and "['salary']" in unknown.skip_message
    assert "no new request" in _tick(defs, sensor, instance, unknown.cursor).skip_message
    (folder / "d.yaml").write_text("{}\n")
    assert [r.partition_key for r in _tick(defs, sensor, instance, unknown.cursor).run_requests] == ["000002"]


def _flu(n: int):
    """Rows no l=4 model can publish: all but four of them have flu."""
    rows = people(n)
    rows.loc[rows.index[4:], "disease"] = "flu"
    return rows


def test_after_a_refusal_the_fixed_source_publishes_through_the_sensor(tmp_path, instance):
    """Release 1 is refused (the model cannot publish the source's rows); once the source is fixed, the next tick
    re-requests partition 000001 (a new run key), not 000002, and that run publishes: no discard, and no partition
    left unpublished. A refused release 2 goes the same way."""
    spec_path = write_spec(tmp_path, {"name": "l_diversity", "l": 4})
    path = tmp_path / "data.duckdb"
    defs = release_definitions(
        spec_path, tmp_path / "releases.duckdb", DuckDBTableSource(database=str(path), table="source.people")
    )
    sensor, job = "patients_source_changed", defs.resolve_job_def(JOB)
    cursor = None
    for release, bad, good in ((1, _flu(90), people(90)), (2, _flu(95), people(95, seed=4))):
        key = f"{release:06d}"
        write_source(path, bad)
        refused = _tick(defs, sensor, instance, cursor)
        assert [r.partition_key for r in refused.run_requests] == [key]
        _apply(instance, refused)
        failed = job.execute_in_process(partition_key=key, tags=refused.run_requests[0].tags, instance=instance,
                                        raise_on_error=False)
        assert not failed.success
        unchanged = _tick(defs, sensor, instance, refused.cursor)
        assert not unchanged.run_requests and "unchanged" in unchanged.skip_message
        write_source(path, good)
        fixed = _tick(defs, sensor, instance, unchanged.cursor)
        (request,) = fixed.run_requests
        assert request.partition_key == key and request.run_key != refused.run_requests[0].run_key
        _apply(instance, fixed)
        assert job.execute_in_process(partition_key=key, tags=request.tags, instance=instance).success
        cursor = fixed.cursor
    assert sorted(instance.get_dynamic_partitions("patients_releases")) == ["000001", "000002"]
    store = ReleaseStore(tmp_path / "releases.duckdb", load_spec(spec_path))
    assert store.release_ids() == [1, 2] and len(store.snapshot(2)) == 95


def test_a_refused_partition_rerun_after_the_fix_publishes(tmp_path, instance):
    """Re-materialising the refused partition itself (the UI's re-execution) re-captures the fixed source."""
    spec_path = write_spec(tmp_path, {"name": "l_diversity", "l": 4})
    path = tmp_path / "data.duckdb"
    defs = release_definitions(
        spec_path, tmp_path / "releases.duckdb", DuckDBTableSource(database=str(path), table="source.people")
    )
    instance.add_dynamic_partitions("patients_releases", ["000001"])
    job = defs.resolve_job_def(JOB)
    write_source(path, _flu(90).assign(sex=lambda d: d["sex"].where(d.index != 7, None)))  # a null: bad snapshot
    assert not job.execute_in_process(partition_key="000001", instance=instance, raise_on_error=False).success
    write_source(path, _flu(90))  # fixed the null, but the model cannot publish these rows
    assert not job.execute_in_process(partition_key="000001", instance=instance, raise_on_error=False).success
    write_source(path, people(90))
    again = job.execute_in_process(partition_key="000001", instance=instance)
    assert again.success
    store = ReleaseStore(tmp_path / "releases.duckdb", load_spec(spec_path))
    assert store.release_ids() == [1] and sorted(store.snapshot(1)["id"]) == list(range(90))


def test_a_refused_change_log_position_is_replaced_by_the_fixed_one(tmp_path, instance):
    """A change log whose position 1 cannot be published, then fixed by position 2: the sensor deletes partition
    000001 and releases position 2 as release 1."""
    spec_path = write_spec(tmp_path, {"name": "l_diversity", "l": 4})
    path = tmp_path / "data.duckdb"
    bad = _flu(90).assign(position=1, op="insert")
    write_source(path, bad, table="source.people_log")
    defs = release_definitions(
        spec_path, tmp_path / "releases.duckdb", DuckDBChangeLogSource(database=str(path), table="source.people_log")
    )
    sensor, job = "patients_source_changed", defs.resolve_job_def(JOB)
    first = _tick(defs, sensor, instance)
    _apply(instance, first)
    assert not job.execute_in_process(partition_key="000001", instance=instance, raise_on_error=False).success
    fix = people(90).assign(position=2, op="update")
    write_source(path, pd.concat([bad, fix], ignore_index=True), table="source.people_log")
    fixed = _tick(defs, sensor, instance, first.cursor)
    assert [r.partition_key for r in fixed.run_requests] == ["000002"]
    _apply(instance, fixed)
    assert instance.get_dynamic_partitions("patients_releases") == ["000002"]
    assert job.execute_in_process(partition_key="000002", instance=instance).success
    store = ReleaseStore(tmp_path / "releases.duckdb", load_spec(spec_path))
    assert store.release_ids() == [1]
    pd.testing.assert_frame_equal(store.snapshot(1), people(90), check_dtype=False)
