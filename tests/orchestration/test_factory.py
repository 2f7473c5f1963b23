"""Materialisations of the release assets in ``instance_for_test`` on temporary DuckDB files."""


import dagster as dg
import duckdb
import pandas as pd
import pytest

from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.errors import SnapshotError
from dagster_privrelease.orchestration import DuckDBSource, release_definitions, run_release
from dagster_privrelease.storage import ReleaseStore

from .conftest import people, write_source, write_spec

JOB = "patients_release"
PARTITIONS = "patients_releases"


def _defs(tmp_path, spec_path):
    source = DuckDBSource(database=str(tmp_path / "data.duckdb"), table="source.people")
    return release_definitions(spec_path, tmp_path / "releases.duckdb", source)


def _run(defs, instance, key, **kwargs):
    if key not in instance.get_dynamic_partitions(PARTITIONS):
        instance.add_dynamic_partitions(PARTITIONS, [key])
    return defs.resolve_job_def(JOB).execute_in_process(
        partition_key=key, instance=instance, raise_on_error=False, **kwargs
    )


def _metadata(result, asset: str) -> dict:
    (mat,) = [m for m in result.asset_materializations_for_node(f"patients__{asset}")]
    return {k: v.value for k, v in mat.metadata.items()}


def _failure(result) -> str:
    """The messages of every failed step, with the errors that caused them."""
    messages = []
    for event in result.all_events:
        error = event.step_failure_data.error if event.is_step_failure else None
        while error is not None:
            messages.append(error.message)
            error = error.cause
    return " ".join(messages)


def test_two_releases_publish_with_metadata(tmp_path, spec_path, instance):
    first = people(120)
    # the second snapshot: 10 deletions, 15 insertions, 5 internal updates (of the non-identifier)
    second = first.iloc[10:].copy()
    second.loc[second.index[:5], "visits"] += 1
    second = pd.concat([second, people(15, seed=9, start=1000)], ignore_index=True)
    write_source(tmp_path / "data.duckdb", first)
    defs = _defs(tmp_path, spec_path)
    r1 = _run(defs, instance, "000001")
    assert r1.success
    write_source(tmp_path / "data.duckdb", second)
    r2 = _run(defs, instance, "000002")
    assert r2.success
    snap = _metadata(r2, "snapshot")
    assert (snap["rows"], snap["inserts"], snap["deletes"], snap["updates"]) == (125, 15, 10, 5)
    meta = _metadata(r2, "published_release")
    assert (meta["rows"], meta["inserts"], meta["deletes"], meta["updates"]) == (125, 15, 10, 5)
    for key in ("groups", "counterfeits", "utility/lm", "utility/ncp", "check/k_anonymity", "check/great_expectations"):
        assert isinstance(meta[key], int | float), key
    assert meta["check/k_anonymity"] == 1
    assert "data:image/png;base64," in meta["report"]
    manifest = ReleaseStore(tmp_path / "releases.duckdb", load_spec(spec_path)).manifest()
    assert manifest["release_id"].tolist() == [1, 2]
    assert manifest["rows"].tolist() == [120, 125]


def test_old_partition_keeps_its_snapshot(tmp_path, spec_path, instance):
    write_source(tmp_path / "data.duckdb", people(90))
    defs = _defs(tmp_path, spec_path)
    assert _run(defs, instance, "000001").success
    store = ReleaseStore(tmp_path / "releases.duckdb", load_spec(spec_path))
    before = store.snapshot(1)
    write_source(tmp_path / "data.duckdb", people(60, seed=3))  # today's rows differ entirely
    again = _run(defs, instance, "000001")
    assert again.success
    assert _metadata(again, "snapshot")["captured"] is False
    pd.testing.assert_frame_equal(store.snapshot(1), before)
    assert store.manifest()["rows"].tolist() == [90]


def _tamper(path, spec_path):
    """Give one candidate row a box of its own with its age bounds reversed: a class of size 1 (k-anonymity
    broken) and ``age__lo > age__hi`` (Great Expectations broken)."""
    with duckdb.connect(str(path)) as con:
        con.execute(
            "UPDATE private.candidate_release SET age__lo = age__hi + 5, zipcode__lo = 99999, zipcode__hi = 99999 "
            "WHERE rowid = (SELECT min(rowid) FROM private.candidate_release)"
        )


def test_failed_blocking_check_stops_publication(tmp_path, spec_path, instance):
    write_source(tmp_path / "data.duckdb", people(90))
    defs = _defs(tmp_path, spec_path)
    job = defs.resolve_job_def(JOB)
    instance.add_dynamic_partitions(PARTITIONS, ["000001"])
    staged = job.execute_in_process(
        partition_key="000001", instance=instance,
        asset_selection=[dg.AssetKey(["patients", "snapshot"]), dg.AssetKey(["patients", "release_candidate"])],
    )
    assert staged.success
    _tamper(tmp_path / "releases.duckdb", spec_path)
    candidate = dg.AssetKey(["patients", "release_candidate"])
    result = dg.materialize(
        [*defs.assets, *defs.asset_checks],
        selection=dg.AssetSelection.checks_for_assets(candidate)
        | dg.AssetSelection.assets(["patients", "published_release"]),
        partition_key="000001", instance=instance, resources=defs.resources, raise_on_error=False,
    )
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not evaluations["guarantee"].passed
    assert not evaluations["expectations"].passed
    assert evaluations["expectations"].severity == dg.AssetCheckSeverity.ERROR
    assert "age__hi, age__lo" in str(evaluations["expectations"].metadata["great_expectations/first violations"].value)
    assert not result.asset_materializations_for_node("patients__published_release")
    store = ReleaseStore(tmp_path / "releases.duckdb", load_spec(spec_path))
    assert store.release_ids() == []


def test_run_release_publishes_and_reraises_input_errors(tmp_path, instance):
    spec_path = write_spec(tmp_path, {"name": "l_diversity", "l": 2})
    with pytest.raises(SnapshotError, match="'disease'"):
        run_release(spec_path, tmp_path / "r.duckdb", people(50).drop(columns="disease"), instance=instance)
    summary = run_release(spec_path, tmp_path / "r.duckdb", people(200), instance=instance)
    assert summary["release_id"] == 1 and summary["partition_key"] == "000001"
    assert summary["checks"]["l_diversity"] is True
