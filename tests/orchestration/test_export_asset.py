"""The opt-in export (``release_definitions(..., export=DIR)``): the ``exported_release`` asset and the
certificate linked from the published release's metadata."""

from __future__ import annotations

import json

import dagster as dg
import duckdb

from dagster_privrelease.orchestration import DuckDBTableSource, release_definitions

from .conftest import people, write_source
from .test_assets import _check, _metadata, _run


def test_each_published_release_is_exported_and_certified_by_its_run(tmp_path, spec_path, instance):
    export = tmp_path / "export"
    source = DuckDBTableSource(database=str(tmp_path / "data.duckdb"), table="source.people")
    defs = release_definitions(spec_path, tmp_path / "releases.duckdb", source, export=export)
    assert dg.AssetKey(["patients", "exported_release"]) in defs.resolve_all_asset_keys()
    first = people(60)
    write_source(tmp_path / "data.duckdb", first)
    assert _run(defs, instance, "000001").success
    write_source(tmp_path / "data.duckdb", first.iloc[6:])
    second = _run(defs, instance, "000002")
    assert second.success
    exported = _metadata(second, "exported_release")
    assert exported["path"] == str(export / "release" / "release_id=2") and exported["rows"] == 54
    published = _metadata(second, "published_release")
    certificate = export / "certificate" / "release_id=2.html"
    assert published["certificate"] == str(certificate) and "<svg" in certificate.read_text()
    with duckdb.connect() as con:
        back = con.sql(f"SELECT release_id, count(*) FROM read_parquet('{export}/release/*/*.parquet', "
                       "hive_partitioning = true) GROUP BY ALL ORDER BY 1").fetchall()
        exported_verdicts = con.sql(f"SELECT name, passed, violations FROM read_parquet('{export}/verdict/*/*.parquet', "
                                    "hive_partitioning = true) WHERE release_id = 2 ORDER BY name").fetchall()
    assert back == [(1, 60), (2, 54)]
    # the counts the run's checks recorded were kept with the release (published.verdict), expectations included
    with duckdb.connect(str(tmp_path / "releases.duckdb"), read_only=True) as con:
        verdicts = con.sql("SELECT name, kind, passed, violations, summary FROM published.verdict "
                           "WHERE release_id = 2").df().set_index("name")
    assert verdicts.loc["k_anonymity", "kind"] == "guarantee" and verdicts.loc["intersection", "kind"] == "attack"
    assert verdicts.loc["great_expectations", "passed"]
    assert exported_verdicts == [(n, bool(v.passed), int(v.violations)) for n, v in verdicts.sort_index().iterrows()]
    attacks = {row.data["report"]: row.data for row in _check(second, "attacks")["verdict"].records}
    assert json.loads(verdicts.loc["intersection", "summary"])["checked"] == attacks["intersection"]["checked"]
    assert verdicts.loc["intersection", "violations"] == attacks["intersection"]["broken"] > 0
