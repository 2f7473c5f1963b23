"""What the Dagster UI shows, read through Dagster's GraphQL API (the webserver's own schema) against an
in-process workspace: the assets' descriptions and lineage, the published release's standard metadata, a check's
description and verdict table, and a refused run's failure. One small history of two releases (sequential
l-diversity, l = 2): release 1 publishes, release 2 deletes five people and is refused."""

from __future__ import annotations

import importlib.util
import json
import textwrap

import dagster as dg
import pytest
from dagster._core.test_utils import in_process_test_workspace
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster_graphql.test.utils import execute_dagster_graphql

from .conftest import people, write_source, write_spec

GUARANTEE = "sequential l-diversity (Shmueli & Tassa), l = 2: every person is linked to 2 different values of disease"
CANDIDATE = {"path": ["patients", "release_candidate"]}


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """``(query, published run id, refused run id)`` after release 1 published and release 2 was refused;
    ``query(text, **variables)`` is the GraphQL answer's data."""
    folder = tmp_path_factory.mktemp("ui")
    spec = write_spec(folder, {"name": "sequential_l_diversity", "l": 2})
    first = people(40)
    write_source(folder / "data.duckdb", first)
    location = folder / "location.py"
    location.write_text(textwrap.dedent(f"""
        from dagster_privrelease import release_definitions
        from dagster_privrelease.orchestration import DuckDBTableSource

        defs = release_definitions({str(spec)!r}, {str(folder / "releases.duckdb")!r},
                                   DuckDBTableSource(database={str(folder / "data.duckdb")!r}, table="source.people"))
    """))
    module_spec = importlib.util.spec_from_file_location("ui_location", location)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    release = module.defs.resolve_job_def("patients_release")
    origin = LoadableTargetOrigin(python_file=str(location), attribute="defs")
    with dg.instance_for_test() as instance, in_process_test_workspace(instance, origin) as context:
        instance.add_dynamic_partitions("patients_releases", ["000001", "000002"])
        published = release.execute_in_process(partition_key="000001", instance=instance, raise_on_error=False)
        write_source(folder / "data.duckdb", first.iloc[5:])  # five people deleted: the model refuses
        refused = release.execute_in_process(partition_key="000002", instance=instance, raise_on_error=False)
        assert published.success and not refused.success

        def query(text: str, **variables) -> dict:
            return execute_dagster_graphql(context, text, variables).data

        yield query, published.run_id, refused.run_id


NODES = """{ assetNodes { assetKey { path } description groupName kinds isExecutable dependencyKeys { path }
                         tags { key value } } }"""


def test_every_asset_says_what_is_protected_and_the_source_is_upstream(ui):
    query, _, _ = ui
    nodes = {"/".join(n["assetKey"]["path"]): n for n in query(NODES)["assetNodes"]}
    assert set(nodes) == {f"patients/{step}" for step in ("source", "snapshot", "possible_worlds",
                                                          "release_candidate", "published_release")}
    for key, node in nodes.items():
        assert node["groupName"] == "patients"
        if key != "patients/source":
            assert GUARANTEE in node["description"], key
            assert {"key": "privrelease/model", "value": "sequential_l_diversity"} in node["tags"]
    source = nodes["patients/source"]
    assert not source["isExecutable"] and "duckdb" in source["kinds"] and "source.people" in source["description"]
    assert nodes["patients/snapshot"]["dependencyKeys"] == [{"path": ["patients", "source"]}]
    assert "table" in nodes["patients/published_release"]["kinds"]
    for figure in ("**LM**", "**NCP**", "**median query error**"):  # defined where they are shown
        assert figure in nodes["patients/published_release"]["description"]


PUBLISHED = """query($key: AssetKeyInput!) { assetOrError(assetKey: $key) { ... on Asset {
    assetMaterializations(partitions: ["000001"]) { metadataEntries { label __typename
        ... on IntMetadataEntry { intValue } ... on FloatMetadataEntry { floatValue } ... on TextMetadataEntry { text }
        ... on TableSchemaMetadataEntry { schema { columns { name type description } } }
        ... on TableMetadataEntry { table { records } } } } } } }"""


def test_the_published_release_carries_the_standard_table_metadata(ui):
    query, _, _ = ui
    asset = query(PUBLISHED, key={"path": ["patients", "published_release"]})["assetOrError"]
    (materialization,) = asset["assetMaterializations"]
    entries = {e["label"]: e for e in materialization["metadataEntries"]}
    assert entries["dagster/row_count"]["intValue"] == 40
    assert entries["dagster/table_name"]["text"] == "releases.published.release"
    columns = {c["name"]: c for c in entries["dagster/column_schema"]["schema"]["columns"]}
    assert {"release_id", "group_id", "age", "age__lo", "age__hi", "visits", "disease"} <= set(columns)
    assert "id" not in columns and "lower bound" in columns["age__lo"]["description"]
    # figures are numbers under one name each; verdicts are words in a table, never a plotted 0/1
    assert {"LM", "NCP"} <= {k for k, e in entries.items() if e["__typename"] == "FloatMetadataEntry"}
    assert not [k for k in entries if k.startswith(("check/", "utility/")) or k.endswith("/ok")]
    rows = [json.loads(r) for r in entries["checks"]["table"]["records"]]
    assert {r["outcome"] for r in rows} <= {"holds", "not run"} and any(r["outcome"] == "holds" for r in rows)


CHECKS = """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
    assetChecksOrError { ... on AssetChecks { checks { name description blocking } } } } } }"""
EXECUTIONS = """query($key: AssetKeyInput!, $name: String!) {
    assetCheckExecutions(assetKey: $key, checkName: $name, limit: 5) { runId status partition
        evaluation { description metadataEntries { label __typename ... on TableMetadataEntry { table { records } }
                                                   ... on IntMetadataEntry { intValue } } } } }"""


def test_a_check_says_what_it_proves_and_reads_as_a_verdict(ui):
    query, published, _ = ui
    checks = query(CHECKS, key=CANDIDATE)["assetNodeOrError"]["assetChecksOrError"]["checks"]
    described = {c["name"]: c["description"] for c in checks}
    assert set(described) == {"guarantee", "attacks", "expectations"} and all(c["blocking"] for c in checks)
    assert described["guarantee"].startswith("Proves") and GUARANTEE in described["guarantee"]
    assert "possible_worlds" in described["attacks"] and "identifier" in described["expectations"]
    executions = query(EXECUTIONS, key=CANDIDATE, name="attacks")["assetCheckExecutions"]
    (ran,) = [e for e in executions if e["runId"] == published]
    assert ran["status"] == "SUCCEEDED" and ran["evaluation"]["description"].startswith("Holds")
    entries = {e["label"]: e for e in ran["evaluation"]["metadataEntries"]}
    rows = {r["report"]: r for r in map(json.loads, entries["verdict"]["table"]["records"])}
    # the first release: no earlier release to combine with, so each attack says it did not run, and why
    assert rows["intersection"]["outcome"] in {"holds", "not run"}
    assert all(r["reading"] for r in rows.values())
    assert all(r["outcome"] == "holds" or r["reading"].startswith("not run: ") for r in rows.values())
    plotted = {k for k, e in entries.items() if e["__typename"] in {"IntMetadataEntry", "FloatMetadataEntry"}}
    assert plotted and plotted <= {"disclosures", "people attacked", "fewest candidate values"}


EVENTS = """query($runId: ID!) { logsForRun(runId: $runId) { ... on EventConnection { events { __typename
    ... on ExecutionStepFailureEvent { stepKey error { message errorChain { error { message } } }
                                       failureMetadata { description } } } } } }"""


def test_a_refusal_is_shown_as_a_refusal(ui):
    query, _, refused = ui
    events = query(EVENTS, runId=refused)["logsForRun"]["events"]
    (failure,) = [e for e in events if e["__typename"] == "ExecutionStepFailureEvent"]
    assert failure["stepKey"] == "patients__possible_worlds"
    reason = failure["failureMetadata"]["description"]
    assert reason.startswith("patients release 000002: 5 tuple(s) of release 1 are not in the snapshot (deleted)")
    assert "To publish now, release a snapshot that still holds them" in reason  # advice fit for mid-history
    assert "Use the m_invariance model" not in reason
    assert failure["error"]["errorChain"] == []  # the reason once, no chained error
    # the checks of the candidate never built: not run in that run (Dagster: EXECUTION_FAILED, no verdict), never
    # a broken guarantee (FAILED with an evaluation)
    for name in ("guarantee", "attacks", "expectations"):
        executions = query(EXECUTIONS, key=CANDIDATE, name=name)["assetCheckExecutions"]
        (run,) = [e for e in executions if e["runId"] == refused]
        assert run["status"] != "FAILED" and run["evaluation"] is None
