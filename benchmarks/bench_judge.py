"""The judge: time to verify and attack a long history, and the per-release baseline broken by the intersection
attack (the shape of Xiao-Tao Fig. 4).

(a) A synthetic 20-release history of 100,000 individuals per release (r = 5,000 deletions and insertions a
    release; age, zipcode numeric, sex categorical; 10 sensitive values), built directly as History frames: each
    release sorts its snapshot by (age, zipcode) and cuts it into QI groups of 8 (``release.build_release``).
    Timed: ``run.verify_history`` (l-diversity per release) and ``run.run_attacks`` (every attack;
    those whose preconditions the history lacks are skipped and say so).
(b) The ``l_diversity`` baseline (``mondrian.publish_l_diversity``, distinct form) republished over a Census-KDD
    workers stream (``datasets.load_census_kdd(workers_only=True)``, resources/census_kdd.yaml; T(1) 20,000
    rows, r deletions and r insertions per release, 10 releases, ``core.stream``): the individuals the
    intersection attack discloses (Xiao-Tao Lemma 1, "vulnerable tuples" of §6), for l = 2..10 at r = 2,000
    and for r = 1,000, 4,000, 8,000 at l = 4. Xiao-Tao Fig. 4 plots the same on IPUMS OCC (not public).
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from dagster_privrelease import datasets, pipeline
from dagster_privrelease.core import models, stream
from dagster_privrelease.core.encoding import encode
from dagster_privrelease.core.judge import attack_registry, attacks, run
from dagster_privrelease.core.judge.history import History
from dagster_privrelease.core.models import mondrian
from dagster_privrelease.core.release import build_release
from dagster_privrelease.core.spec import Model, Spec, load_spec, parse_spec, validate_snapshot
from dagster_privrelease.storage import ReleaseStore

from .common import ROOT, figure, loaded, print_table, ratio, timed

T = TypeVar("T")

SYNTHETIC_ROWS = 100_000
SYNTHETIC_RELEASES = 20
SYNTHETIC_R = 5_000
GROUP_SIZE = 8


def _stamp(frame: pd.DataFrame, release_id: int) -> pd.DataFrame:
    frame = frame.copy()
    frame.insert(0, "release_id", np.int64(release_id))
    return frame


def history_of(snapshots: list[pd.DataFrame], spec: Spec, publish) -> History:
    """The History of publishing each snapshot with ``publish(snapshot, spec, rng) -> Release`` (no state carried
    between releases: the per-release baseline)."""
    tables, hosting, counterfeits, snaps = [], [], [], []
    for j, snapshot in enumerate(snapshots, start=1):
        release = publish(snapshot, spec, np.random.default_rng([spec.seed, j]))
        tables.append(_stamp(release.table, j))
        hosting.append(_stamp(release.hosting, j))
        counterfeits.append(_stamp(release.counterfeits, j))
        snaps.append(_stamp(snapshot, j))
    return History(
        spec,
        pd.concat(tables, ignore_index=True),
        pd.concat(counterfeits, ignore_index=True),
        pd.concat(snaps, ignore_index=True),
        pd.concat(hosting, ignore_index=True),
    )


def synthetic_history(
    rows: int = SYNTHETIC_ROWS, releases: int = SYNTHETIC_RELEASES, r: int = SYNTHETIC_R, seed: int = 0
) -> History:
    """(a)'s history: a uniform synthetic population streamed by ``core.stream``, grouped by sorted position."""
    rng = np.random.default_rng(seed)
    total = rows + r * (releases - 1)
    people = pd.DataFrame(
        {
            "id": np.arange(total, dtype=np.int64),
            "age": rng.integers(17, 91, total).astype(np.float64),
            "zipcode": rng.integers(10_000, 100_000, total).astype(np.float64),
            "sex": rng.choice(["female", "male"], total),
            "disease": rng.choice([f"d{i}" for i in range(10)], total),
        }
    )
    raw = {
        "name": "synthetic",
        "id": "id",
        "sensitive": "disease",
        "quasi_identifiers": {
            "age": {"type": "numeric"},
            "zipcode": {"type": "numeric"},
            "sex": {"type": "categorical"},
        },
        "model": {"name": "l_diversity", "l": 2, "form": "distinct"},
    }
    spec = parse_spec(raw).bind(people)
    base, pool = stream.split_base_pool(people, rows, rng)
    snapshots = list(stream.stream(base, pool, r, releases, rng))

    def by_position(snapshot, spec, rng):
        order = np.lexsort(encode(snapshot, spec, ("zipcode", "age")).T)
        groups = np.empty(len(snapshot), dtype=np.int64)
        groups[order] = np.arange(len(snapshot)) // GROUP_SIZE
        return build_release(snapshot, groups, spec, rng)

    return history_of(snapshots, spec, by_position)


def census_stream(workers: pd.DataFrame, spec: Spec, base: int, r: int, releases: int, seed: int) -> list:
    """Snapshots T(1..releases) of the Census-KDD workers: T(1) ``base`` random rows, then r out and r in."""
    rng = np.random.default_rng(seed)
    first, pool = stream.split_base_pool(workers, base, rng)
    return [validate_snapshot(s, spec) for s in stream.stream(first, pool, r, releases, rng)]


def baseline_spec(workers: pd.DataFrame, l: int) -> Spec:  # noqa: E741 (the paper's ℓ)
    """resources/census_kdd.yaml with the ``l_diversity`` baseline (distinct form) instead of m-invariance."""
    spec = load_spec(ROOT / "resources" / "census_kdd.yaml")
    spec = dataclasses.replace(spec, model=Model("l_diversity", {"l": l, "form": "distinct"}))
    return spec.bind(validate_snapshot(workers, spec))


def vulnerable(snapshots: list[pd.DataFrame], spec: Spec) -> tuple[int, int, int]:
    """``(disclosed, below l, individuals)``: the baseline of ``spec`` republished over ``snapshots``, attacked
    by intersection (disclosed: a single candidate left, Xiao-Tao Lemma 1; below l: fewer than l left)."""
    history = history_of(snapshots, spec, lambda s, sp, rng: mondrian.publish_l_diversity(s, sp, None, rng))
    report = attacks.intersection_attack(history)
    assert history.snapshots is not None
    return report.summary["disclosed"], report.summary["below_bound"], history.snapshots[spec.id].nunique()


def _clocked(fn: Callable[..., T], *args) -> tuple[T, float, float]:
    """``(result, wall seconds, CPU seconds of this process)``: the CPU figure stays meaningful on a busy machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(*args)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def judge_scale() -> None:
    history, build, _ = _clocked(synthetic_history)
    reports, wall, cpu = _clocked(run.verify_history, history)
    verdicts = ", ".join(f"{r.name}: {'ok' if r.ok else 'FAIL'}" for r in reports)
    rows = [["verify_history", figure(wall), figure(cpu), verdicts]]
    total_wall = total_cpu = 0.0
    for name in attack_registry.names():  # run_attacks runs exactly these, in this order
        report, wall, cpu = _clocked(attack_registry.attack(name).run, history)
        total_wall, total_cpu = total_wall + wall, total_cpu + cpu
        status = report.summary.get("skipped") or f"below bound: {report.summary.get('below_bound')}"
        rows.append([f"  {name}", figure(wall), figure(cpu), status])
    rows.insert(1, ["attack_history (sum)", figure(total_wall), figure(total_cpu), ""])
    print_table(
        f"(a) judge on a synthetic {SYNTHETIC_RELEASES}-release history of {SYNTHETIC_ROWS:,} rows "
        f"(r = {SYNTHETIC_R:,}; {len(history.releases):,} published rows; built in {build:.1f} s)",
        ["step", "wall s", "cpu s", "outcome"], rows)


def baseline_census() -> None:
    workers = loaded("(b) the l-diversity baseline on Census-KDD",
                     lambda: datasets.load_census_kdd(workers_only=True))
    if workers is None:
        return
    settings = [(ell, 2_000) for ell in range(2, 11)] + [(4, r) for r in (1_000, 4_000, 8_000)]
    streams = {}
    rows = []
    for l, r in settings:  # noqa: E741
        spec = baseline_spec(workers, l)
        if r not in streams:
            streams[r] = census_stream(workers, spec, 20_000, r, 10, seed=0)
        (hit, below, people), seconds = timed(vulnerable, streams[r], spec)
        rows.append([f"l = {l}, r = {r:,}", hit, f"{hit / people:.2%}", below, people, figure(seconds)])
    print_table(
        "(b) l-diversity (distinct, Mondrian) republished over Census-KDD workers: 10 releases, T(1) 20,000 rows",
        ["setting", "disclosed", "share", "below l", "individuals", "seconds"],
        rows,
        note="disclosed: intersection of candidate sensitive sets of size 1 (Xiao-Tao Lemma 1); "
        "seconds include the 10 publications",
    )


def _m_invariance_stream(what: str, rows: int, r: int, releases: int) -> tuple[Spec, list] | None:
    """The m-invariance spec of ``resources/census_kdd.yaml`` and a Census-KDD workers stream (``census_stream``,
    seed 0); None, after saying why, when the data cannot be had."""
    workers = loaded(what, lambda: datasets.load_census_kdd(workers_only=True))
    if workers is None:
        return None
    spec = load_spec(ROOT / "resources" / "census_kdd.yaml")
    return spec, census_stream(workers, spec.bind(validate_snapshot(workers, spec)), rows, r, releases, seed=0)


def judge_stream(rows: int = 20_000, r: int = 2_000, releases: int = 50, marks: tuple[int, ...] = (2, 14, 50)) -> None:
    """(c) The judge's cost per release over a stream, through the pipeline's own ``judge`` (the store's history
    read, every verifier and attack of m-invariance, the memo saved): release n against release 2."""
    loaded = _m_invariance_stream("(c) the judge per release on Census-KDD", rows, r, releases)
    if loaded is None:
        return
    spec, snapshots = loaded
    seconds: dict[int, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        store = ReleaseStore(Path(folder) / "stream.duckdb", spec)
        with store.session():
            for j, snapshot in enumerate(snapshots, start=1):
                pipeline.stage(store, j, snapshot)
                pipeline.make_candidate(store, j)
                reports, wall, cpu = _clocked(pipeline.judge, store, j)
                seconds[j] = (wall, cpu)
                pipeline.publish(store, j, reports)
    base = seconds[2]
    table = [[f"release {j}", figure(seconds[j][0]), figure(seconds[j][1]), ratio(seconds[j][0], base[0]),
              ratio(seconds[j][1], base[1])] for j in marks if j in seconds]
    print_table(f"(c) pipeline.judge per release, Census-KDD workers (m-invariance m = 4), T(1) {rows:,} rows, "
                f"r = {r:,}, {releases} releases", ["release", "wall s", "cpu s", "wall / release 2",
                                                   "cpu / release 2"], table)


def judge_census_release() -> None:
    """(d) The intersection attack on release 2 of Census-KDD workers (T(1) 120,000 rows, r = 20,000, m = 4),
    release 1's candidate sets kept as the pipeline keeps them."""
    loaded = _m_invariance_stream("(d) the intersection attack on 120k Census-KDD rows", 120_000, 20_000, 2)
    if loaded is None:
        return
    spec, snapshots = loaded
    with tempfile.TemporaryDirectory() as folder:
        store = ReleaseStore(Path(folder) / "census.duckdb", spec)
        with store.session():
            pipeline.stage(store, 1, snapshots[0])
            pipeline.make_candidate(store, 1)
            pipeline.publish(store, 1, pipeline.judge(store, 1))
            pipeline.stage(store, 2, snapshots[1])
            pipeline.make_candidate(store, 2)
            history = run.judged(store.history(candidate=2))
            _, read_wall, read_cpu = _clocked(store.history, None, 2)
    bound = models.descriptor(spec.model.name).bound(spec.model.params)
    report, wall, cpu = _clocked(attacks.intersection_attack, history, bound)
    print_table("(d) release 2 of Census-KDD workers, T(1) 120,000 rows, r = 20,000, m = 4",
                ["step", "wall s", "cpu s", "outcome"],
                [["history read", figure(read_wall), figure(read_cpu), ""],
                 ["intersection attack", figure(wall), figure(cpu),
                  f"disclosed {report.summary['disclosed']}, below bound {report.summary['below_bound']}"]])


def main() -> None:
    judge_scale()
    baseline_census()
    judge_stream()
    judge_census_release()


if __name__ == "__main__":
    main()
