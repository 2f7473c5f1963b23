"""The same release on both backends (issue #27): for m-invariance and the baselines k-anonymity and ℓ-diversity, a
stream of releases with text ids (``p007``; eight for m-invariance, five for the baselines, so the suite keeps to its
time and each stream still has people who come back; k-anonymity's first two releases only insert, so the
correspondence attacks judge a pair before the first departure) published through ``pipeline.release_next`` with
the local backend and with Spark ``local[2]`` (and, for m-invariance, through Spark Connect) leaves the same rows in
every published table, the same verdicts of the judge and the same judge's memo; so does sequential ℓ-diversity on
a stream of insertions (the model refuses departures, Shmueli-Tassa §5.3) whose releases each publish their own
quasi-identifiers. The Spark backend counts its kernels' rows and its primitives' steps, so a model or a judge's
fold that stopped going through the seam would fail here instead of passing on local work alone."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from dagster_privrelease import pipeline
from dagster_privrelease.core.partitioned import Kernel, LocalBackend, Seeds, using
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.errors import BackendError
from dagster_privrelease.storage import ReleaseStore
from dagster_privrelease.testing.contract import CLINIC

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

DISEASES = ["flu", "hiv", "gastritis", "bronchitis"]
MODELS = {
    "m_invariance": {"name": "m_invariance", "m": 2},
    "k_anonymity": {"name": "k_anonymity", "k": 3},
    "l_diversity": {"name": "l_diversity", "l": 2},
}
RELEASES = {"m_invariance": 8, "k_anonymity": 5, "l_diversity": 5}
#: The releases that only insert before the first departure: k-anonymity's stream is incremental for its first
#: pair, so the correspondence attacks (taxonomy Defs. 24-31, inserts only) judge it.
INSERTS_FIRST = {"k_anonymity": 1}
#: The quasi-identifiers each release of the sequential ℓ-diversity stream publishes (vertical requests).
VERTICAL = [["age", "sex"], ["sex", "region"], ["age", "region"], ["age", "sex", "region"]]


def people(ids: range, rng: np.random.Generator) -> pd.DataFrame:
    """The contract's clinic table for ``ids``, as text ids ``p007``; every disease equally often."""
    n = len(ids)
    return pd.DataFrame({"pid": [f"p{i:03d}" for i in ids], "age": rng.integers(20, 70, n),
                         "sex": rng.choice(["F", "M"], n), "region": rng.choice(["n1", "n2", "s1", "s2"], n),
                         "visits": rng.integers(0, 9, n), "disease": np.resize(DISEASES, n)})


def stream(releases: int = 8, inserts: int = 0) -> list[pd.DataFrame]:
    """48 people, then each release 8 inserted and, after the first ``inserts`` releases, 4 deleted (one of each
    disease, so the rest stays m-eligible): two releases after the first deletion, 4 of those inserted are the
    people deleted two snapshots earlier, back after two releases away with their rows unchanged."""
    rng = np.random.default_rng(5)
    table = people(range(48), rng)
    out, left = [table], []
    for j in range(1, releases):
        gone = table.groupby("disease").sample(1, random_state=j).index if j > inserts else table.index[:0]
        back = left[-2] if len(left) >= 2 else people(range(100 * j + 4, 100 * j + 8), rng)
        if j > inserts:
            left.append(table.loc[gone])
        table = pd.concat([table.drop(index=gone), back, people(range(100 * j, 100 * j + 4), rng)],
                          ignore_index=True)
        out.append(table)
    return out


def published(path: Path) -> dict[str, pd.DataFrame]:
    """Every published table but the manifest's timestamps, rows in one canonical order."""
    with duckdb.connect(str(path), read_only=True) as con:
        return {
            "release": con.sql("SELECT * FROM published.release ORDER BY ALL").df(),
            "counterfeit": con.sql("SELECT * FROM published.counterfeit ORDER BY ALL").df(),
            "manifest": con.sql("SELECT * EXCLUDE (created_at) FROM published.manifest ORDER BY release_id").df(),
            "verdict": con.sql("SELECT * FROM published.verdict ORDER BY ALL").df(),
            "judge memo": con.sql("SELECT release_id, name, frame FROM private.judge_memo ORDER BY ALL").df(),
        }


class Counting:
    """A backend that forwards to ``inner`` and counts the rows of its kernels and the calls of each primitive's
    step."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.workers, self.rows, self.steps = inner, inner.name, inner.workers, 0, Counter()

    def run(self, kernel: Kernel, columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
        self.rows += len(columns["key"])
        return self.inner.run(kernel, columns, seeds)

    def count_per_key(self, keys: Mapping[str, np.ndarray], step: str) -> dict[str, np.ndarray]:
        self.steps[step] += 1
        return self.inner.count_per_key(keys, step)

    def lookup(self, keys: np.ndarray, table: np.ndarray, step: str) -> np.ndarray:
        self.steps[step] += 1
        return self.inner.lookup(keys, table, step)

    def previous_per_key(self, keys: np.ndarray, step: str) -> np.ndarray:
        self.steps[step] += 1
        return self.inner.previous_per_key(keys, step)


def publish_stream(path: Path, model: Mapping, backend, releases: int = 8) -> dict[str, pd.DataFrame]:
    store = ReleaseStore(path, parse_spec({**CLINIC, "model": dict(model), "seed": 11}))
    with using(backend):
        for snapshot in stream(releases, INSERTS_FIRST.get(model["name"], 0)):
            assert pipeline.release_next(store, snapshot)["outcome"] == "published"
    return published(path)


@cache
def published_locally(name: str, folder: Path, releases: int) -> dict[str, pd.DataFrame]:
    """The stream of model ``name`` (``releases`` long) published on the local backend (once per test run: the
    cache's key is the arguments as passed, so every caller passes all three positionally)."""
    return publish_stream(folder / f"{name}-{releases}.duckdb", MODELS[name], LocalBackend(workers=2), releases)


def assert_same_stream(name: str, local: dict[str, pd.DataFrame], remote: dict[str, pd.DataFrame],
                       on_spark: Counting, releases: int = 8) -> None:
    """Every published table, the verdicts and the judge's memo are equal, and the stream went through Spark:
    the kernels, the judge's look-ups by individual (the intersection, equivalence and correspondence attacks'
    folds), m-invariance's joins by id (Lemma 4) and counts per signature, the m-invariance verifier's lag by
    person (each appearance's previous one, across the returners' gaps) and the publisher-side checks' match of
    each tuple with its hosting row (Xiao-Tao Def. 1)."""
    assert on_spark.rows > 0, f"{name} never ran a kernel on the Spark backend"
    assert on_spark.steps["intersection runs by individual"] >= releases, on_spark.steps
    assert on_spark.steps["live classes by individual"] == releases, on_spark.steps
    assert on_spark.steps["hosting by individual"] == releases, on_spark.steps  # the publisher-side checks
    # the correspondence attacks look for departures pair by pair up to the first (then they are skipped)
    assert on_spark.steps["departures by individual"] == 1 + INSERTS_FIRST.get(name, 0), on_spark.steps
    if name == "k_anonymity":  # its pair (1, 2) only inserts: the forward, cross and backward rows join by id
        assert on_spark.steps["corresponding classes by individual"] == 1, on_spark.steps
    if name == "m_invariance":
        assert on_spark.steps["previous appearance by individual"] == releases, on_spark.steps
        assert on_spark.steps["cold classes by individual"] >= 1, on_spark.steps  # a returner's class came back
        assert on_spark.steps["counts per signature"] == releases
        assert on_spark.steps["counts of the new tuples"] == releases
        assert on_spark.steps["previous hosting by individual"] == releases - 1, on_spark.steps
    assert len(local["manifest"]) == releases and local["release"]["release_id"].nunique() == releases
    assert len(local["verdict"]) > releases and len(local["judge memo"]) > releases
    for table, rows in local.items():
        pd.testing.assert_frame_equal(remote[table], rows, obj=f"{name}: {table}")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_spark_publishes_the_rows_local_publishes(spark, tmp_path, tmp_path_factory, name) -> None:
    from dagster_privrelease.spark import SparkBackend

    on_spark, releases = Counting(SparkBackend(spark, batches=3)), RELEASES[name]
    remote = publish_stream(tmp_path / "spark.duckdb", MODELS[name], on_spark, releases)
    local = published_locally(name, tmp_path_factory.getbasetemp(), releases)
    assert_same_stream(name, local, remote, on_spark, releases)


def test_spark_connect_publishes_the_rows_local_publishes(connect, tmp_path, tmp_path_factory) -> None:
    """The same m-invariance stream, its first 4 releases (the classic session's test runs all 8), through a Spark
    Connect client: kernels in ``applyInArrow``, counts and the judge's join as DataFrame operations, no
    ``sparkContext`` on the client."""
    from dagster_privrelease.spark import SparkBackend

    on_connect = Counting(SparkBackend(connect, batches=3))
    remote = publish_stream(tmp_path / "connect.duckdb", MODELS["m_invariance"], on_connect, releases=4)
    local = published_locally("m_invariance", tmp_path_factory.getbasetemp(), 4)
    assert_same_stream("m_invariance", local, remote, on_connect, releases=4)


def test_sug_attack_on_spark_equals_local(spark, tmp_path_factory) -> None:
    """The SUG attack (Li-Zhou §III) over the eight m-invariance releases, with update sets that let each disease
    change to the next: folded on Spark (each individual of release j found among the last layers by a look-up
    on the backend, returners included) it gives the local fold's report and memo."""
    from dagster_privrelease.core.judge.attacks.sug import sug_attack
    from dagster_privrelease.spark import SparkBackend

    published_locally("m_invariance", tmp_path_factory.getbasetemp(), 8)
    spec = parse_spec({**CLINIC, "model": dict(MODELS["m_invariance"]), "seed": 11})
    store = ReleaseStore(tmp_path_factory.getbasetemp() / "m_invariance-8.duckdb", spec)
    sets = {d: [d, DISEASES[(i + 1) % len(DISEASES)]] for i, d in enumerate(DISEASES)}
    reports, memos = [], []
    on_spark = Counting(SparkBackend(spark, batches=2))
    for backend in (LocalBackend(workers=2), on_spark):
        history = store.history()
        with using(backend):
            reports.append(sug_attack(history, update_sets=sets))
        memos.append(history.memo)
    assert on_spark.steps["last layers by individual"] == 8, on_spark.steps
    local, remote = reports
    assert local.summary["attacked"] > 0 and local.summary == remote.summary
    pd.testing.assert_frame_equal(remote.violations, local.violations)
    assert sorted(memos[0]) == sorted(memos[1]) and len(memos[0]) >= 3
    for entry, frame in memos[0].items():
        pd.testing.assert_frame_equal(memos[1][entry], frame, obj=str(entry))


def insertions(releases: int) -> list[pd.DataFrame]:
    """48 people, then 8 more each release (two of each disease: an ℓ-diverse batch, Shmueli-Tassa §5.2)."""
    rng = np.random.default_rng(7)
    out = [people(range(48), rng)]
    for j in range(1, releases):
        out.append(pd.concat([out[-1], people(range(100 * j, 100 * j + 8), rng)], ignore_index=True))
    return out


def test_sequential_l_diversity_on_spark_equals_local(spark, tmp_path) -> None:
    """Sequential ℓ-diversity over four insertions, each release publishing its own quasi-identifiers (``VERTICAL``):
    the same published rows, verdicts and judge's memo on both backends, with the model's joins by id (the
    worlds' sources, Eqs. (5) and (8); T(n-1) found in T(n), §5.2), the Shmueli-Tassa verifier's (the world
    tuples; the worlds' extension; Def. 3.2's links per individual and value, counted) and the vertical attacks'
    (the people folded per release) on Spark; and the join attack with a partial x over the complete history
    (each individual's last snapshot row) gives the same report on both."""
    from dagster_privrelease.core.judge.attacks.vertical import join_attack
    from dagster_privrelease.spark import SparkBackend

    spec = parse_spec({**CLINIC, "model": {"name": "sequential_l_diversity", "l": 2}, "seed": 11})
    on_spark, results = Counting(SparkBackend(spark, batches=2)), []
    for backend in (LocalBackend(workers=2), on_spark):
        store = ReleaseStore(tmp_path / f"{backend.name}.duckdb", spec)
        with using(backend):
            for snapshot, attributes in zip(insertions(len(VERTICAL)), VERTICAL, strict=True):
                assert pipeline.release_next(store, snapshot, attributes)["outcome"] == "published"
            results.append((published(tmp_path / f"{backend.name}.duckdb"), join_attack(store.history(), x=["age"])))
    n = len(VERTICAL)
    assert on_spark.steps["world sources by individual"] == n, on_spark.steps
    assert on_spark.steps["insertions by individual"] == n - 1, on_spark.steps
    assert on_spark.steps["world tuples by individual"] == n, on_spark.steps
    assert on_spark.steps["extension by individual"] == n - 1, on_spark.steps
    assert on_spark.steps["world links by individual"] == n, on_spark.steps
    # the join and possible-world attacks: release 2 folds releases 1 and 2 (their memo starts with two attribute
    # sets), each later release itself, and from release 3 on looks release n - 1's people up in the memo
    assert on_spark.steps["vertical state by individual"] == 2 * n, on_spark.steps
    assert on_spark.steps["possible worlds by individual"] == n - 2, on_spark.steps
    assert on_spark.steps["last snapshot by individual"] == 1, on_spark.steps
    (local, local_join), (remote, remote_join) = results
    assert len(local["manifest"]) == n and local["release"]["release_id"].nunique() == n
    assert {"join", "possible_worlds"} <= {name.split(".")[0] for name in local["judge memo"]["name"]}
    for table, rows in local.items():
        pd.testing.assert_frame_equal(remote[table], rows, obj=f"sequential_l_diversity: {table}")
    assert local_join.summary == remote_join.summary and local_join.summary["attacked"] > 0
    pd.testing.assert_frame_equal(remote_join.violations, local_join.violations)


def test_spark_reads_the_exported_releases(spark, tmp_path) -> None:
    """The published side at scale is Parquet Spark reads (docs/scaling.md): the export of a store, read by Spark
    with its ``release_id`` from the folder names, holds every published row of every release."""
    from dagster_privrelease.export import export_store

    store = ReleaseStore(tmp_path / "s.duckdb", parse_spec({**CLINIC, "model": dict(MODELS["m_invariance"])}))
    for snapshot in stream(3):
        pipeline.release_next(store, snapshot)
    assert export_store(tmp_path / "s.duckdb", tmp_path / "out") == [1, 2, 3]
    read = spark.read.parquet(str(tmp_path / "out" / "release")).toPandas()
    expected = published(tmp_path / "s.duckdb")["release"]
    read = read[list(expected.columns)].sort_values(list(expected.columns), ignore_index=True)
    assert sorted(read["release_id"].unique().tolist()) == [1, 2, 3]
    pd.testing.assert_frame_equal(read, expected, check_dtype=False)


def refuse_everything(columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
    """A kernel that fails on any row, quoting a person as a careless kernel might."""
    raise ValueError(f"p{int(columns['key'][0]):03d} is hiv")


class FailingOnce(Counting):
    """The Spark backend, whose first kernel call runs ``refuse_everything`` instead of the model's kernel."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.failed = False

    def run(self, kernel: Kernel, columns: Mapping[str, np.ndarray], seeds: Seeds) -> np.ndarray:
        failing, self.failed = not self.failed, True
        return super().run(refuse_everything if failing else kernel, columns, seeds)


def test_a_kernel_failing_on_spark_publishes_nothing_and_the_retry_publishes(spark, tmp_path,
                                                                             tmp_path_factory) -> None:
    """Release 2's split fails on Spark: one ``BackendError`` line, release 1 stays the only one published; the
    same snapshot published again (the same backend, its kernel now healthy) is release 2, row for row the
    local backend's."""
    from dagster_privrelease.spark import SparkBackend

    first, second = stream(2)
    spec = parse_spec({**CLINIC, "model": dict(MODELS["m_invariance"]), "seed": 11})
    store = ReleaseStore(tmp_path / "s.duckdb", spec)
    assert pipeline.release_next(store, first)["outcome"] == "published"
    backend = FailingOnce(SparkBackend(spark, batches=2))
    with using(backend), pytest.raises(BackendError) as caught:
        pipeline.release_next(store, second)
    assert "kernel refuse_everything" in str(caught.value) and "hiv" not in str(caught.value)
    assert published(tmp_path / "s.duckdb")["manifest"]["release_id"].tolist() == [1]
    with using(backend):
        assert pipeline.release_next(store, second)["outcome"] == "published"
    local = published_locally("m_invariance", tmp_path_factory.getbasetemp(), 8)
    got = published(tmp_path / "s.duckdb")
    for table in ("release", "counterfeit"):
        expected = local[table][local[table]["release_id"] <= 2].reset_index(drop=True)
        pd.testing.assert_frame_equal(got[table], expected, obj=table)
