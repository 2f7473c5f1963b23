"""The release pipeline: stage -> candidate -> judge -> publish, bad input refused with nothing published."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease import pipeline
from dagster_privrelease.core import models
from dagster_privrelease.core.judge.history import Report
from dagster_privrelease.core.judge.run import attack_history, verify_history
from dagster_privrelease.core.spec import parse_spec, validate_snapshot
from dagster_privrelease.errors import NotPublishable, SnapshotError, SpecError, StoreError
from dagster_privrelease.storage import ReleaseStore, frame_digest
from tests.budget import examples
from tests.storage.conftest import SPEC

DISEASES = ("flu", "hiv", "gastritis", "bronchitis")


def spec_of(model: dict) -> dict:
    """The storage tests' clinic spec with ``model`` and a fixed seed."""
    return {**SPEC, "model": model, "seed": 7}


def table(ids) -> pd.DataFrame:
    """Synthetic rows; each id's values depend on the id only, so a surviving row is unchanged across releases."""
    ids = np.asarray(ids, dtype=np.int64)
    return pd.DataFrame({
        "pid": ids,
        "age": 20 + (ids * 37) % 60,
        "sex": np.where(ids % 2 == 0, "F", "M"),
        "region": np.array(["n1", "n2", "s1", "s2"])[(ids * 13) % 4],
        "visits": (ids * 3) % 9,
        "disease": np.array(DISEASES)[(ids * 5 + ids // 4) % 4],
    })


@pytest.fixture
def store(tmp_path) -> Iterator[ReleaseStore]:
    """A store whose calls share one connection (opening a DuckDB file costs ~50 ms)."""
    with ReleaseStore(tmp_path / "clinic.duckdb", parse_spec(spec_of({"name": "l_diversity", "l": 2}))).session() as s:
        yield s


def assert_nothing_published(store: ReleaseStore) -> None:
    assert store.release_ids() == []
    assert store.snapshot(1) is None


def test_release_next_publishes_a_stream(store):
    first = pipeline.release_next(store, table(range(60)))
    second = pipeline.release_next(store, table(range(10, 75)))
    assert (first["release_id"], first["inserts"], first["deletes"]) == (1, 60, 0)
    assert (second["release_id"], second["inserts"], second["deletes"], second["updates"]) == (2, 15, 10, 0)
    assert second["rows"] == 65 and second["groups"] >= 2 and second["counterfeits"] == 0
    assert 0 < second["utility"]["lm"] < 1
    assert second["checks"]["l_diversity"] is True
    manifest = store.manifest()
    assert manifest["release_id"].tolist() == [1, 2]
    assert manifest.loc[1, "checks"] == second["checks"]
    assert manifest.loc[1, "utility"]["lm"] == pytest.approx(second["utility"]["lm"])


def test_judge_marks_what_blocks(store):
    pipeline.stage(store, 1, table(range(60)))
    pipeline.make_candidate(store, 1)
    reports = pipeline.judge(store, 1)
    kinds = {r.summary["kind"] for r in reports}
    assert kinds == {"guarantee", "attack"}
    for report in reports:  # the l-diversity baseline: its attacks are reported, not blocking
        assert report.summary["blocking"] is (report.summary["kind"] == "guarantee")


def test_m_invariance_history_is_published_and_judged(tmp_path):
    store = ReleaseStore(tmp_path / "m.duckdb", parse_spec(spec_of({"name": "m_invariance", "m": 2})))
    pipeline.release_next(store, table(range(60)))
    summary = pipeline.release_next(store, table(range(10, 70)))
    assert summary["release_id"] == 2 and all(summary["checks"].values()), summary["checks"]
    assert summary["checks"]["m_invariance"] is True
    assert store.history().release_ids == [1, 2]


def test_m_invariance_reads_only_its_columns_of_the_previous_release_and_publishes_the_same(tmp_path):
    """``ModelDescriptor.previous_columns``: m-invariance reads four columns of release n-1 (and the hosting
    groups), and its releases are those it makes reading every column (same digests, release by release)."""
    spec = parse_spec(spec_of({"name": "m_invariance", "m": 2}))
    narrow = ReleaseStore(tmp_path / "narrow.duckdb", spec)
    whole = ReleaseStore(tmp_path / "whole.duckdb", spec)
    model = models.descriptor("m_invariance")
    frames = [table(range(60)), table(range(10, 75)), table(range(20, 90))]
    for j, frame in enumerate(frames, 1):
        pipeline.release_next(narrow, frame)
        try:
            models.register(dataclasses.replace(model, previous_columns=None))
            pipeline.release_next(whole, frame)
        finally:
            models.register(model)
        assert narrow.history().release(j).equals(whole.history().release(j))
    read = pipeline.previous_release(narrow, 3, narrow.bound_spec(frames[2]))
    assert read is not None
    assert (list(read.snapshot.columns), list(read.table.columns)) == (["pid", "disease"], ["group_id", "disease"])
    assert list(read.hosting.columns) == ["pid", "group_id"]
    with narrow.connect() as con:
        digests = con.execute("SELECT release_id, digest FROM private.digest ORDER BY 1").fetchall()
    with whole.connect() as con:
        assert con.execute("SELECT release_id, digest FROM private.digest ORDER BY 1").fetchall() == digests


def test_a_failed_blocking_report_refuses_publication(store):
    pipeline.stage(store, 1, table(range(60)))
    pipeline.make_candidate(store, 1)
    broken = Report("m_invariance", False, pd.DataFrame({"release_id": [1], "group_id": [3]}), {"blocking": True})
    with pytest.raises(NotPublishable, match=r"release 1 is not published: m_invariance failed \(1 violation.*"
                                             r"'group_id': 3"):
        pipeline.publish(store, 1, [broken])
    assert store.release_ids() == []
    reported = Report("intersection", False, pd.DataFrame({"pid": [4]}), {"blocking": False})
    assert pipeline.publish(store, 1, [reported])["checks"] == {"intersection": False}
    assert store.release_ids() == [1]


def flu_dominated(ids) -> pd.DataFrame:
    """Rows no l=4 model can publish: flu in all but four of them."""
    rows = table(ids)
    rows["disease"] = np.where(rows["pid"] < ids[-1] - 3, "flu", rows["disease"])
    return rows


def test_a_refused_release_never_blocks_the_next(tmp_path):
    """The model refuses T(1); the corrected rows publish as release 1 with no discard, even with other column
    types (nothing was published, so the refused capture's types bind nothing)."""
    store = ReleaseStore(tmp_path / "few.duckdb", parse_spec(spec_of({"name": "l_diversity", "l": 4})))
    refused = flu_dominated(range(60)).assign(visits=lambda d: d["visits"].astype(str) + " visits")
    with pytest.raises(NotPublishable, match="l=4"):
        pipeline.release_next(store, refused)
    assert store.snapshot(1) is not None and store.release_ids() == []  # staged, not published
    summary = pipeline.release_next(store, table(range(100, 180)))
    assert (summary["outcome"], summary["release_id"], summary["inserts"]) == ("published", 1, 80)
    stored = store.snapshot(1)
    assert stored is not None and sorted(stored["pid"]) == list(range(100, 180))
    with pytest.raises(NotPublishable):  # a refused second release: the next corrected one is release 2
        pipeline.release_next(store, flu_dominated(range(100, 180)))
    assert pipeline.release_next(store, table(range(110, 190)))["release_id"] == 2
    assert store.release_ids() == [1, 2]


def test_restaging_replaces_only_what_is_unpublished(store):
    """New rows replace an unpublished T(2) and drop its candidate and kept candidate sets in the same
    transaction; the same rows keep them (a retry goes on); a published T(1) is never replaced."""
    first = table(range(60))
    pipeline.release_next(store, first)
    pipeline.stage(store, 2, table(range(10, 75)))
    pipeline.make_candidate(store, 2)
    pipeline.judge(store, 2)
    pipeline.stage(store, 2, table(range(10, 75)).iloc[::-1])  # same rows, other order: kept as staged
    assert sorted(store.history(candidate=2).candidate_sets) == [1, 2]
    pipeline.stage(store, 2, table(range(20, 90)))
    with pytest.raises(StoreError, match="no candidate staged"):
        store.candidate(2)
    assert sorted(store.history().candidate_sets) == [1]
    assert sorted(store.snapshot(2)["pid"]) == list(range(20, 90))
    published = store.snapshot(1)
    assert pipeline.stage(store, 1, table(range(200, 260))) == 60  # the published T(1)'s rows, kept
    pd.testing.assert_frame_equal(store.snapshot(1), published)
    assert sorted(published["pid"]) == list(range(60))


def test_an_unchanged_snapshot_publishes_nothing(store):
    """The same rows twice (a retry after a run that did publish): one release; the second call says which
    release stands. Other attributes, or other rows, are a new release."""
    first = pipeline.release_next(store, table(range(60)))
    again = pipeline.release_next(store, table(range(60)).sample(frac=1, random_state=1))
    assert first["outcome"] == "published" and (again["outcome"], again["release_id"]) == ("unchanged", 1)
    assert again["rows"] == first["rows"] and store.release_ids() == [1]
    assert pipeline.unchanged(store, table(range(60)), ["age", "sex", "region"]) == 1
    with pytest.raises(SpecError, match="publishes every quasi-identifier"):  # l_diversity: no subset (#11 item 6)
        pipeline.unchanged(store, table(range(60)), ["age", "sex"])
    assert pipeline.unchanged(store, table(range(61))) is None
    assert pipeline.release_next(store, table(range(61)))["release_id"] == 2


def test_unknown_attribute_is_refused(store):
    pipeline.stage(store, 1, table(range(60)))
    with pytest.raises(SpecError, match=r"attributes \['height'\] are not quasi-identifiers"):
        pipeline.make_candidate(store, 1, ["age", "height"])


def test_attribute_subset_publishes_a_projection(tmp_path):
    """A vertical model (here l-diversity registered as one) publishes the subset a release asks for."""
    projecting = dataclasses.replace(models.descriptor("l_diversity"), name="l_diversity_projection", vertical=True)
    with models.registered(projecting):
        store = ReleaseStore(tmp_path / "p.duckdb", parse_spec(spec_of({"name": "l_diversity_projection", "l": 2})))
        pipeline.stage(store, 1, table(range(60)))
        release = pipeline.make_candidate(store, 1, ["age", "region"])
    assert release.attributes == ("age", "region")
    assert "sex" not in release.table.columns and "sex__lo" not in release.table.columns


# -- bad input: each refused with a message naming the problem, nothing published --------------------------


def bad(kind: str) -> pd.DataFrame:
    rows = table(range(60))
    if kind == "missing column":
        return rows.drop(columns="region")
    if kind == "null in a quasi-identifier":
        rows["sex"] = rows["sex"].astype(object)
        rows.loc[5, "sex"] = None
    elif kind == "null in the sensitive column":
        rows.loc[7, "disease"] = None
    elif kind == "value outside the taxonomy":
        rows.loc[9, "region"] = "w1"
    elif kind == "duplicate id":
        rows.loc[11, "pid"] = 3
    elif kind == "non-numeric numeric quasi-identifier":
        rows["age"] = rows["age"].astype(object)
        rows.loc[13, "age"] = "forty"
    elif kind == "empty snapshot":
        return rows.iloc[:0]
    return rows


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("missing column", r"missing column\(s\) \['region'\]"),
        ("null in a quasi-identifier", "column 'sex': null value in row 6;"),
        ("null in the sensitive column", "column 'disease': null value in row 8;"),
        ("value outside the taxonomy", r"column 'region': 1 value\(s\) not in its taxonomy .* in row 10$"),
        ("duplicate id", r"column 'pid': 2 rows share 1 id\(s\) \(rows 4, 12\)"),
        ("non-numeric numeric quasi-identifier", "column 'age': non-numeric value in row 14; age is a numeric quasi-identifier$"),
        ("empty snapshot", "snapshot is empty"),
    ],
)
def test_bad_snapshot_is_refused(store, kind, message):
    with pytest.raises(SnapshotError, match=message):
        pipeline.release_next(store, bad(kind))
    assert_nothing_published(store)


def test_unreadable_file_is_refused(tmp_path, store):
    garbage = tmp_path / "rows.parquet"
    garbage.write_bytes(b"not a parquet file")
    with pytest.raises(SnapshotError, match=r"rows.parquet: cannot read the snapshot as PARQUET"):
        pipeline.read_snapshot(garbage, store.spec)
    with pytest.raises(SnapshotError, match="no such snapshot file"):
        pipeline.read_snapshot(tmp_path / "absent.csv", store.spec)
    with pytest.raises(SnapshotError, match=r"a snapshot is a .csv or .parquet file, got '.xlsx'"):
        pipeline.read_snapshot(tmp_path / "rows.xlsx", store.spec)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(SnapshotError, match=r"empty\.csv: cannot read the snapshot as CSV"):
        pipeline.read_snapshot(empty, store.spec)
    assert_nothing_published(store)


def test_read_snapshot_reads_csv_and_parquet(tmp_path):
    rows = table(range(20))
    rows.to_csv(tmp_path / "rows.csv", index=False)
    rows.to_parquet(tmp_path / "rows.parquet")
    spec = parse_spec(SPEC)
    parquet = pipeline.read_snapshot(tmp_path / "rows.parquet", spec)  # text columns as codes (categoricals)
    pd.testing.assert_frame_equal(parquet, rows, check_dtype=False, check_categorical=False)
    # a CSV is text as written, but for the numeric quasi-identifier
    as_written = rows.astype(str).assign(age=rows["age"])
    csv = pipeline.read_snapshot(tmp_path / "rows.csv", spec)
    pd.testing.assert_frame_equal(csv, as_written, check_dtype=False, check_categorical=False)


def test_model_refusal_publishes_nothing(tmp_path):
    spec = parse_spec(spec_of({"name": "l_diversity", "l": 4}))
    store = ReleaseStore(tmp_path / "few.duckdb", spec)
    rows = table(range(60))
    rows["disease"] = np.where(rows["pid"] < 56, "flu", rows["disease"])  # 4 values, but flu dominates
    with pytest.raises(NotPublishable):
        pipeline.release_next(store, rows)
    assert store.release_ids() == []


def test_kept_candidate_sets_equal_a_fresh_computation(store):
    """The judge keeps each release's candidate sets; an attack over a history read with them reports exactly
    what it reports when every set is recomputed from the releases and snapshots."""
    for ids in (range(60), range(10, 75), range(20, 90)):
        pipeline.release_next(store, table(ids))
    kept = store.history()
    assert sorted(kept.candidate_sets) == [2, 3]  # earlier releases are read through the judge's memo
    assert ("intersection", 2) in kept.memo
    fresh = dataclasses.replace(kept, candidate_sets={}, memo={})
    for a, b in zip(attack_history(kept, ["intersection", "critical", "equivalence"]),
                    attack_history(fresh, ["intersection", "critical", "equivalence"]), strict=True):
        assert a.summary == b.summary
        pd.testing.assert_frame_equal(a.violations, b.violations)
    for j in (2, 3):
        np.testing.assert_array_equal(kept.candidate_sets[j], fresh.candidate_sets[j])


def test_restaging_a_candidate_drops_its_kept_candidate_sets(store):
    pipeline.release_next(store, table(range(60)))
    pipeline.stage(store, 2, table(range(10, 75)))
    pipeline.make_candidate(store, 2)
    pipeline.judge(store, 2)
    assert sorted(store.history(candidate=2).candidate_sets) == [1, 2]
    pipeline.make_candidate(store, 2)
    assert sorted(store.history(candidate=2).candidate_sets) == [1]
    store.discard(2)
    assert sorted(store.history().candidate_sets) == [1]


def test_held_back_tuples_are_reported_as_held_back(tmp_path):
    """m-invariance with ``hold_back``: ten new tuples that are not m-eligible (all flu) are held back by release
    2 and published by release 3: "held back 10" then "inserts 20", never "inserts 10" then "deletes 10"."""
    store = ReleaseStore(tmp_path / "m.duckdb", parse_spec(spec_of({"name": "m_invariance", "m": 2, "hold_back": True})))
    pipeline.release_next(store, table(range(60)))
    second = pd.concat([table(range(60)), table(range(1000, 1010)).assign(disease="flu")], ignore_index=True)
    held = pipeline.release_next(store, second)
    assert (held["inserts"], held["deletes"], held["held_back"], held["rows"]) == (0, 0, 10, 60)
    third = pd.concat([second, table(range(2000, 2010)).assign(disease="hiv")], ignore_index=True)
    published = pipeline.release_next(store, third)
    assert (published["inserts"], published["deletes"], published["held_back"]) == (20, 0, 0)
    assert pipeline.release_changes(store, 2)["held_back"] == 10  # read back from the published state


@pytest.fixture(scope="module")
def staged(tmp_path_factory) -> Iterator[ReleaseStore]:
    """A store with T(1) = ``table(range(20))`` staged (not published), shared by the examples of a property;
    no test stages T(2)."""
    path = tmp_path_factory.mktemp("staged") / "clinic.duckdb"
    with ReleaseStore(path, parse_spec(spec_of({"name": "l_diversity", "l": 2}))).session() as s:
        pipeline.stage(s, 1, table(range(20)))
        yield s


@settings(max_examples=examples(60), deadline=None)
@given(st.one_of(st.just(list(range(20))), st.lists(st.integers(0, 24), min_size=1, max_size=24, unique=True)),
       st.sampled_from(["none", "age", "sex", "visits", "disease", "age as float", "pid as float"]),
       st.integers(0, 2**32 - 1))
def test_same_snapshot_is_equality_of_frame_digests(staged, ids, change, seed):
    """``holds_snapshot`` (a count, then the ids' digest, then the whole digest) against its definition: the
    ``frame_digest`` of the validated frame equals that of the stored T(1). Rows shuffled; one cell changed, or a
    numeric column given as floats (numbers compare as float64, so the same rows)."""
    frame = table(ids).sample(frac=1, random_state=seed % 1000).reset_index(drop=True)
    if change in ("age", "visits"):
        frame.loc[0, change] += 1
    elif change in ("sex", "disease"):
        frame.loc[0, change] = "X" if change == "sex" else DISEASES[(DISEASES.index(frame.loc[0, change]) + 1) % 4]
    elif change.endswith("as float"):
        column = change.split()[0]
        frame[column] = frame[column].astype(float)
    frame = validate_snapshot(frame, staged.spec)
    expected = frame_digest(frame) == frame_digest(staged.snapshot(1))
    assert staged.holds_snapshot(1, frame) is expected
    assert staged.holds_snapshot(2, frame) is False  # never staged


def test_bound_spec_reads_the_binding_columns_as_the_whole_snapshot_binds(staged):
    """``store.staged_bound_spec`` (the columns ``Spec.bind`` reads) binds as ``store.bound_spec`` of all of T(1)."""
    fast, full = staged.staged_bound_spec(1), staged.bound_spec(staged.snapshot(1))
    assert fast.sensitive_values == full.sensitive_values
    assert {n: fast.taxonomy(n).leaves for n in ("sex", "region")} == {n: full.taxonomy(n).leaves for n in ("sex", "region")}
    with pytest.raises(StoreError, match="no snapshot staged"):
        staged.staged_bound_spec(2)



def _text_table(ids) -> pd.DataFrame:
    """``table`` with text ids as people write them: ``p00012`` for most, zero-padded digits for every third."""
    frame = table(ids)
    return frame.assign(pid=[f"{i:03d}" if i % 3 == 0 else f"p{i:05d}" for i in frame["pid"]])


def test_m_invariance_keeps_the_signature_of_who_comes_back(tmp_path):
    """Xiao-Tao Def. 17 holds a tuple's signature over its whole lifespan, absences included: 14 releases of text
    ids where people leave and come back (and a whole group leaves) all publish, and the independent verifier
    (``verify_history`` on the complete history, every appearance against the last one) holds. A person who comes
    back with another sensitive value is refused by the model, naming no one."""
    spec = parse_spec(spec_of({"name": "m_invariance", "m": 2}))
    store = ReleaseStore(tmp_path / "m.duckdb", spec)
    rng = np.random.default_rng(3)
    present, fresh, away = set(range(120)), 120, []
    for j in range(1, 15):
        if j > 1:
            gone = set(rng.choice(sorted(present), 12, replace=False).tolist())
            if j == 6:  # a whole group of release 5 leaves
                hosting = store.history().hosting
                group = hosting.loc[hosting["release_id"] == 5, "group_id"].iloc[0]
                gone |= {int(p[1:]) if p[0] == "p" else int(p)
                         for p in hosting.loc[(hosting["release_id"] == 5) & (hosting["group_id"] == group), "pid"]}
            present -= gone
            back = away[: 8] if j % 3 == 0 else []
            away = [p for p in away if p not in back] + sorted(gone)
            present |= set(back) | set(range(fresh, fresh + 10))
            fresh += 10
        summary = pipeline.release_next(store, _text_table(sorted(present)))
        assert summary["outcome"] == "published" and all(summary["checks"].values()), (j, summary["checks"])
    history = store.history()
    assert history.release_ids == list(range(1, 15))
    reports = verify_history(history)
    assert reports and all(r.ok for r in reports), [(r.name, r.summary) for r in reports]
    returned = away[0]
    changed = _text_table([*sorted(present), returned])
    stored = store.history()
    before = stored.snapshots.loc[stored.snapshots["pid"] == changed["pid"].iloc[-1], "disease"].iloc[-1]
    changed.loc[changed.index[-1], "disease"] = next(d for d in DISEASES if d != before)
    with pytest.raises(NotPublishable, match=r"^1 tuple\(s\) changed their sensitive value 'disease'") as refused:
        pipeline.release_next(store, changed)
    assert changed["pid"].iloc[-1] not in str(refused.value)
    assert store.release_ids() == list(range(1, 15))
