"""Snapshot files read as written (issue #22 item 4): ids and values are text as they stand in a CSV (``007`` is not
``7``, ``None`` and ``NA`` are values), only empty cells (and the spec's ``csv.missing`` markers) are missing, numbers
are parsed for the columns read as numbers, a column named twice is refused, and zero-padded ids survive every step
from the file to the published history."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from dagster_privrelease import pipeline
from dagster_privrelease.core.spec import parse_spec, validate_snapshot
from dagster_privrelease.errors import SnapshotError, SpecError, StoreError
from dagster_privrelease.storage import ReleaseStore

RAW = {
    "name": "clinic", "id": "pid", "sensitive": "disease",
    "quasi_identifiers": {"age": {"type": "numeric"}, "sex": {"type": "categorical"}},
    "non_identifiers": ["ward"],
    "model": {"name": "m_invariance", "m": 2},
}
SPEC = parse_spec(RAW)
#: Four people whose ids read 7 as numbers, and four others.
PADDED = ["007", "07", "7", "0007", "p1", "p01", "008", "8"]
DISEASES = ["flu", "hiv", "None", "NA", "flu", "hiv", "NULL", "n/a"]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def csv_rows(ids, ages, diseases, wards=None) -> str:
    wards = wards or ["001"] * len(ids)
    sexes = ["F", "M"] * len(ids)
    lines = [f"{i},{a},{s},{w},{d}" for i, a, s, w, d in zip(ids, ages, sexes, wards, diseases, strict=False)]
    return "pid,age,sex,ward,disease\n" + "\n".join(lines) + "\n"


def test_zero_padded_ids_are_different_people(tmp_path):
    path = write(tmp_path / "t.csv", csv_rows(PADDED, range(30, 38), DISEASES))
    frame = pipeline.read_snapshot(path, SPEC)
    assert frame["pid"].tolist() == PADDED
    assert validate_snapshot(frame, SPEC)["pid"].tolist() == PADDED  # four people, not "duplicate id(s) [7, 7, 7]"


def test_zero_padded_ids_survive_every_step_to_the_published_history(tmp_path):
    first = pipeline.read_snapshot(write(tmp_path / "t1.csv", csv_rows(PADDED, range(30, 38), DISEASES)), SPEC)
    # release 2: "7" and "8" leave, "00007" and "00008" arrive with their values; "07", "007", "008" stay
    ids = [{"7": "00007", "8": "00008"}.get(p, p) for p in PADDED]
    second = pipeline.read_snapshot(write(tmp_path / "t2.csv", csv_rows(ids, range(30, 38), DISEASES)), SPEC)
    db = tmp_path / "clinic.duckdb"
    with ReleaseStore(db, SPEC).session() as store:
        one = pipeline.release_next(store, first)
        assert (one["release_id"], one["inserts"]) == (1, 8)
        assert pipeline.unchanged(store, first) == 1
        assert pipeline.unchanged(store, second) is None  # 00007 is not 7
        assert pipeline.stage(store, 2, second) == len(ids)
        assert sorted(store.snapshot(2)["pid"]) == sorted(ids)
        assert sorted(pipeline.make_candidate(store, 2).hosting["pid"]) == sorted(ids)
        assert sorted(store.candidate(2).hosting["pid"]) == sorted(ids)
        two = pipeline.publish(store, 2, pipeline.judge(store, 2))
        assert (two["release_id"], two["inserts"], two["deletes"]) == (2, 2, 2)
        for release_id, table in ((1, first), (2, second)):
            stored = store.snapshot(release_id)
            assert stored is not None and sorted(stored["pid"]) == sorted(table["pid"])
    with duckdb.connect(str(db), read_only=True) as con:
        types = dict(con.execute("SELECT column_name, sql_type FROM private.columns").fetchall())
        hosted = {r[0] for r in con.execute("SELECT pid FROM private.hosting WHERE release_id = 2").fetchall()}
    assert types["pid"] == "VARCHAR" and types["ward"] == "VARCHAR"
    assert hosted == set(ids)


def test_values_are_kept_as_written_and_only_empty_cells_are_missing(tmp_path):
    frame = pipeline.read_snapshot(write(tmp_path / "t.csv", csv_rows(PADDED, range(30, 38), DISEASES)), SPEC)
    assert frame["disease"].tolist() == DISEASES and frame["ward"].tolist() == ["001"] * 8
    assert frame["age"].tolist() == list(range(30, 38)) and frame["age"].dtype == np.int64
    validated = validate_snapshot(frame, SPEC)  # "None", "NA", "NULL", "n/a" are diseases, not nulls
    assert validated["disease"].tolist() == DISEASES
    blank = ["flu", "", *DISEASES[2:]]
    frame = pipeline.read_snapshot(write(tmp_path / "blank.csv", csv_rows(PADDED, range(30, 38), blank)), SPEC)
    assert frame["disease"].isna().tolist() == [False, True, *[False] * 6]
    with pytest.raises(SnapshotError, match="column 'disease': null value"):
        validate_snapshot(frame, SPEC)


def test_the_spec_lists_the_missing_markers(tmp_path):
    spec = parse_spec({**RAW, "csv": {"missing": ["?"]}})
    path = write(tmp_path / "t.csv", csv_rows(PADDED, ["30", "?", *range(32, 38)], [*DISEASES[:7], "?"],
                                              wards=["?", "?", "NA", *["1"] * 5]))
    frame = pipeline.read_snapshot(path, spec)
    assert frame["age"].isna().tolist() == [False, True, *[False] * 6]
    assert frame["disease"].isna().tolist() == [*[False] * 7, True]
    assert frame["ward"].isna().tolist()[:3] == [True, True, False] and frame["ward"].iloc[2] == "NA"
    for raw, message in (({"missing": "?"}, "csv.missing: expected a list of non-empty texts"),
                         ({"missing": [""]}, "csv.missing: expected a list of non-empty texts"),
                         ({"separator": ";"}, "csv: expected a mapping with the keys 'missing' and 'types'"),
                         ({"types": {"pid": "int"}}, r"csv.types.pid: expected one of \['text', 'integer', 'number'\]"),
                         ({"types": {"height": "number"}}, "csv.types.height: not a column of the spec"),
                         ({"types": {"age": "text"}}, "csv.types.age: a numeric quasi-identifier is read as a number")):
        with pytest.raises(SpecError, match=message):
            parse_spec({**RAW, "csv": raw})


def test_the_spec_may_read_the_id_as_an_integer(tmp_path):
    spec = parse_spec({**RAW, "csv": {"types": {"pid": "integer", "ward": "number"}}})
    path = write(tmp_path / "t.csv", csv_rows(["1", "02", "3", "4"], range(30, 34), DISEASES[:4], ["1.5"] * 4))
    frame = pipeline.read_snapshot(path, spec)
    assert frame["pid"].tolist() == [1, 2, 3, 4] and frame["pid"].dtype == np.int64
    assert frame["ward"].tolist() == [1.5] * 4
    path = write(tmp_path / "padded.csv", csv_rows(["7", "07", "p3", "4"], range(30, 34), DISEASES[:4]))
    with pytest.raises(SnapshotError) as refused:
        pipeline.read_snapshot(path, spec)
    assert str(refused.value) == (f"{path}: column 'pid', row 3 (line 4): the cell is not a whole number; pid is "
                                  "read as integer")


@pytest.mark.parametrize("age", ["forty", "nan", "inf", "1e400"])
def test_a_cell_that_is_not_a_number_is_refused_naming_column_and_row(tmp_path, age):
    path = write(tmp_path / "t.csv", csv_rows(PADDED, ["30", "31", age, *range(33, 38)], DISEASES))
    with pytest.raises(SnapshotError) as refused:
        pipeline.read_snapshot(path, SPEC)
    message = str(refused.value)
    assert message == (f"{path}: column 'age', row 3 (line 4): the cell is not a finite number; age is read as "
                       "number")
    assert not any(p in message.replace(str(path), "") for p in PADDED) and age not in message


def test_a_column_named_twice_is_refused(tmp_path):
    path = write(tmp_path / "t.csv", "pid,age,sex,age,ward,disease\np1,30,F,31,1,flu\np2,32,M,33,1,hiv\n")
    with pytest.raises(SnapshotError, match=r"t.csv: column\(s\) \['age'\] named more than once"):
        pipeline.read_snapshot(path, SPEC)
    table = pa.table([pa.array(["p1"]), pa.array([30]), pa.array(["F"]), pa.array([31]), pa.array(["1"]),
                      pa.array(["flu"])], names=["pid", "age", "sex", "age", "ward", "disease"])
    pq.write_table(table, tmp_path / "t.parquet")
    with pytest.raises(SnapshotError, match=r"t.parquet: column\(s\) \['age'\] named more than once"):
        pipeline.read_snapshot(tmp_path / "t.parquet", SPEC)


def test_a_row_with_another_number_of_fields_names_its_line_not_its_cells(tmp_path):
    path = write(tmp_path / "t.csv", "pid,age,sex,ward,disease\np1,30,F,1,flu\np0042,31,M,1\n")
    with pytest.raises(SnapshotError) as refused:
        pipeline.read_snapshot(path, SPEC)
    assert str(refused.value) == (f"{path}: line 3 has 4 field(s) where the header has 5; every row has one field "
                                  "per column")


def test_parquet_keeps_its_types(tmp_path):
    frame = pd.DataFrame({"pid": [7, 8], "age": [30.5, 31.0], "sex": ["F", "M"], "ward": [1, 2],
                          "disease": ["flu", "hiv"], "other": [0, 0]})
    frame.to_parquet(tmp_path / "t.parquet")
    read = pipeline.read_snapshot(tmp_path / "t.parquet", SPEC)
    assert all(isinstance(read[c].dtype, pd.CategoricalDtype) for c in ("sex", "disease"))  # text as codes
    pd.testing.assert_frame_equal(read.astype({"sex": object, "disease": object}), frame.drop(columns="other"))


def test_text_ids_stay_text_and_other_text_columns_come_as_codes(tmp_path):
    """Every text column but the id is dictionary-encoded (a categorical: one code a cell), from CSV and Parquet
    alike; the values, nulls included, are the text's."""
    rows = pd.DataFrame({"pid": ["007", "p8", "p9"], "age": [30, 31, 32], "sex": ["F", None, "F"], "ward": [1, 2, 3],
                         "disease": ["flu", "hiv", "flu"]})
    rows.to_parquet(tmp_path / "t.parquet")
    rows.to_csv(tmp_path / "t.csv", index=False)
    for path in (tmp_path / "t.parquet", tmp_path / "t.csv"):
        read = pipeline.read_snapshot(path, SPEC)  # a CSV column is text unless the spec reads it as a number
        assert read["pid"].dtype == object and read["pid"].tolist() == ["007", "p8", "p9"]
        assert isinstance(read["sex"].dtype, pd.CategoricalDtype) and read["sex"].isna().tolist() == [False, True, False]
        assert read["disease"].astype(object).tolist() == ["flu", "hiv", "flu"]


def test_a_csv_of_many_rows_is_read_as_written(tmp_path):
    """Arrow reads the file in blocks: every block keeps text as written (``001``, ``None``). The read's speed is
    measured by the benchmarks, not here."""
    n = 50_000
    ids = np.char.add("p", np.arange(n).astype(str))
    table = pa.table({"pid": ids, "age": np.arange(n) % 90, "sex": np.where(np.arange(n) % 2, "F", "M"),
                      "ward": np.full(n, "001"), "disease": np.array(["flu", "hiv", "None"])[np.arange(n) % 3]})
    pacsv.write_csv(table, tmp_path / "big.csv")
    read = pipeline.read_snapshot(tmp_path / "big.csv", SPEC)
    assert len(read) == n and read["ward"].eq("001").all() and read["disease"].iloc[2] == "None"


def test_a_history_of_integer_ids_names_the_way_to_read_a_csv_as_integers(tmp_path):
    """A store whose ids were integers (a frame, or a CSV read before ids were text) refuses a CSV's text ids as
    schema drift, naming the spec key that reads them as integers; with it, the CSV joins the history."""
    rows = pd.DataFrame({"pid": [1, 2, 3, 4], "age": [30, 31, 32, 33], "sex": ["F", "M", "F", "M"],
                         "ward": ["1"] * 4, "disease": ["flu", "hiv", "flu", "hiv"]})
    path = write(tmp_path / "t.csv", csv_rows(["1", "2", "3", "5"], [30, 31, 32, 34], ["flu", "hiv", "flu", "hiv"],
                                              ["1"] * 4))
    spec = parse_spec({**RAW, "model": {"name": "k_anonymity", "k": 2}})
    with ReleaseStore(tmp_path / "clinic.duckdb", spec).session() as store:
        pipeline.release_next(store, rows)
        with pytest.raises(StoreError, match=r"'pid' was BIGINT, now VARCHAR; .* unless the spec's csv.types reads "
                                             r"them as numbers \(csv: \{types: \{pid: integer\}\}\)"):
            pipeline.release_next(store, pipeline.read_snapshot(path, spec))
        integers = parse_spec({**RAW, "model": {"name": "k_anonymity", "k": 2}, "csv": {"types": {"pid": "integer"}}})
        assert pipeline.release_next(store, pipeline.read_snapshot(path, integers))["release_id"] == 2
