"""The ``census_kdd_m_distinct`` demo: Census-KDD workers republished with m-Distinct (Li-Zhou) while the source
changes by inserts, deletes and internal updates (age + 1, the occupation moved inside its candidate update set),
through the code location's real definitions: source sensor tick -> release run -> published release."""

import dataclasses

import dagster as dg
import numpy as np
import pandas as pd
import pytest

from dagster_privrelease import demo as demos
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.orchestration import sensors
from dagster_privrelease.orchestration.definitions import QUIET, raise_unless_published
from dagster_privrelease.storage import ReleaseStore

NAME = "census_kdd_m_distinct"


@pytest.fixture(scope="module")
def occupations() -> pd.DataFrame:
    """Census-KDD workers with text occupation codes, loaded once (the demo's loader)."""
    return demos._census_kdd_occupations()


def test_within_update_sets_moves_every_value_inside_its_cus():
    """The demo's sensitive update rule: a value with a CUS of several values always changes, to a member of its
    CUS, all members reachable; a value without a CUS (or only itself) stays."""
    rule = demos.within_update_sets({"a": ["a", "b", "c"], "b": ["a", "b", "c"], "c": ["a", "b", "c"], "d": ["d"]})
    current = np.array(["a"] * 300 + ["d"] * 10 + ["z"] * 5, dtype=object)
    new = rule(current, np.random.default_rng(0))
    assert set(new[:300]) == {"b", "c"}
    assert (new[300:310] == "d").all() and (new[310:] == "z").all()


def test_the_code_location_shows_the_m_distinct_table(tmp_path):
    """The example code location (``build_definitions``, what ``workspace.yaml`` loads) has the table's assets,
    its source sensor, its release job and its change job, as the m-invariance demos have theirs."""
    defs = demos.build_definitions(tmp_path)
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {f"{NAME}/{step}" for step in ("snapshot", "release_candidate", "published_release")} <= keys
    assert defs.resolve_sensor_def(f"{NAME}_source_changed")
    assert defs.resolve_job_def(f"{NAME}_release") and defs.resolve_job_def(f"{NAME}_demo_changes")


def _source(demo: demos.Demo, home) -> pd.DataFrame:
    import duckdb

    with duckdb.connect(str(demo.folder(home) / "data.duckdb"), read_only=True) as con:
        return con.execute("SELECT * FROM source.people").df()


def _published_metadata(result: dg.ExecuteInProcessResult) -> dict:
    (event,) = [e for e in result.get_asset_materialization_events()
                if e.asset_key is not None and e.asset_key.path[-1] == "published_release"]
    materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
    return {k: v.value for k, v in materialization.metadata.items()}


def test_updates_are_republished_by_the_source_sensor(tmp_path, occupations, monkeypatch):
    """Release 1 from the created source, then one stream step (deletes, inserts, and updates of age and of the
    occupation inside its CUS) seen by the source sensor, which requests release 2: both published with every
    blocking check passed, m-Distinct and the SUG attack among them (not skipped), and release 2's metadata
    counting the source's inserts, deletes and updates."""
    demo = dataclasses.replace(demos.DEMOS[NAME], loader=lambda: occupations, base=1_200, batch=120, inserts=300)
    monkeypatch.setitem(demos.DEMOS, NAME, demo)
    spec = load_spec(demo.spec)
    cus = {k: set(v) for k, v in spec.model.params["update_sets"].items()}
    assert demos.demo_changes(NAME, tmp_path) == {"inserts": 1_200, "deletes": 0, "updates": 0}
    defs = demos.build_definitions(tmp_path)
    job = defs.resolve_job_def(f"{NAME}_release")
    cursor, metadata, steps = None, [], []
    with dg.instance_for_test() as instance:
        for step in range(2):
            if step:
                before = _source(demo, tmp_path)
                steps.append(demos.demo_changes(NAME, tmp_path))
                after = _source(demo, tmp_path)
                both = before.merge(after, on=spec.id, suffixes=("_old", "_new"))
                old, new = both[f"{spec.sensitive}_old"], both[f"{spec.sensitive}_new"]
                moved = old != new
                assert moved.sum() > 0  # the sensitive value itself changed for some survivors
                assert all(b in cus[a] for a, b in zip(old[moved], new[moved], strict=True))
                assert (both["age_new"] >= both["age_old"]).all() and (both["age_new"] > both["age_old"]).any()
            data = sensors.tick(defs, instance, f"{NAME}_source_changed", cursor)
            cursor = data.cursor
            (request,) = data.run_requests or []
            result = job.execute_in_process(partition_key=request.partition_key, tags=request.tags,
                                            instance=instance, raise_on_error=False, run_config=QUIET)
            raise_unless_published(result, NAME, str(request.partition_key))
            assert all(e.passed for e in result.get_asset_check_evaluations())
            metadata.append(_published_metadata(result))
    (counts,) = steps
    assert counts["updates"] > 0 and counts["deletes"] == 120 and counts["inserts"] == 300
    assert {k: metadata[1][k] for k in ("inserts", "deletes", "updates")} == counts
    verdicts = {row.data["report"]: row.data["outcome"] for row in metadata[1]["checks"].records}
    assert verdicts["m_distinct"] == "holds" and verdicts["sug"] == "holds"
    manifest = ReleaseStore(demo.folder(tmp_path) / "releases.duckdb", spec).manifest()
    assert manifest["release_id"].tolist() == [1, 2]
    for checks in manifest["checks"]:
        assert all(checks.values()) and {"m_distinct", "m_uniqueness", "sug"} <= set(checks)
    assert spec.id not in {k for m in metadata for k in m}  # no identifier in the UI's metadata
