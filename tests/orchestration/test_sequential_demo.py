"""The ``adult_requests`` demo: Adult published with sequential l-diversity (Shmueli-Tassa) through release
requests, each with its own attributes, through the code location's real definitions and the request sensor."""

import dataclasses

import dagster as dg

from dagster_privrelease import demo as demos
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.orchestration import sensors
from dagster_privrelease.orchestration.definitions import QUIET, raise_unless_published
from dagster_privrelease.storage import ReleaseStore

#: Two of the ten random attribute subsets of Shmueli-Tassa Fig. 14 (occupation, the sensitive value, in both).
REQUESTS = (("age", "sex", "marital_status", "race"), ("education", "marital_status", "workclass", "native_country"))


def _metadata_text(instance: dg.DagsterInstance, run_id: str) -> tuple[str, dict[str, set[str]]]:
    """Every log message and metadata entry of a run as text, and the metadata keys of each materialised asset."""
    text, keys = [], {}
    for entry in instance.all_logs(run_id):
        text.append(entry.user_message or "")
        event = entry.dagster_event
        if event is None:
            continue
        data = event.event_specific_data
        materialization = getattr(data, "materialization", None)
        metadata = getattr(materialization, "metadata", None) or getattr(data, "metadata", None) or {}
        text += [f"{k}={v.value!r}" for k, v in metadata.items()]
        if materialization is not None:
            keys.setdefault(materialization.asset_key.to_user_string(), set()).update(metadata)
    return "\n".join(text), keys


def test_two_requests_with_their_own_attributes_are_published(tmp_path, adult, monkeypatch):
    """The demo's first step creates the source and drops its requests; each tick of the request sensor turns one
    into a run (snapshot -> possible_worlds -> candidate -> checks -> published) of its own attributes. Every
    blocking check passes (the model's verifiers, the join attack with V0 and the possible-world attack among
    them), the manifest lists each release's attributes, and no metadata or log line carries the world set:
    the possible_worlds asset reports row counts only."""
    demo = dataclasses.replace(demos.DEMOS["adult_requests"], loader=lambda: adult, base=2_000, batch=200,
                               requests=REQUESTS)
    monkeypatch.setitem(demos.DEMOS, "adult_requests", demo)
    assert demos.demo_changes("adult_requests", tmp_path)["inserts"] == 2_000
    folder = demo.folder(tmp_path)
    assert sorted(p.name for p in (folder / "requests").glob("*.yaml")) == ["01.yaml", "02.yaml"]
    defs = demos.build_definitions(tmp_path)
    job = defs.resolve_job_def("adult_requests_release")
    cursor, texts, keys = None, [], {}
    with dg.instance_for_test() as instance:
        for attributes in REQUESTS:
            data = sensors.tick(defs, instance, "adult_requests_release_requests", cursor)
            cursor = data.cursor
            (request,) = data.run_requests or []
            assert set(request.tags[sensors.ATTRIBUTES_TAG].split(",")) == set(attributes)  # in the spec's order
            result = job.execute_in_process(partition_key=request.partition_key, tags=request.tags,
                                            instance=instance, raise_on_error=False, run_config=QUIET)
            raise_unless_published(result, "adult_requests", str(request.partition_key))
            steps = [e.asset_key.to_user_string() for e in result.get_asset_materialization_events()
                     if e.asset_key is not None]
            assert steps == [f"adult_requests/{s}" for s in ("snapshot", "possible_worlds", "release_candidate",
                                                            "published_release")]
            assert all(e.passed for e in result.get_asset_check_evaluations())
            text, run_keys = _metadata_text(instance, result.run_id)
            texts.append(text)
            keys.update(run_keys)
    store = ReleaseStore(folder / "releases.duckdb", load_spec(demo.spec))
    manifest = store.manifest()
    assert [set(a) for a in manifest["attributes"]] == [set(r) for r in REQUESTS]
    for checks in manifest["checks"]:
        assert all(checks.values()), checks
        assert {"worlds_admitted", "world_diversity", "join", "possible_worlds"} <= set(checks)
    history = store.history()
    for release_id, attributes in enumerate(REQUESTS, start=1):
        rows = history.release(release_id)
        left_out = [a for a in history.spec.quasi_identifiers if a not in attributes]
        assert rows[[f"{a}__lo" for a in attributes]].notna().all().all()
        assert rows[[f"{a}__lo" for a in left_out]].isna().all().all()
        assert rows["group_id"].isna().all()  # per-tuple generalisation
    assert keys["adult_requests/possible_worlds"] <= {"frames", "possible_worlds/rows", "release_id"}
    pairs = history.states["possible_worlds"].head(50)
    for text in texts:  # neither the compact worlds' column nor any of their (id, source) pairs
        assert "source_id" not in text
        assert not any(f"{a}, {b}" in text or f"{a},{b}" in text for a, b in zip(pairs["id"], pairs["source_id"],
                                                                                   strict=True))
