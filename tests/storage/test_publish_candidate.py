"""Publication inside DuckDB (``StoreWriter.publish_candidate``, ``query_digest``) against the pandas path it
replaces: the staged candidate read back whole (``StoreReader.candidate``) and published as a frame
(``StoreWriter.publish``) with the utility summary computed over that frame. Streams of text ids (``p007``) over
many releases, two stores side by side, every published and private table compared row for row."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

from dagster_privrelease import pipeline
from dagster_privrelease.core.judge.utility import summarise
from dagster_privrelease.core.models.base import HELD_BACK
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.core.stream import changes, split_base_pool, stream
from dagster_privrelease.errors import StoreError
from dagster_privrelease.storage import ReleaseStore, frame_digest, release_digest
from dagster_privrelease.storage.connection import query_frame
from dagster_privrelease.storage.write import query_digest
from dagster_privrelease.testing.contract import CLINIC, clinic_people

from .conftest import SPEC, candidate

RELEASES = 13
CLINIC_COLUMNS = ["pid", "age", "sex", "region", "visits", "disease"]
#: Every table a publication writes, in the order its rows were written (the manifest without its clock).
TABLES = {
    "published.release": "SELECT * FROM published.release",
    "published.counterfeit": "SELECT * FROM published.counterfeit",
    "published.domain": "SELECT * FROM published.domain",
    "published.manifest": "SELECT * EXCLUDE (created_at) FROM published.manifest",
    "published.verdict": "SELECT * FROM published.verdict",
    "private.hosting": "SELECT * FROM private.hosting",
    "private.digest": "SELECT * FROM private.digest",
    "private.sensitive_domain": "SELECT * FROM private.sensitive_domain",
}


def people(rows: int) -> pd.DataFrame:
    """Clinic people with text ids as people write them: ``p12``, every fifth zero-padded (``007``)."""
    frame = clinic_people(rows, np.random.default_rng(3))
    ids = [f"{i:03d}" if i % 5 == 0 else f"p{i}" for i in range(rows)]
    return frame.assign(pid=ids)[["pid", *frame.columns]]


def snapshots(base: int, r: int) -> list[pd.DataFrame]:
    """``RELEASES`` snapshots, ``r`` deletions and insertions each; release 4's newcomers all have the flu, so
    m-invariance (m = 2) holds some of them back (a model state) until later releases bring other diseases;
    release 7 updates four people's visits (release 8 has them as before)."""
    rng = np.random.default_rng(4)
    first, pool = split_base_pool(people(base + r * RELEASES), base, rng)
    frames = list(stream(first, pool, r, RELEASES, rng))
    new = ~frames[3]["pid"].isin(frames[2]["pid"])
    frames[3].loc[new, "disease"] = "flu"
    stay = frames[6]["pid"].isin(frames[5]["pid"])
    frames[6].loc[stay[stay].index[:4], "visits"] += 1  # four internal updates
    return frames


def tables(store: ReleaseStore) -> dict[str, pd.DataFrame]:
    """Every table a publication writes, and each model state table, as stored (rows in stored order)."""
    with duckdb.connect(str(store.path), read_only=True) as con:
        states = [t for (t,) in con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                                            "'private' AND table_name LIKE 'state\\_%' ESCAPE '\\'").fetchall()]
        queries = {**TABLES, **{t: f"SELECT * FROM private.{t}" for t in states}}
        return {name: query_frame(con, sql) for name, sql in queries.items()}


def naive_publish(store: ReleaseStore, release_id: int, reports) -> dict[str, float]:
    """The pandas path: the candidate and T(j) read whole, the utility summarised over them, the frames
    published. Returns the utility."""
    release = store.candidate(release_id)
    snapshot = store.snapshot(release_id)
    utility = summarise(release.table, release.counterfeits, store.bound_spec(snapshot), snapshot=snapshot)
    store.publish(release_id, release, {r.name: bool(r.ok) for r in reports}, utility, pipeline.verdicts(reports))
    return utility


def naive_changes(store: ReleaseStore, release_id: int) -> dict[str, int]:
    """``release_changes`` from its definition: ``core.stream.changes`` of the two snapshots read whole, each less
    the ids its release holds back."""
    def published(j: int) -> pd.DataFrame:
        if j < 1:
            return pd.DataFrame({c: [] for c in CLINIC_COLUMNS})
        frame, held = store.snapshot(j), store.state(j, HELD_BACK)
        return frame[~frame["pid"].isin(held["pid"] if held is not None else [])]
    held = store.state(release_id, HELD_BACK)
    return {**changes(published(release_id - 1), published(release_id), "pid"),
            HELD_BACK: 0 if held is None else len(held)}


def test_a_text_id_stream_publishes_what_the_pandas_path_published(tmp_path):
    spec = parse_spec({**CLINIC, "model": {"name": "m_invariance", "m": 2, "hold_back": True}, "seed": 5})
    ours, naive = (ReleaseStore(tmp_path / f"{name}.duckdb", spec) for name in ("sql", "naive"))
    utilities, held, updates = [], 0, 0
    with ours.session(), naive.session():
        for j, frame in enumerate(snapshots(80, 10), start=1):
            for store in (ours, naive):
                pipeline.stage(store, j, frame)
                pipeline.make_candidate(store, j)
            # the same candidate in both stores, judged once; a few releases judged (verdicts), the others not
            reports = pipeline.judge(ours, j) if j % 6 == 1 else []
            summary = pipeline.publish(ours, j, reports)
            utilities.append((summary["utility"], naive_publish(naive, j, reports)))
            delta = {k: summary[k] for k in ("inserts", "deletes", "updates", HELD_BACK)}
            assert delta == naive_changes(naive, j)
            held += delta[HELD_BACK]
            updates += delta["updates"]
            assert summary["rows"] == len(naive.candidate(j).table)
    assert all(a == pytest.approx(b, nan_ok=True, rel=0, abs=0) for a, b in utilities)
    got, expected = tables(ours), tables(naive)
    assert set(got) == set(expected) and len(got["published.manifest"]) == RELEASES
    assert updates == 8  # four at release 7, and the same four back to their visits at release 8
    assert held and any(name.startswith("state_") for name in got)  # the held-back tuples, copied by SQL
    for name, frame in expected.items():
        pd.testing.assert_frame_equal(got[name], frame, check_dtype=True, obj=name)


def test_the_digest_read_in_duckdb_is_release_digest_of_the_candidate(tmp_path):
    store = ReleaseStore(tmp_path / "clinic.duckdb", parse_spec(SPEC))
    for j, fakes in ((1, 0), (2, 3)):
        store.stage_snapshot(j, people(12 + 2 * j))
        staged = candidate(store, j, fakes)  # with counterfeits (release 2) and a state frame
        store.stage_candidate(j, staged)
        expected = release_digest(store.candidate(j))
        assert expected == release_digest(staged)
        store.publish_candidate(j, {}, {})
        digests = tables(store)["private.digest"]
        assert digests.loc[digests["release_id"] == j, "digest"].item() == expected


def test_publishing_the_candidate_again_is_a_no_op_and_other_content_is_refused(tmp_path):
    store = ReleaseStore(tmp_path / "clinic.duckdb", parse_spec(SPEC))
    store.stage_snapshot(1, people(10))
    store.stage_candidate(1, candidate(store, 1))
    first = store.publish_candidate(1, {"m": True}, {"lm": 0.5})
    before = tables(store)
    assert store.publish_candidate(1, {"m": False}, {}) == first  # same content: nothing written
    for name, frame in tables(store).items():
        pd.testing.assert_frame_equal(frame, before[name], obj=name)
    store.stage_candidate(1, candidate(store, 1, fakes=2))  # other content under a published id
    with pytest.raises(StoreError, match="already published with different content"):
        store.publish_candidate(1, {}, {})
    with pytest.raises(StoreError, match="release 2: no candidate staged"):
        store.publish_candidate(2, {}, {})


@pytest.mark.parametrize("sql", [
    "SELECT * FROM t", "SELECT * FROM t WHERE false", "SELECT label, n FROM t WHERE flag", "SELECT word FROM t",
])
def test_query_digest_equals_frame_digest_of_the_query_read_by_pandas(sql):
    rng = np.random.default_rng(8)
    n = 400
    frame = pd.DataFrame({
        "id": [f"p{i:04d}" for i in rng.permutation(n)],
        "label": rng.choice(np.array(["[20-29]", "é", "", "Z", "a\x00b", "n1"], dtype=object), n),
        "word": rng.choice(np.array(["x", None, "\x00null", "y"], dtype=object), n),
        "n": rng.choice(np.array([1.5, np.nan, -0.0, 0.0, 3.0]), n),
        "k": rng.integers(-3, 3, n),
        "flag": rng.choice(np.array([True, False, None], dtype=object), n),
    })
    with duckdb.connect() as con:
        con.execute("CREATE TABLE t (id VARCHAR, label VARCHAR, word VARCHAR, n DOUBLE, k BIGINT, flag BOOLEAN, "
                    "empty VARCHAR)")
        con.register("frame", frame)
        con.execute("INSERT INTO t BY NAME SELECT * FROM frame")
        assert query_digest(con, sql) == frame_digest(query_frame(con, sql))
