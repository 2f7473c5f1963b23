"""The ``adult_xy`` demo: Adult's two projections of Wang-Fung §6 published in turn with (X, Y)-privacy through
release requests, through the code location's real definitions and the request sensor."""

import dataclasses

import dagster as dg

from dagster_privrelease import demo as demos
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.orchestration import sensors
from dagster_privrelease.orchestration.definitions import QUIET, raise_unless_published
from dagster_privrelease.storage import ReleaseStore, read_published

ROWS = 800


def test_two_projections_published_in_turn_each_link_every_box_to_three_occupations(tmp_path, adult, monkeypatch):
    """The demo's first step creates the source (text ids) and drops its two requests; a later step changes no
    row ((X, Y)-privacy refuses a table that changed). Two ticks of the request sensor publish the immigration
    projection, then the taxation one, joined with it (§3.3), each with only its own attributes, every
    blocking check passing: the (X, Y)-anonymity verifier and the attacks, join and possible-world ones among them.
    Checked here from Def. 3.1 alone: the join matches occupation on equality, so every x of a join is linked to
    the occupations of one published box of the release, and every box must hold at least k = 3 of them."""
    people = adult.assign(id=[f"p{i:05d}" for i in adult["id"]])
    demo = dataclasses.replace(demos.DEMOS["adult_xy"], loader=lambda: people, base=ROWS)
    monkeypatch.setitem(demos.DEMOS, "adult_xy", demo)
    assert demos.demo_changes("adult_xy", tmp_path) == {"inserts": ROWS, "deletes": 0, "updates": 0}
    assert demos.demo_changes("adult_xy", tmp_path) == {"inserts": 0, "deletes": 0, "updates": 0}
    folder = demo.folder(tmp_path)
    assert sorted(p.name for p in (folder / "requests").glob("*.yaml")) == ["01.yaml", "02.yaml"]
    defs = demos.build_definitions(tmp_path)
    job = defs.resolve_job_def("adult_xy_release")
    cursor = None
    with dg.instance_for_test() as instance:
        for _ in demo.requests:
            data = sensors.tick(defs, instance, "adult_xy_release_requests", cursor)
            cursor = data.cursor
            (request,) = data.run_requests or []
            result = job.execute_in_process(partition_key=request.partition_key, tags=request.tags,
                                            instance=instance, raise_on_error=False, run_config=QUIET)
            raise_unless_published(result, "adult_xy", str(request.partition_key))
            assert all(e.passed for e in result.get_asset_check_evaluations())
    spec = load_spec(demo.spec)
    store = ReleaseStore(folder / "releases.duckdb", spec)
    manifest = store.manifest()
    immigration, taxation = (set(r) for r in demo.requests)
    assert [set(a) for a in manifest["attributes"]] == [immigration, taxation]
    for checks in manifest["checks"]:
        assert all(checks.values()), checks
    verdicts = read_published(folder / "releases.duckdb", 2).verdicts.set_index("name")
    for name in ("xy_anonymity", "join", "possible_worlds", "forward", "cross", "backward"):  # they ran
        assert verdicts.loc[name, "passed"] and not verdicts.loc[name, "summary"].get("skipped"), name
    history = store.history()
    for release_id, attributes in enumerate([immigration, taxation], start=1):
        rows = history.release(release_id)
        assert len(rows) == ROWS
        left_out = [a for a in spec.quasi_identifiers if a not in attributes]
        assert rows[[f"{a}__lo" for a in left_out]].isna().all().all()
        occupations = rows.groupby(sorted(attributes), observed=True)[spec.sensitive].nunique()
        assert occupations.min() >= 3, (release_id, occupations.min())
        assert len(occupations) > 1  # generalised, not suppressed into one box
