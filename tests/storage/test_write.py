"""The write side: one-transaction publication, idempotence, order, snapshots never overwritten, discard, the
frames a model's stages keep with a staged release."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.errors import SnapshotError, StoreError
from dagster_privrelease.storage import frame_digest, write
from tests.budget import examples

from .conftest import candidate, publish, published_rows, snapshot


def test_publish_is_one_transaction(store, monkeypatch):
    rows = snapshot(range(10))
    store.stage_snapshot(1, rows)
    release = candidate(store, 1)
    real = write._insert

    def failing(con, table, frame):
        if table == "private.hosting":  # after published.release, .counterfeit and .domain were written
            raise RuntimeError("disk full")
        real(con, table, frame)

    monkeypatch.setattr(write, "_insert", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        store.publish(1, release, {}, {})
    assert store.release_ids() == [] and published_rows(store) == 0
    with store.connect() as con:
        assert con.execute("SELECT count(*) FROM published.domain").fetchall()[0][0] == 0
    monkeypatch.setattr(write, "_insert", real)
    store.publish(1, release, {}, {})
    assert store.release_ids() == [1] and published_rows(store) == 10


def test_publish_is_idempotent(store):
    release = publish(store, 1, snapshot(range(10)))
    store.publish(1, release, {"other": False}, {})  # same content: no-op
    assert store.release_ids() == [1] and published_rows(store) == 10
    assert store.manifest().loc[0, "checks"] == {"k_anonymity": True}
    other = candidate(store, 1, fakes=1)
    with pytest.raises(StoreError, match="already published with different content"):
        store.publish(1, other, {}, {})


def test_out_of_order_is_refused(store):
    store.stage_snapshot(1, snapshot(range(10)))
    with pytest.raises(StoreError, match="next release to stage is 2"):
        store.stage_snapshot(3, snapshot(range(10)))
    store.stage_snapshot(2, snapshot(range(10), seed=3))
    with pytest.raises(StoreError, match="next release to publish is 1"):
        store.publish(2, candidate(store, 2), {}, {})
    with pytest.raises(StoreError, match="predecessor, release 1, published first"):
        store.previous(2)
    with pytest.raises(StoreError, match="no candidate staged"):
        store.candidate(1)


def test_snapshot_is_never_overwritten(store):
    """A published snapshot is never overwritten; an unpublished one (a refused release) is replaced by other
    rows and kept for the same rows."""
    first = store.stage_snapshot(1, snapshot(range(10)))
    assert frame_digest(store.stage_snapshot(1, snapshot(range(10)))) == frame_digest(first)
    replaced = store.stage_snapshot(1, snapshot(range(100, 120), seed=9))
    assert sorted(replaced["pid"]) == list(range(100, 120))
    store.discard(1)
    publish(store, 1, snapshot(range(10)))
    first = store.snapshot(1)
    again = store.stage_snapshot(1, snapshot(range(100, 120), seed=9))
    assert frame_digest(again) == frame_digest(first) == frame_digest(store.snapshot(1))
    assert sorted(store.snapshot(1)["pid"]) == list(range(10))


def test_discard_drops_an_unpublished_snapshot(store):
    publish(store, 1, snapshot(range(10)))
    store.stage_snapshot(2, snapshot(range(10), seed=1))
    with pytest.raises(StoreError, match="never discarded"):
        store.discard(1)
    store.discard(2)
    assert store.snapshot(2) is None
    assert sorted(store.stage_snapshot(2, snapshot(range(50, 60)))["pid"]) == list(range(50, 60))


def test_bad_snapshot_writes_nothing(store):
    rows = snapshot(range(10))
    rows.loc[3, "region"] = "e1"
    with pytest.raises(SnapshotError, match=r"'region'.*in row 4$"):
        store.stage_snapshot(1, rows)
    assert store.snapshot(1) is None


def test_state_names_are_checked(store):
    store.stage_snapshot(1, snapshot(range(10)))
    release = candidate(store, 1)
    release.state = {"Bad Name": release.state["signature"]}
    with pytest.raises(StoreError, match="state 'Bad Name'"):
        store.stage_candidate(1, release)
    with duckdb.connect(str(store.path)) as con:
        assert con.execute("SELECT count(*) FROM private.candidate_meta").fetchall()[0][0] == 0


def worlds(n: int, seed: int = 0) -> pd.DataFrame:
    """A stand-in for a model stage's frame (e.g. a possible-world set)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"world": np.arange(n, dtype=np.int64), "pid": rng.integers(0, 10, n),
                         "disease": rng.choice(["flu", "hiv"], n)})


def test_stage_state_keeps_frames_with_the_staged_release(store):
    """Frames kept with a staged release are read back, replaced by name, carried by the candidate and moved to
    the model state by publication."""
    store.stage_snapshot(1, snapshot(range(10)))
    store.stage_state(1, {"worlds": worlds(4), "draws": worlds(2, seed=1)})
    store.stage_state(1, {"worlds": worlds(3, seed=2)})  # replaces worlds, keeps draws
    kept = store.staged_state(1)
    assert sorted(kept) == ["draws", "worlds"]
    assert "release_id" not in kept["worlds"].columns
    assert frame_digest(kept["worlds"]) == frame_digest(worlds(3, seed=2))
    assert frame_digest(kept["draws"]) == frame_digest(worlds(2, seed=1))
    release = candidate(store, 1)
    release.state = {**kept, **release.state}  # as pipeline.make_candidate hands them on
    store.stage_candidate(1, release)
    assert sorted(store.staged_state(1)) == ["draws", "signature", "worlds"]
    store.publish(1, release, {}, {})
    assert frame_digest(store.previous(2).state["worlds"]) == frame_digest(worlds(3, seed=2))
    assert store.staged_state(2) == {}


def test_stage_state_refuses_an_unstaged_release_and_writes_all_or_nothing(store):
    with pytest.raises(StoreError, match="no snapshot staged"):
        store.stage_state(1, {"worlds": worlds(4)})
    store.stage_snapshot(1, snapshot(range(10)))
    with pytest.raises(StoreError, match="state 'Bad Name'"):
        store.stage_state(1, {"worlds": worlds(4), "Bad Name": worlds(2)})
    assert store.staged_state(1) == {}


def test_discard_drops_the_kept_frames(store):
    publish(store, 1, snapshot(range(10)))
    store.stage_snapshot(2, snapshot(range(12), seed=1))
    store.stage_state(2, {"worlds": worlds(5)})
    store.discard(2)
    assert store.staged_state(2) == {} and store.snapshot(2) is None
    with pytest.raises(StoreError, match="no snapshot staged"):
        store.stage_state(2, {"worlds": worlds(5)})


def _sorted_digest(frame: pd.DataFrame) -> str:
    """``frame_digest`` from its definition: the canonical frame (columns by name, numbers as float64, the rest as
    ``str``, nulls as NaN / the text NUL + "null") sorted by every column, hashed row by row in that order."""
    import hashlib
    import json

    columns = sorted(frame.columns)
    canon = {}
    for name in columns:
        col = frame[name]
        if pd.api.types.is_numeric_dtype(col.dtype):
            canon[name] = col.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            canon[name] = np.where(col.isna().to_numpy(), "\x00null", col.astype(str).to_numpy())
    canon = pd.DataFrame(canon, columns=columns)
    if columns:
        canon = canon.sort_values(columns, kind="stable", na_position="last", ignore_index=True)
    digest = hashlib.sha256(json.dumps(columns).encode())
    digest.update(pd.util.hash_pandas_object(canon, index=False).to_numpy().tobytes())
    return digest.hexdigest()


def _random_frame(rng: np.random.Generator) -> pd.DataFrame:
    n = int(rng.integers(0, 40))
    text = np.array(["b", "a", "ab", " ", "B", "é", "null"], dtype=object)  # no "": see the test after this one
    mixed = np.array([1, 1.0, True, "1", "x", None, 2, np.nan, -0.0, 0.0], dtype=object)
    frame = pd.DataFrame({
        "z_int": rng.integers(-3, 3, n),
        "float": np.where(rng.random(n) < 0.2, np.nan, rng.integers(-2, 3, n) / 2),
        "wide": rng.random(n) * 1e6,
        "flag": rng.random(n) < 0.5,
        "text": pd.Series(text[rng.integers(0, len(text), n)]).where(rng.random(n) > 0.2, None),
        "mixed": pd.Series(mixed[rng.integers(0, len(mixed), n)], dtype=object),
        "nullable": pd.Series(rng.integers(0, 3, n), dtype="Int64").mask(rng.random(n) < 0.3),
    })
    frame["category"] = frame["text"].astype("category")
    frame["arrow"] = frame["text"].astype("string[pyarrow]")
    frame["signed_zero"] = np.where(rng.random(n) < 0.5, -0.0, 0.0)
    keep = [c for c in frame.columns if rng.random() < 0.8]
    return frame[keep].iloc[rng.permutation(n)]


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_frame_digest_is_the_digest_of_the_sorted_canonical_frame(seed):
    """The rank-and-hash digest gives the digests of the definition (so the digests kept in ``private.digest``
    stay valid), on numbers with NaN, booleans, nullable integers, text with nulls held as objects, categories
    or Arrow strings, objects Python equates across spellings (1, 1.0, True, "1"; 0.0 and -0.0), any row order."""
    frame = _random_frame(np.random.default_rng(seed))
    assert frame_digest(frame) == _sorted_digest(frame)
    shuffled = frame.iloc[np.random.default_rng(seed + 1).permutation(len(frame)), ::-1]
    if "mixed" not in frame.columns and "signed_zero" not in frame.columns:  # -0.0 among 0.0 keeps its row order
        assert frame_digest(shuffled) == frame_digest(frame)


def test_frame_digest_tells_a_null_from_an_empty_text():
    """The sorted-canonical digest hashed a text column through pandas' string table, which reads a text up to its
    first NUL character: in a column that also holds "", its null marker (NUL + "null") hashed like "", so a null
    could not be told from an empty text there. The null is now a category of its own: the only figures that
    differ from the definition's (text with NUL characters aside)."""
    empty, null = pd.DataFrame({"t": ["", ""]}), pd.DataFrame({"t": ["", None]})
    assert _sorted_digest(empty) == _sorted_digest(null)
    assert frame_digest(empty) != frame_digest(null)
    arrow = pd.DataFrame({"t": pd.Series([None, ""], dtype="string[pyarrow]")})
    assert frame_digest(null) == frame_digest(arrow) == frame_digest(null.astype("category"))


def test_rows_duckdb_refuses_are_reported_by_count_never_by_value(store):
    """DuckDB's message quotes the value it could not convert (here an id, text where the table holds integers):
    the store's error names the table, the count and the columns, not the value."""
    store.ensure_schema()
    rows = pd.DataFrame({"release_id": ["pid-000123", "pid-000124"], "digest": ["a", "b"]})
    with store.connect() as con, pytest.raises(StoreError) as refused:
        write._insert(con, "private.digest", rows)
    message = str(refused.value)
    assert message.startswith("private.digest: cannot store the 2 row(s): DuckDB refused them (Conversion")
    assert "pid-000" not in message


def test_discard_refuses_every_release_up_to_the_last_published(store):
    publish(store, 1, snapshot(range(10)))
    store.stage_snapshot(2, snapshot(range(2, 12)))
    for release_id in (0, 1):
        with pytest.raises(StoreError, match=f"release {release_id}: release 1 is the last published one"):
            store.discard(release_id)
    assert store.release_ids() == [1] and store.snapshot(1) is not None and store.snapshot(2) is not None
    store.discard(2)
    assert store.snapshot(2) is None and store.snapshot(1) is not None
