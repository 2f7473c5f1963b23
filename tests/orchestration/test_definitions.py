"""What ``release_definitions`` builds beyond the defaults: an asset per model stage, and names from a translator."""

import dataclasses

import dagster as dg
import pandas as pd
import pytest

from dagster_privrelease.core import models
from dagster_privrelease.core.models import Stage
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.orchestration import DuckDBTableSource, ReleaseTranslator, release_definitions
from dagster_privrelease.storage import ReleaseStore

from .conftest import people, write_source, write_spec
from .test_assets import JOB, PARTITIONS, _metadata

SNAPSHOT, TALLY, CANDIDATE, PUBLISHED = (
    dg.AssetKey(["patients", step]) for step in ("snapshot", "tally", "release_candidate", "published_release")
)


def tally(snapshot: pd.DataFrame, spec, previous, rng) -> dict[str, pd.DataFrame]:
    """A toy stage: the count of each sensitive value in T(j), kept privately with the release."""
    counts = snapshot[spec.sensitive].value_counts().rename_axis("value").reset_index(name="count")
    return {"tally": counts}


def publish_tallied(snapshot, spec, previous, rng, *, tally: pd.DataFrame):
    """k-anonymity, once the stage's frame for this very snapshot was handed over."""
    assert int(tally["count"].sum()) == len(snapshot)
    return models.descriptor("k_anonymity").publish(snapshot, spec, previous, rng)


@pytest.fixture
def staged_model():
    """``k_anonymity`` with one stage, ``tally``, registered from the tests alone."""
    model = dataclasses.replace(
        models.descriptor("k_anonymity"), name="toy_tallied", publish=publish_tallied,
        stages=(Stage("tally", "The count of each sensitive value (a toy stage).", tally),),
    )
    with models.registered(model):
        yield model


def _release(defs, instance, key: str) -> dg.ExecuteInProcessResult:
    instance.add_dynamic_partitions(PARTITIONS, [key])
    return defs.resolve_job_def(JOB).execute_in_process(partition_key=key, instance=instance, raise_on_error=False)


def test_a_model_stage_is_an_asset_between_snapshot_and_candidate(tmp_path, instance, staged_model):
    spec_path = write_spec(tmp_path, {"name": "toy_tallied", "k": 3})
    write_source(tmp_path / "data.duckdb", people(90))
    source = DuckDBTableSource(database=str(tmp_path / "data.duckdb"), table="source.people")
    defs = release_definitions(spec_path, tmp_path / "releases.duckdb", source)
    graph = defs.resolve_asset_graph()
    assert graph.get(TALLY).parent_keys == {SNAPSHOT}
    assert graph.get(CANDIDATE).parent_keys == {SNAPSHOT, TALLY}
    stage = defs.resolve_assets_def(TALLY)
    assert stage.node_def.pool == "privrelease_patients" and stage.group_names_by_key[TALLY] == "patients"
    assert stage.partitions_def == defs.resolve_assets_def(SNAPSHOT).partitions_def
    for key in ("000001", "000002"):
        write_source(tmp_path / "data.duckdb", people(90 + int(key), seed=int(key)))  # rows of a new release
        result = _release(defs, instance, key)
        assert result.success
        order = [e.asset_key for e in result.get_asset_materialization_events()]
        assert order == [SNAPSHOT, TALLY, CANDIDATE, PUBLISHED]
        meta = _metadata(result, "tally")
        assert meta == {"frames": 1, "tally/rows": 5, "release_id": int(key)}  # counts, never the frame
    store = ReleaseStore(tmp_path / "releases.duckdb", load_spec(spec_path))
    assert store.manifest()["model"].tolist() == ["toy_tallied", "toy_tallied"]


class WarehouseTranslator(ReleaseTranslator):
    """Every key under ``warehouse/``, one group for every table, a pool per table of the warehouse's naming."""

    def get_asset_key(self, table: str, step: str) -> dg.AssetKey:
        return super().get_asset_key(table, step).with_prefix("warehouse")

    def get_group_name(self, table: str) -> str:
        return "privacy"

    def get_pool(self, table: str) -> str:
        return f"warehouse_{table}"


def test_a_translator_names_keys_groups_and_pools(tmp_path, spec_path, instance):
    write_source(tmp_path / "data.duckdb", people(90))
    source = DuckDBTableSource(database=str(tmp_path / "data.duckdb"), table="source.people")
    defs = release_definitions(spec_path, tmp_path / "releases.duckdb", source, translator=WarehouseTranslator())
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    steps = ("snapshot", "release_candidate", "published_release")
    assert keys == {f"warehouse/patients/{step}" for step in (*steps, "source")}  # the source: an external asset
    candidate = dg.AssetKey(["warehouse", "patients", "release_candidate"])
    checks = {k.name for k in defs.resolve_asset_graph().asset_check_keys if k.asset_key == candidate}
    assert checks == {"guarantee", "attacks", "expectations"}
    for step in steps:
        asset = defs.resolve_assets_def(dg.AssetKey(["warehouse", "patients", step]))
        assert set(asset.group_names_by_key.values()) == {"privacy"}
        assert asset.node_def.pool == "warehouse_patients"
    result = _release(defs, instance, "000001")
    assert result.success
    assert result.asset_materializations_for_node("warehouse__patients__published_release")
    assert ReleaseStore(tmp_path / "releases.duckdb", load_spec(spec_path)).release_ids() == [1]
