"""``LandingZoneSource``: snapshot and changes files applied in name order (against a row-by-row reference written
from the definition), half-written files never read, and the sensor picking each new file once."""

import os

import pandas as pd
import pytest

from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.errors import SnapshotError, StoreError
from dagster_privrelease.orchestration import LandingZoneSource, release_definitions
from dagster_privrelease.orchestration.sensors import tick
from dagster_privrelease.storage import ReleaseStore

from .test_assets import JOB
from .test_sensor_promises import patients

SENSOR = "patients_source_changed"


def _changes(rows: pd.DataFrame, ops: list[str]) -> pd.DataFrame:
    return rows.assign(op=ops)


def _reference(files: list[tuple[str, pd.DataFrame]], columns: list[str]) -> pd.DataFrame:
    """The zone's rows from the definition, one row at a time: a snapshot replaces every row, a change puts or
    removes one id."""
    state: dict[str, dict] = {}
    for kind, frame in files:
        if kind == "snapshot":
            state = {}
        for record in frame.to_dict("records"):
            if kind == "changes" and record["op"] == "delete":
                state.pop(record["id"], None)
            else:
                state[record["id"]] = {c: record[c] for c in columns}
    return pd.DataFrame(list(state.values()), columns=columns).sort_values("id", ignore_index=True)


def _half_written(path, frame: pd.DataFrame) -> None:
    """``frame`` as Parquet at ``path``, cut off before its footer: a file still being copied in place."""
    frame.to_parquet(path, index=False)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_files_are_applied_in_name_order_as_the_definition_says(tmp_path, spec_path):
    spec = load_spec(spec_path)
    zone = tmp_path / "zone"
    zone.mkdir()
    base = patients(30)
    early = _changes(patients(3, seed=1, start=200), ["insert"] * 3)
    first = _changes(pd.concat([base.iloc[[2, 5]].assign(visits=99), base.iloc[[7]], patients(2, seed=2, start=300)]),
                     ["update", "update", "delete", "insert", "insert"])
    second = _changes(pd.concat([base.iloc[[5]], patients(2, seed=2, start=300).iloc[[0]].assign(visits=7),
                                 base.iloc[[9]].assign(visits=1), base.iloc[[9]]]),
                      ["delete", "update", "update", "delete"])  # p009 updated then deleted in one batch: deleted
    files = [("changes", early), ("snapshot", base), ("changes", first), ("changes", second)]
    early.to_parquet(zone / "changes-0000.parquet", index=False)  # before the snapshot: replaced by it
    base.to_parquet(zone / "snapshot-0001.parquet", index=False)
    first.to_csv(zone / "changes-0002.csv", index=False)
    second.to_parquet(zone / "changes-0003.parquet", index=False)
    (zone / "notes.txt").write_text("not a file of the zone")
    source = LandingZoneSource(folder=str(zone))
    rows = source.read(spec)
    expected = _reference(files, spec.columns)
    assert rows["id"].tolist() == expected["id"].tolist()
    assert rows["visits"].astype(int).tolist() == expected["visits"].tolist()
    assert {"p002", "p300"} <= set(rows["id"]) and not {"p005", "p007", "p009", "p200"} & set(rows["id"])
    assert source.fingerprint(spec).rows == 4


def test_a_half_written_file_is_never_read(tmp_path, spec_path):
    spec = load_spec(spec_path)
    zone = tmp_path / "zone"
    zone.mkdir()
    patients(20).to_parquet(zone / "snapshot-0001.parquet", index=False)
    source = LandingZoneSource(folder=str(zone))
    before, rows = source.fingerprint(spec), source.read(spec)
    batch = _changes(patients(2, seed=3, start=400), ["insert", "insert"])
    _half_written(zone / "changes-0002.parquet", batch)  # copied in place, footer not there yet
    batch.to_csv(zone / ".changes-0003.csv", index=False)  # written under a hidden name, to be renamed
    batch.to_csv(zone / "changes-0004.csv.tmp", index=False)
    assert source.fingerprint(spec) == before
    pd.testing.assert_frame_equal(source.read(spec), rows)
    batch.to_parquet(zone / "changes-0002.parquet", index=False)  # the copy completes
    assert source.fingerprint(spec) != before
    assert {"p400", "p401"} <= set(source.read(spec)["id"])


def test_a_bad_change_or_folder_gives_one_line(tmp_path, spec_path):
    spec = load_spec(spec_path)
    with pytest.raises(StoreError, match="no such folder"):
        LandingZoneSource(folder=str(tmp_path / "nowhere")).fingerprint(spec)
    zone = tmp_path / "zone"
    zone.mkdir()
    _changes(patients(3), ["insert", "upsert", "insert"]).to_csv(zone / "changes-0001.csv", index=False)
    with pytest.raises(SnapshotError, match=r"changes-0001.csv: column 'op', row 2: a change is one of") as refused:
        LandingZoneSource(folder=str(zone)).read(spec)
    assert "\n" not in str(refused.value) and "p001" not in str(refused.value)
    patients(3).to_csv(zone / "whole.csv", index=False)
    everything = LandingZoneSource(folder=str(zone), kind="snapshot")  # the spec says the kind: no op column
    assert [p.name for p, kind in everything.files()] == ["changes-0001.csv", "whole.csv"]


def test_the_sensor_picks_each_new_file_once(tmp_path, spec_path, instance):
    spec = load_spec(spec_path)
    zone = tmp_path / "zone"
    zone.mkdir()
    defs = release_definitions(spec_path, tmp_path / "releases.duckdb", LandingZoneSource(folder=str(zone)))
    assert "source is empty" in tick(defs, instance, SENSOR, None).skip_message
    patients(60).to_parquet(zone / "snapshot-0001.parquet", index=False)
    cursor = None
    for batch in (None, _changes(patients(3, seed=5, start=600), ["insert"] * 3)):
        if batch is not None:
            _half_written(zone / "changes-0002.parquet", batch)
            waiting = tick(defs, instance, SENSOR, cursor)
            assert not waiting.run_requests and "unchanged" in waiting.skip_message
            batch.to_parquet(zone / ".changes-0002.parquet", index=False)
            os.replace(zone / ".changes-0002.parquet", zone / "changes-0002.parquet")
        data = tick(defs, instance, SENSOR, cursor)
        (request,) = data.run_requests
        assert defs.resolve_job_def(JOB).execute_in_process(
            partition_key=request.partition_key, tags=request.tags, instance=instance
        ).success
        idle = tick(defs, instance, SENSOR, data.cursor)
        assert not idle.run_requests and "unchanged" in idle.skip_message
        cursor = idle.cursor
    store = ReleaseStore(tmp_path / "releases.duckdb", spec)
    assert store.release_ids() == [1, 2]
    assert len(store.snapshot(1)) == 60 and {"p600", "p601", "p602"} <= set(store.snapshot(2)["id"])
