"""Materialisations of the release assets in ``instance_for_test`` on temporary DuckDB files."""


import dagster as dg
import duckdb
import pandas as pd
import pytest

from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.errors import SnapshotError
from dagster_privrelease.orchestration import DuckDBTableSource, release_definitions, run_release
from dagster_privrelease.storage import ReleaseStore

from .conftest import people, write_source, write_spec

JOB = "patients_release"
PARTITIONS = "patients_releases"


def _defs(tmp_path, spec_path):
    source = DuckDBTableSource(database=str(tmp_path / "data.duckdb"), table="source.people")
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


def _check(result, name: str) -> dict:
    """The metadata of check ``name``'s evaluation in ``result``."""
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    return {k: v.value for k, v in evaluation.metadata.items()}


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
    assert (meta["dagster/row_count"], meta["genuine rows"]) == (125, 125)
    assert meta["dagster/table_name"] == "releases.published.release"
    schema = {c.name: c.description for c in meta["dagster/column_schema"].columns}
    assert list(schema)[:2] == ["release_id", "group_id"] and "age__lo" in schema and "id" not in schema
    assert (meta["inserts"], meta["deletes"], meta["updates"], meta["held_back"]) == (15, 10, 5, 0)
    for key in ("groups", "counterfeits", "LM", "NCP"):
        assert isinstance(meta[key], int | float), key
    verdicts = {row.data["report"]: row.data for row in meta["checks"].records}
    assert verdicts["k_anonymity"]["outcome"] == "holds" and verdicts["great_expectations"]["outcome"] == "holds"
    assert "data:image/svg+xml;base64," in meta["report"] and "**NCP**" in meta["report"]
    # what a data engineer reads: the plots first; no figure twice; no pass/fail flag as a number; 4 digits
    keys = list(meta)
    assert keys[:5] == ["genuine rows", "counterfeits", "LM", "NCP", "median query error"]
    assert not [k for k in keys if k.startswith(("check/", "utility/")) or k.endswith("/ok")]
    assert not {"rows", "rows (incl. counterfeits)"} & set(keys)
    floats = [v for v in meta.values() if isinstance(v, float)]
    assert floats and all(v == float(f"{v:.4g}") for v in floats)
    candidate = _metadata(r2, "release_candidate")
    assert {"LM", "NCP", "DM"} <= set(candidate) and not [k for k in candidate if "/" in k and "dagster" not in k
                                                           and k != "privrelease/backend"]
    assert candidate["privrelease/backend"] == "local"  # where the partition-parallel steps ran
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
    nodes = [a for a in [*(defs.assets or []), *(defs.asset_checks or [])] if isinstance(a, dg.AssetsDefinition)]
    result = dg.materialize(
        nodes,
        selection=dg.AssetSelection.checks_for_assets(candidate)
        | dg.AssetSelection.assets(["patients", "published_release"]),
        partition_key="000001", instance=instance, resources=defs.resources, raise_on_error=False,
    )
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not evaluations["guarantee"].passed
    assert not evaluations["expectations"].passed
    assert evaluations["expectations"].severity == dg.AssetCheckSeverity.ERROR
    (row,) = [r.data for r in evaluations["expectations"].metadata["verdict"].value.records]
    assert (row["outcome"], row["blocking"]) == ("broken", True)
    assert "expect_column_pair_values_a_to_be_greater_than_b on age__hi, age__lo: 1 row(s)" in row["reading"]
    assert evaluations["expectations"].metadata["failed expectations"].value >= 1
    guarantee = {r.data["report"]: r.data for r in evaluations["guarantee"].metadata["verdict"].value.records}
    assert any(r["outcome"] == "broken" and r["broken"] >= 1 for r in guarantee.values())
    assert all(set(r) == {"report", "kind", "outcome", "blocking", "reading", "checked", "broken", "bound"}
               for r in guarantee.values())  # counts and words: no column for an id or a group
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


def test_a_refusal_is_named_by_the_step_and_the_run_failure(tmp_path, instance):
    """A model that cannot publish: the step fails with a ``Failure`` whose description is the reason (no retry),
    and the run failure event, all the UI shows at first, carries that reason in its error's first line."""
    spec_path = write_spec(tmp_path, {"name": "l_diversity", "l": 4})
    rows = people(90)
    rows.loc[rows.index[4:], "disease"] = "flu"
    write_source(tmp_path / "data.duckdb", rows)
    result = _run(_defs(tmp_path, spec_path), instance, "000001")
    assert not result.success
    events = [r.dagster_event for r in instance.all_logs(result.run_id) if r.dagster_event is not None]
    (step,) = [e for e in events if e.is_step_failure]
    reason = "patients release 000001: sensitive value 'flu' is in 86 of the 90 rows"
    assert step.step_failure_data.user_failure_data.description.startswith(reason)
    (run,) = [e for e in events if e.event_type == dg.DagsterEventType.RUN_FAILURE]
    assert reason in run.job_failure_data.error.message.splitlines()[0]
