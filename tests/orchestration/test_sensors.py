"""Sensor ticks as the daemon evaluates them: cursor, dynamic partition requests, run requests."""

import dagster as dg
import duckdb

from dagster_privrelease.orchestration import DuckDBSource, release_definitions

from .conftest import people, write_source
from .test_factory import JOB


def _tick(defs, name, instance, cursor=None):
    """One tick as the sensor daemon evaluates it: through an instance ref, so that the run requests are resolved
    against the instance's partitions plus the ones the same tick adds."""
    with dg.build_sensor_context(
        instance_ref=instance.get_ref(), cursor=cursor, definitions=defs, resources=defs.resources
    ) as context:
        return defs.resolve_sensor_def(name).evaluate_tick(context)


def _apply(instance, data):
    for request in data.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))


def test_source_sensor_releases_on_inserts_deletes_and_updates(tmp_path, spec_path, instance):
    path = tmp_path / "data.duckdb"
    defs = release_definitions(
        spec_path, tmp_path / "releases.duckdb", DuckDBSource(database=str(path), table="source.people")
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
    # a sensor whose cursor was lost records the fingerprint instead of re-releasing what exists
    fresh = _tick(defs, sensor, instance)
    assert not fresh.run_requests and fresh.cursor and "first tick" in fresh.skip_message


def test_request_sensor_turns_files_into_releases(tmp_path, spec_path, instance):
    path = tmp_path / "data.duckdb"
    write_source(path, people(90))
    folder = tmp_path / "requests"
    folder.mkdir()
    defs = release_definitions(
        spec_path, tmp_path / "releases.duckdb", DuckDBSource(database=str(path), table="source.people"),
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
    subset = _tick(defs, sensor, instance, accepted.cursor)
    assert not subset.run_requests
    assert "b.yaml" in subset.skip_message and "k_anonymity publishes every quasi-identifier" in subset.skip_message
    unknown = _tick(defs, sensor, instance, subset.cursor)
    assert not unknown.run_requests and "['salary']" in unknown.skip_message
    assert "no new request" in _tick(defs, sensor, instance, unknown.cursor).skip_message
    (folder / "d.yaml").write_text("{}\n")
    assert [r.partition_key for r in _tick(defs, sensor, instance, unknown.cursor).run_requests] == ["000002"]
