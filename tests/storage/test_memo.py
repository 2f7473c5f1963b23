"""The judge's memo in the store (``StoreWriter.save_judge_memo``, ``History.memo``): Arrow IPC blobs give back the
frames the Parquet blobs gave back (the reference: what the store returned before), and old Parquet blobs still
read."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pandas.testing as pdt
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.storage import ReleaseStore
from dagster_privrelease.storage.read import memo_frame
from dagster_privrelease.storage.write import memo_blob
from tests.budget import examples

from .conftest import SPEC, publish, snapshot


def _parquet(frame: pd.DataFrame) -> pd.DataFrame:
    """The reference: the frame as the Parquet blobs gave it back (``to_parquet`` without index, ``read_parquet``)."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return pd.read_parquet(io.BytesIO(buffer.getvalue()))


def _random_memo(rng: np.random.Generator) -> pd.DataFrame:
    """A frame of the kinds of columns the attacks and verifiers keep (ids, 32-bit codes, 64-bit bitset words,
    flags, floats with NaN, text with nulls, categories, nullable integers), some columns left out, 0-40 rows."""
    n = int(rng.integers(0, 40))
    text = np.array(["flu", "hiv", "", "Never married"], dtype=object)
    frame = pd.DataFrame({
        "id": rng.integers(-(2**40), 2**40, n),
        "group_id": rng.integers(0, 9, n).astype(np.int32),
        "w0": rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2),
        "latest": rng.random(n) < 0.5,
        "detail": np.where(rng.random(n) < 0.3, np.nan, rng.random(n)),
        "rule": pd.Series(text[rng.integers(0, len(text), n)], dtype=object).where(rng.random(n) > 0.2, None),
        "nullable": pd.Series(rng.integers(0, 3, n), dtype="Int64").mask(rng.random(n) < 0.3),
    })
    frame["kind"] = frame["rule"].astype("category")
    keep = [c for c in frame.columns if rng.random() < 0.8]
    return frame[keep]


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_memo_blobs_give_back_the_frame_and_what_parquet_gave_back(seed):
    """The frame comes back as it went in (values, dtypes, column order; a RangeIndex), and as the Parquet blobs
    gave it back wherever those did (they turned an all-null categorical into objects: Arrow keeps it)."""
    frame = _random_memo(np.random.default_rng(seed))
    back = memo_frame(memo_blob(frame))
    pdt.assert_frame_equal(back, frame, check_exact=True)
    reference = _parquet(frame)
    same = [c for c in frame.columns if reference[c].dtype == frame[c].dtype]
    pdt.assert_frame_equal(back[same], reference[same], check_exact=True)
    assert same == list(frame.columns) or frame["kind"].isna().all()


def test_empty_frames_keep_their_columns():
    """The memo keeps empty reports (0 rows, object columns); they come back with their columns, as from Parquet."""
    frame = pd.DataFrame({"release_id": pd.Series([], dtype=np.int64), "rule": pd.Series([], dtype=object)})
    pdt.assert_frame_equal(memo_frame(memo_blob(frame)), _parquet(frame))


def test_the_store_keeps_the_memo_of_the_previous_release_and_reads_old_parquet_and_lz4_blobs(store):
    """``save_judge_memo`` keeps release j's entries for judging release j+1 (``History.memo`` holds release j-1's
    entries when release j is the last), replaces an entry of the same release and name, drops a name's entries
    older than its predecessor's, and a Parquet or LZ4 blob left by an older store still reads."""
    for j in (1, 2, 3):
        publish(store, j, snapshot(range(10 * j, 10 * j + 12), seed=j))
    first = pd.DataFrame({"id": np.arange(5, dtype=np.int64), "sig": np.arange(5, dtype=np.int32)})
    store.save_judge_memo({("cold", 1): first.iloc[:2]})
    store.save_judge_memo({("cold", 1): first, ("tally", 1): first[["id"]]})  # replaces ("cold", 1)
    memo = store.history(upto=2).memo
    assert set(memo) == {("cold", 1), ("tally", 1)}
    pdt.assert_frame_equal(memo[("cold", 1)], first)
    store.save_judge_memo({("cold", 3): first.iloc[3:]})  # drops ("cold", 1), older than release 2
    with store.connect() as con:
        kept = con.execute("SELECT name, release_id FROM private.judge_memo ORDER BY 1, 2").fetchall()
        assert kept == [("cold", 3), ("tally", 1)]
        buffer = io.BytesIO()
        first.to_parquet(buffer, index=False)
        con.execute("INSERT INTO private.judge_memo VALUES (2, 'old', ?)", [buffer.getvalue()])
        lz4 = pa.BufferOutputStream()  # the IPC streams of the versions before zstd
        table = pa.Table.from_pandas(first, preserve_index=False)
        with pa.ipc.new_stream(lz4, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
            writer.write_table(table)
        con.execute("INSERT INTO private.judge_memo VALUES (2, 'lz4', ?)", [lz4.getvalue().to_pybytes()])
    memo = store.history(upto=3).memo
    assert set(memo) == {("old", 2), ("lz4", 2)}
    pdt.assert_frame_equal(memo[("old", 2)], first)
    pdt.assert_frame_equal(memo[("lz4", 2)], first)


def _saved_one_by_one(kept: dict[tuple[str, int], int], memo: dict[tuple[str, int], int],
                      staged: set[int]) -> dict[tuple[str, int], int]:
    """The reference, from ``save_judge_memo``'s contract applied to one entry at a time in (name, release) order:
    an entry of a staged or published release replaces the one of its release and name and drops that name's
    entries older than its predecessor's."""
    kept = dict(kept)
    for (name, j), value in sorted(memo.items()):
        if j not in staged:
            continue
        kept = {(n, i): v for (n, i), v in kept.items() if n != name or not (i == j or i < j - 1)}
        kept[(name, j)] = value
    return kept


def test_one_save_of_many_entries_keeps_what_saving_them_one_by_one_keeps(store):
    """Random saves (names, releases 1-5 of which 1-3 are published and 4 staged, some not at all) against the
    reference ``_saved_one_by_one``; each entry a one-row frame holding its own tag."""
    for j in (1, 2, 3):
        publish(store, j, snapshot(range(10 * j, 10 * j + 12), seed=j))
    store.stage_snapshot(4, snapshot(range(50, 62), seed=4))
    rng = np.random.default_rng(12)
    for case in range(25):
        with store.connect() as con:
            con.execute("DELETE FROM private.judge_memo" if case else "SELECT 1")
        expected: dict[tuple[str, int], int] = {}
        for save in range(3):
            memo = {(str(rng.choice(["a", "b", "c"])), int(rng.integers(1, 6))): 100 * case + 10 * save + k
                    for k in range(int(rng.integers(1, 6)))}
            store.save_judge_memo({key: pd.DataFrame({"tag": [tag]}) for key, tag in memo.items()})
            expected = _saved_one_by_one(expected, memo, {1, 2, 3, 4})
        with store.connect() as con:
            rows = con.execute("SELECT name, release_id, frame FROM private.judge_memo").fetchall()
        assert {(n, j): int(memo_frame(blob)["tag"].iloc[0]) for n, j, blob in rows} == expected, case


def test_archives_take_their_types_from_the_store_not_from_the_first_frame(tmp_path):
    """An archived memo entry (``history.ARCHIVED``) whose first frame holds the ids as a categorical of the ids
    seen so far (or no rows at all, object columns DuckDB would type NULL) keeps later ids that are new to it:
    the archive's id column takes the store's recorded type (VARCHAR for text ids), never an ENUM or NULL."""
    from dagster_privrelease.core.judge.history import ARCHIVED
    from dagster_privrelease.storage.write import archive_table

    spec = parse_spec(SPEC)
    rows = snapshot(range(12), seed=1).assign(pid=lambda f: [f"p{i:03d}" for i in range(12)])
    (name, units), = [(n, u) for n, u in ARCHIVED.items() if u == ("row",)]
    with ReleaseStore(tmp_path / "text.duckdb", spec).session() as store:
        for j in (1, 2, 3):
            publish(store, j, rows.assign(pid=[f"{'p' if j < 3 else 'q'}{i:03d}" for i in range(12)]))
        empty = pd.DataFrame({"pid": pd.Series([], dtype=object), "row": pd.Series([], dtype=np.int64)})
        store.save_judge_memo({(name, 1): empty})
        first = pd.DataFrame({"pid": pd.Categorical(["p000", "p001"]), "row": np.array([0, 1])})
        store.save_judge_memo({(name, 2): first})
        later = pd.DataFrame({"pid": pd.Categorical(["007", "7", "p00205"]), "row": np.array([2, 3, 4])})
        store.save_judge_memo({(name, 3): later})
        with store.connect() as con:
            table = f"private.{archive_table(name)}"
            types = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {table})").fetchall())
            kept = sorted(r[0] for r in con.execute(f"SELECT pid FROM {table}").fetchall())
    assert types["pid"] == "VARCHAR" and types["row"] == "BIGINT", types
    assert kept == ["007", "7", "p000", "p001", "p00205"]


def test_a_categorical_column_keeps_only_the_categories_its_rows_use():
    """An entry whose id column has the window's categories (100k ids) but a few rows, or none, stores those rows'
    ids only: its blob does not grow with the window, and its values come back as they went in."""
    window = pd.Index([f"p{i:06d}" for i in range(100_000)], dtype=object)
    for rows in ([], ["p000007", "p099999", "p000007"]):
        frame = pd.DataFrame({"id": pd.Categorical(rows, categories=window), "n": np.arange(len(rows))})
        blob = memo_blob(frame)
        assert len(blob) < 5_000
        back = memo_frame(blob)
        assert isinstance(back["id"].dtype, pd.CategoricalDtype)
        assert back["id"].tolist() == rows and back["n"].tolist() == list(range(len(rows)))
        assert list(back["id"].cat.categories) == sorted(set(rows))
