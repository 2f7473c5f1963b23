"""The kinds of source, called directly: fingerprints, reads, next keys, and a source file locked by its writer."""


import pytest

from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.errors import StoreError
from dagster_privrelease.orchestration import DuckDBChangeLogSource, DuckDBTableSource, FrameSource, Source

from .conftest import locked_by_another_process, people, write_source
from .test_order import _change_log


def _kinds(tmp_path) -> list[Source]:
    write_source(tmp_path / "data.duckdb", people(40))
    write_source(tmp_path / "data.duckdb", _change_log(), table="source.people_log")
    return [
        DuckDBTableSource(database=str(tmp_path / "data.duckdb"), table="source.people"),
        DuckDBChangeLogSource(database=str(tmp_path / "data.duckdb"), table="source.people_log"),
        FrameSource(people(40)),
    ]


def test_each_kind_fingerprints_reads_and_keys(tmp_path, spec_path):
    spec = load_spec(spec_path)
    table, log, frame = _kinds(tmp_path)
    assert [s.replays for s in (table, log, frame)] == [False, True, False]
    assert table.fingerprint(spec).rows == frame.fingerprint(spec).rows == 40
    assert log.fingerprint(spec).position == 3
    assert table.read(spec).equals(frame.read(spec).sort_values("id", ignore_index=True))
    assert sorted(log.read(spec, position=2)["id"]) == list(range(100))
    with pytest.raises(StoreError, match="log position"):
        log.read(spec)
    assert table.next_key(["000001", "000002"], table.fingerprint(spec)) == "000003"
    assert frame.next_key([], frame.fingerprint(spec)) == "000001"
    assert log.next_key(["000001"], log.fingerprint(spec)) == "000003"


def test_a_frame_fingerprint_moves_with_any_row(spec_path):
    spec = load_spec(spec_path)
    before = FrameSource(people(40)).fingerprint(spec)
    changed = people(40)
    changed.loc[7, "visits"] += 1
    assert FrameSource(changed).fingerprint(spec) != before
    assert FrameSource(people(40).iloc[::-1]).fingerprint(spec) == before  # row order is not a change


def test_a_source_file_locked_by_its_writer_names_the_holder(tmp_path, spec_path):
    path = tmp_path / "data.duckdb"
    write_source(path, people(40))
    with locked_by_another_process(path) as pid:
        source = DuckDBTableSource(database=str(path), table="source.people", retries=1, backoff=0.05)
        with pytest.raises(StoreError, match=f"source database is locked by .*{pid}"):
            source.fingerprint(load_spec(spec_path))
