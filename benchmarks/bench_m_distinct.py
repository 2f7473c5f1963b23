"""m-Distinct (core/models/m_distinct/) on Census-KDD with Li-Zhou's update protocol (§VI-A), against the
paper's Figs. 3, 5, 7-9, and the whole-release target of issue #14.

Data: the Census-KDD workers (144,930 rows; ``datasets.load_census_kdd(workers_only=True)``), **not resampled**
(except ``whole_release``): the paper's QIs age (numeric), sex, marital status, education (categorical, with the
taxonomies of resources/hierarchies); sensitive the detailed occupation (46 values; the paper's OCC has 50).

Protocol (§VI-A, ``paper_stream`` over ``core.stream``): T(1) is 20k random rows, each next snapshot deletes 2k
random rows and inserts 5k new ones from the rest (Figs. 7-8 delete 3k, as the paper does for them). Between
releases *every* record ages by 1 (capped at 90, Census-KDD's top code) and updates its marital status and
education by their semantics, each uniformly among its legal values, itself included (``never_back``: nobody
becomes "Never married" again; ``not_lower``: education never falls, in the taxonomy's leaf order); 5k random
survivors change occupation uniformly within its CUS (``within_sets``). The CUS of diameter d (``cus``) cuts the
occupation values, sorted, into blocks of d (the last holds the 46 mod d rest): the paper gives every CUS the
same size d (footnote 10), and closed sets (Def. 12) of one size are a partition. resources/census_kdd_m_distinct.yaml
is the d = 10 spec.

**Which records update their QI values: a reading of §VI-A.** The paper lists per attribute what happens "in the
span of [i, i+1]": the age "of each record" grows, marital status and education "update according to the
specific semantic of each value", and "the internal updates on sensitive values only randomly occurred on 5,000
records". We read the 5,000 as the occupation's alone (every record's QI values move, as its age does); an earlier
version of this benchmark updated marital status and education on the same 5,000 rows only, and the over-time
table prints that reading in its last column. Measured over 20 releases (2026-11-23, θ = 0.5, 200 queries, so a
median moves by about ±0.01 between neighbouring releases):

- every record (our reading): m = 4 rises from 0.058 (release 1) to 0.104 (release 5), then falls back to
  0.022-0.043 from release 11 on (0.032 at 20); m = 2 stays at 0.026-0.046 and ends at 0.018. The rise comes
  while the QI values scatter; we attribute the later fall (not measured apart) to the protocol: a level drawn
  uniformly among those not lower halves the distance to the top on average, so within a few releases nearly
  everyone's education is at the top levels, the QI space shrinks, and the growing table (20k -> 77k) fills it;
- the 5k rows only: the QI values barely move, strict re-partitioning keeps records with their old neighbours,
  and the error falls with the table's growth (0.040 at release 1, 0.012-0.024 from release 8 on).

Neither reading gives the paper's "grows smoothly, then flattens" (Fig. 5a) over 20 releases. What the paper
leaves open and would decide it: the rate of the QI updates (it names none), whether education saturates, its
first-release algorithm (here release 1 groups new records by Xiao-Tao's bucket assignment over single values,
which is why release 1 is worse than release 2 at m = 2), and its 10,000 queries with the error divided by the
estimate.

**Why the ℓ-diversity baseline leaks far less than the paper's (Fig. 3a), measured.** The earlier figure was
3.2% disclosed after 20 releases at ℓ = 2, against about 66%. Neither the stream nor the SUG attack (a forward-
backward feasibility recursion; ``core/judge/attacks/sug.py``) is at fault. With a CUS that partitions the values,
a feasible path stays in one CUS block, so a layer is disclosed only when the record's own block is the only one
present in *every* layer of its history and holds only the true value in that layer. Two things decide it:

1. *Group size.* Strict Mondrian (``models.mondrian``) cuts between QI values, so a QI point is never split, and
   on Census-KDD's four QIs 82% of the rows share their QI point with 3 or more others (3,489 points in 20k rows):
   the 2-diverse groups are large (median 4, 90th percentile 24 records), a record's group spans about 3.7 of the
   5 CUS blocks, and the same neighbours (whose blocks never change: updates stay in the block) come back release
   after release. A *relaxed* partition (``relaxed_l_diversity``: Mondrian, then ties between records of one QI
   point cut by their rank) gives groups of 2-3 records (89% of rows in groups of at most 3).
2. *The adversary.* The judge's adversary knows a record's QI values, so its candidate set is the union over every
   group whose published box contains them (``attacks.candidate_sets``); for a relaxed partition those are all
   the groups of the record's QI point, which gives back the strict partition's large sets. The paper's examples
   let the adversary know the record's own group ("Julia's candidate sensitive set C1 is {Dyspepsia,
   Pneumonia}"); ``own_groups`` gives the SUG attack those sets.

Only both together reproduce the paper. Measured at ℓ = 2 after 2/5/10/20 releases (d = 10, 2026-11-23): strict
Mondrian with the judge's adversary 0.9 / 2.3 / 2.3 / 1.7%, with the paper's 2.9 / 6.6 / 6.3 / 4.7%; the relaxed
partition with the judge's adversary 0.9 / 2.3 / 2.4 / 1.7%, with the paper's **26.6 / 50.9 / 58.1 / 61.5%**
(paper: about 66% after 20, growing). At ℓ = 4 the relaxed partition with the paper's adversary discloses
0.3 / 2.9 / 7.0 / 11.0% (paper: less at larger ℓ, growing); every other ℓ = 4 row stays at or below 0.4%.
So the paper's 66% is the figure of an adversary who knows each record's group, against groups of 2-3; the judge
keeps the QI-only adversary, which is the right one for a published generalisation; 2-Distinct on the same
stream discloses 0% to it (Lemma 3 covers the paper's adversary too: its layers keep m values).

The full protocol (20 releases, 20k -> 77k rows) is run for the paper's default (d = 10) at m = 2 and 4 and for the
ℓ-diversity baselines; the sweeps over d and m run fewer releases (``SWEEP_RELEASES``, printed). Query error:
``judge.utility.query_error`` (median of |act - est| / act over 200 random queries; the paper divides by the
estimate and runs 10,000 queries). Times are CPU seconds of ``publish`` (``time.process_time``; the machine is
shared, so wall time is not used), except ``whole_release``, which prints CPU and wall of ``run_release`` against
DuckDB's read+sort floor.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from dagster_privrelease import datasets
from dagster_privrelease.core import models
from dagster_privrelease.core.encoding import codes_in, encode
from dagster_privrelease.core.judge.attacks.sug import sug_risks
from dagster_privrelease.core.judge.history import History
from dagster_privrelease.core.judge.utility import query_error
from dagster_privrelease.core.models.kernels import partition as kernel
from dagster_privrelease.core.release import PreviousRelease, build_release, release_rng
from dagster_privrelease.core.spec import Spec, load_spec, parse_spec, validate_snapshot
from dagster_privrelease.core.stream import increment, never_back, not_lower, split_base_pool, stream, within_sets

from .bench_release import Steps, released
from .common import ROOT, figure, loaded, print_table, ratio, read_sort_floor, verdict

QIS = ("age", "sex", "marital_stat", "education")
SENSITIVE = "detailed_occupation_recode"
HIERARCHIES = {"sex": "census_kdd_sex.yaml", "marital_stat": "census_kdd_marital_stat.yaml",
               "education": "census_kdd_education.yaml"}
BASE, DELETES, INSERTS, UPDATES, RELEASES = 20_000, 2_000, 5_000, 5_000, 20
WHOLE, WHOLE_R, WHOLE_UPDATES = 200_000, 20_000, 50_000  # the whole-release target (issue #14)
SWEEP_RELEASES = 4  # the sweeps over d and m (Figs. 8-9): releases per point
QUERIES = 200
NEVER = "Never married"


def occupations(table: pd.DataFrame) -> list[str]:
    return sorted(table[SENSITIVE].unique())


def cus(values: list[str], d: int) -> dict[str, list[str]]:
    """CUS of diameter d: the sorted values cut into consecutive blocks of d (a partition, hence closed)."""
    blocks = [values[i:i + d] for i in range(0, len(values), d)]
    return {v: block for block in blocks for v in block}


def spec_for(model: dict, values: list[str]) -> Spec:
    return parse_spec({
        "name": "census_kdd_m_distinct", "id": "id", "sensitive": {"name": SENSITIVE, "values": values},
        "quasi_identifiers": {"age": {"type": "numeric", "min_width": 1},
                              **{q: {"type": "categorical", "hierarchy": f"hierarchies/{h}"}
                                 for q, h in HIERARCHIES.items()}},
        "model": model, "seed": 20080407,
    }, base=ROOT / "resources")


def education_levels() -> list[str]:
    """The education leaves in order of attainment (the taxonomy file's order)."""
    out: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)
        else:
            out.append(str(node))

    walk(yaml.safe_load((ROOT / "resources/hierarchies/census_kdd_education.yaml").read_text()))
    return out


def paper_stream(table: pd.DataFrame, d: int, releases: int, rng: np.random.Generator,
                 deletes: int = DELETES, inserts: int = INSERTS, base: int = BASE, updates: int = UPDATES,
                 qi_on_updated_only: bool = False) -> Iterator[pd.DataFrame]:
    """§VI-A (``core.stream``): T(1) of ``base`` random rows of ``table``, then -deletes/+inserts rows; every
    survivor ages by 1 (capped at 90) and its marital status and education update by their semantics
    (``never_back``, ``not_lower``: uniformly among the legal values, itself included); ``updates`` random
    survivors change occupation uniformly within its CUS of diameter d. ``qi_on_updated_only``: the other
    reading, marital status and education updated on those ``updates`` rows only (module docstring)."""
    first, pool = split_base_pool(table, base, rng)
    qi = {"marital_stat": never_back(sorted(table["marital_stat"].unique()), NEVER),
          "education": not_lower(education_levels())}
    sensitive = {SENSITIVE: within_sets(cus(occupations(table), d))}
    every = {"age": increment(1, cap=90), **({} if qi_on_updated_only else qi)}
    return stream(first, pool, deletes, releases, rng, inserts=inserts, updates=updates,
                  update_columns={**sensitive, **(qi if qi_on_updated_only else {})}, every_row=every)


def _stamp(frame: pd.DataFrame, j: int) -> pd.DataFrame:
    frame = frame.copy()
    frame.insert(0, "release_id", np.int64(j))
    return frame


def run_series(table: pd.DataFrame, model: dict, d: int, releases: int, seed: int = 1, thetas=(),
               deletes: int = DELETES, history: bool = False, inserts: int = INSERTS,
               qi_on_updated_only: bool = False, publish=None) -> tuple[list[dict], History | None]:
    """Publish the stream under ``model`` (``publish`` overrides the model's publisher, the spec staying
    ``model``'s): per release counterfeits, groups, CPU s, query error per θ; and the History (for the SUG attack)
    when asked."""
    values = occupations(table)
    spec = spec_for({**model, **({"update_sets": cus(values, d)} if model["name"] == "m_distinct" else {})}, values)
    publish = publish or models.descriptor(model["name"]).publish
    previous, out = None, []
    parts: dict[str, list[pd.DataFrame]] = {"r": [], "c": [], "s": [], "h": []}
    frames = paper_stream(table, d, releases, np.random.default_rng(seed), deletes, inserts,
                          qi_on_updated_only=qi_on_updated_only)
    bound = None
    for j, raw in enumerate(frames, start=1):
        bound = spec.bind(raw)
        snapshot = validate_snapshot(raw, bound)
        start = time.process_time()
        release = publish(snapshot, bound, previous, release_rng(bound, j))
        cpu = time.process_time() - start
        row = {"release": j, "rows": len(snapshot), "counterfeits": release.counterfeit_count,
               "groups": release.groups, "cpu": cpu, "inputs": (snapshot, bound, previous)}
        for theta in thetas:
            row[theta] = query_error(release.table, snapshot, release.counterfeits, bound, theta, QUERIES,
                                     np.random.default_rng(j))
        out.append(row)
        if history:
            for key, frame in zip("rcsh", (release.table, release.counterfeits, snapshot, release.hosting),
                                  strict=True):
                parts[key].append(_stamp(frame, j))
        previous = PreviousRelease(j, snapshot, release.table, release.counterfeits, release.hosting, release.state)
    if not history or bound is None:
        return out, None
    return out, History(bound, *(pd.concat(parts[k], ignore_index=True) for k in "rcsh"))


def relaxed_l_diversity(snapshot: pd.DataFrame, spec, previous, rng: np.random.Generator):
    """ℓ-diverse groups that may split records of equal QI values (a *relaxed* partition): Mondrian over the QIs
    and, last, the rank of each record among those of its QI point (``kernels.partition.partition`` cuts that extra
    dimension only where no QI can be cut: its scale makes it the narrowest). Groups of 2-3 records for ℓ = 2,
    where strict Mondrian must keep every QI point whole (module docstring). ``previous`` is ignored."""
    X = encode(snapshot, spec)
    tie = snapshot.groupby(list(spec.quasi_identifiers), sort=False, dropna=False).cumcount().to_numpy(np.float64)
    scale = np.r_[kernel.domain_widths(X, spec), 1e9]
    groups = kernel.partition(np.c_[X, tie], snapshot[spec.sensitive].to_numpy(),
                                l=int(spec.model.params["l"]), scale=scale)
    return build_release(snapshot, groups, spec, rng)


def own_groups(history: History) -> History:
    """``history`` whose candidate sets are each record's *own* group's values (the adversary of Li-Zhou's
    Examples 2-5, who knows which group holds the record: "Julia's candidate sensitive set C1 is {Dyspepsia,
    Pneumonia}"), not the union over every group whose box contains its QI values (the judge's adversary, who
    knows the QI values only). O(rows) per release."""
    spec = history.spec
    assert history.hosting is not None
    sets = {}
    for j in history.release_ids:
        snap, table = history.snapshot(j), history.release(j)
        host = history.hosting[history.hosting["release_id"] == j]
        ids, group = np.unique(table["group_id"].to_numpy(), return_inverse=True)
        values = np.zeros((len(ids), len(spec.sensitive_values)), dtype=bool)
        values[group, codes_in(table[spec.sensitive], spec.sensitive_values)] = True
        where = pd.Index(host[spec.id].to_numpy()).get_indexer(snap[spec.id].to_numpy())
        sets[j] = values[np.searchsorted(ids, host["group_id"].to_numpy()[where])]
    return History(spec, history.releases, history.counterfeits, history.snapshots, history.hosting,
                   candidate_sets=sets)


def disclosed(history: History, d: int, values: list[str], upto: int) -> float:
    """SUG attack (Li-Zhou §III, ``sug_risks``) with the CUS of diameter d by the adversary of release ``upto``
    (releases 1..upto): the share of the sensitive values published so far (one per record and release) whose
    feasible layer keeps one node (Lemma 2: risk 1). The candidate sets are shared with ``history``'s."""
    def first(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[frame["release_id"] <= upto]

    assert history.snapshots is not None and history.hosting is not None
    sub = History(history.spec, first(history.releases), first(history.counterfeits), first(history.snapshots),
                  first(history.hosting), candidate_sets=history.candidate_sets)
    frame, _ = sug_risks(sub, cus(values, d))
    return float((frame["size"] == 1).mean())


def baseline(table: pd.DataFrame) -> None:
    """Fig. 3a: the ℓ-diverse re-publication over the same stream, judged by the SUG attack after 2/5/10/20
    releases, for strict and relaxed ℓ-diverse partitions and for the judge's and the paper's adversary."""
    values = occupations(table)
    rows = []
    when = (2, 5, 10, RELEASES)
    for name, model, publish in (
        ("2-diversity, strict Mondrian", {"name": "l_diversity", "l": 2}, None),
        ("2-diversity, relaxed (groups of 2-3)", {"name": "l_diversity", "l": 2}, relaxed_l_diversity),
        ("4-diversity, strict Mondrian", {"name": "l_diversity", "l": 4}, None),
        ("4-diversity, relaxed", {"name": "l_diversity", "l": 4}, relaxed_l_diversity),
        ("2-Distinct (peer)", {"name": "m_distinct", "m": 2}, None),
    ):
        _, history = run_series(table, model, 10, RELEASES, history=True, publish=publish)
        assert history is not None
        rows.append((name, "judge's (QI values)", *(f"{100 * disclosed(history, 10, values, j):.1f}%" for j in when)))
        if model["name"] == "l_diversity":
            mine = own_groups(history)
            rows.append((name, "paper's (own group)", *(f"{100 * disclosed(mine, 10, values, j):.1f}%" for j in when)))
    print_table(
        f"Fig. 3a: share of published sensitive values disclosed by the SUG attack (d = 10, {RELEASES} releases, "
        f"-{DELETES}/+{INSERTS} rows and {UPDATES} updates per release)",
        ["model", "adversary", *(f"after {j}" for j in when)], rows,
        "paper Fig. 3a: about 66% after 20 releases at l = 2 (less at larger l, growing over time). Disclosed = the "
        "layer's feasible set keeps one value (Lemma 2, risk 1). Strict Mondrian keeps every QI point whole, and "
        "82% of Census-KDD's rows share their 4 QI values with 3 or more others, so its 2-diverse groups are large "
        "(a record's group spans about 3.7 of the 5 CUS blocks) and stay put across releases; the paper's figure "
        "needs groups of 2-3 (relaxed) AND an adversary who knows each record's group (module docstring).",
    )


def over_time(table: pd.DataFrame) -> dict[int, list[dict]]:
    """Fig. 5a (error over time, θ = 50%), counterfeits per group over time, time per release; m = 2, 4, and
    m = 2 under the other reading of §VI-A (marital status and education updated on the 5k rows only)."""
    series = {m: run_series(table, {"name": "m_distinct", "m": m}, 10, RELEASES, thetas=(0.5,))[0] for m in (2, 4)}
    other, _ = run_series(table, {"name": "m_distinct", "m": 2}, 10, RELEASES, thetas=(0.5,), qi_on_updated_only=True)
    rows = [(j, series[2][j - 1]["rows"],
             *(x for m in (2, 4) for x in (figure(series[m][j - 1][0.5]),
                                           figure(series[m][j - 1]["counterfeits"] / series[m][j - 1]["groups"]),
                                           figure(series[m][j - 1]["cpu"]))),
             figure(other[j - 1][0.5]))
            for j in range(1, RELEASES + 1)]
    print_table(
        f"Fig. 5a / 7 / 9: per release, d = 10, -{DELETES}/+{INSERTS}, {UPDATES} updates ({RELEASES} releases)",
        ["release", "rows", "error m=2", "CNT_g m=2", "CPU s m=2", "error m=4", "CNT_g m=4", "CPU s m=4",
         "error m=2, QI updates on 5k rows"], rows,
        "paper Fig. 5a: median error grows smoothly, then flattens (θ = 50%); CNT_g = counterfeits per group. The "
        "last column reads §VI-A's marital/education updates as made on the 5k updated rows only (module "
        "docstring): the QI values then barely move and the error falls as the table grows. Under our reading "
        "(every record) it rises, then falls once education has saturated at the top levels.",
    )
    return series


def over_theta(table: pd.DataFrame) -> None:
    thetas = (0.1, 0.3, 0.5, 0.7, 0.9)
    s, _ = run_series(table, {"name": "m_distinct", "m": 4}, 10, SWEEP_RELEASES, thetas=thetas)
    print_table(
        f"Fig. 5b: median query error over θ (m = 4, d = 10; mean over {SWEEP_RELEASES} releases)",
        ["θ", "median error"], [(t, figure(statistics.mean(x[t] for x in s))) for t in thetas],
        "paper Fig. 5b: the error falls as θ grows.",
    )


def counterfeits_and_time(table: pd.DataFrame) -> None:
    """Figs. 7-8 (CNT_g over d at m = 6, over m at d = 5; deletes 3k as the paper) and Fig. 9 (time of release 2)."""
    def point(m: int, d: int) -> tuple[str, str, str]:
        s, _ = run_series(table, {"name": "m_distinct", "m": m}, d, SWEEP_RELEASES, deletes=3_000)
        cnt = statistics.mean(x["counterfeits"] / x["groups"] for x in s)
        return figure(cnt), figure(s[1]["cpu"]), figure(statistics.mean(x["cpu"] for x in s[1:]))

    cols = ["avg CNT_g", "CPU s release 2", "avg CPU s releases 2+"]
    print_table(f"Fig. 8a / 9a: over d (m = 6, -3000/+5000, {SWEEP_RELEASES} releases)", ["d", *cols],
                [(d, *point(6, d)) for d in (6, 10, 15, 23)],
                "paper: CNT_g falls as d grows (Fig. 8a), time grows with d (Fig. 9a). d = 23 cuts the 46 values in "
                "two blocks.")
    print_table(f"Fig. 8b / 9b: over m (d = 5, -3000/+5000, {SWEEP_RELEASES} releases)", ["m", *cols],
                [(m, *point(m, 5)) for m in (2, 4, 6, 8)],
                "paper Fig. 8b: CNT_g below 2 for every m (8-Distinct the largest); Fig. 9b: time falls from m = 2 "
                "to 4, then grows to 8.")


def flatness(series: dict[int, list[dict]], table: pd.DataFrame) -> None:
    """Release 20 against release 2: on the growing §VI-A stream (as run above), and on a stream of constant size
    (20k rows, -3k/+3k, 5k updates), where the issue's target applies. The machine's CPU speed drifts, so on the
    constant stream releases 2 and 20 are re-published alternately, 3 times each, and the least CPU is compared."""
    rows = [(f"§VI-A, m = {m}", f"{s[1]['rows']:,} / {s[-1]['rows']:,}", figure(s[1]["cpu"]), figure(s[-1]["cpu"]),
             ratio(s[-1]["cpu"], s[1]["cpu"]), ratio(s[-1]["cpu"] / s[-1]["rows"], s[1]["cpu"] / s[1]["rows"]))
            for m, s in series.items()]
    s, _ = run_series(table, {"name": "m_distinct", "m": 4}, 10, RELEASES, deletes=3_000, inserts=3_000)
    publish = models.descriptor("m_distinct").publish
    best = {2: np.inf, RELEASES: np.inf}
    for _ in range(3):
        for j in best:
            snapshot, spec, previous = s[j - 1]["inputs"]
            start = time.process_time()
            publish(snapshot, spec, previous, release_rng(spec, j))
            best[j] = min(best[j], time.process_time() - start)
    rows.append(("constant 20k, m = 4 (least of 3)", f"{s[1]['rows']:,} / {s[-1]['rows']:,}", figure(best[2]),
                 figure(best[RELEASES]), ratio(best[RELEASES], best[2]),
                 ratio(best[RELEASES] / s[-1]["rows"], best[2] / s[1]["rows"])))
    print_table(
        f"Release {RELEASES} against release 2 (CPU s, d = 10)",
        ["stream", "rows 2 / 20", "release 2", f"release {RELEASES}", "ratio", "per-row ratio"], rows,
        f"target: release {RELEASES} within 1.1x of release 2 (at constant size; the §VI-A table grows 3.35x).",
    )


def whole_release(table: pd.DataFrame, releases: int = RELEASES) -> None:
    """The whole release (model, judge, checks, publication: ``orchestration.run_release``, the CLI's and Dagster's
    code path) on 200k rows, m = 4, d = 10 (``resources/census_kdd_m_distinct.yaml``): Census-KDD workers
    resampled with replacement to 200k + the pool, constant size (-20k/+20k a release, 50k occupation updates,
    every age and marital status and education updated as in §VI-A). Release 2's CPU against the floor (DuckDB
    reading snapshot 2 from Parquet and sorting it, ``common.read_sort_floor``, as ``bench_release``), target
    <= 15x; release ``releases`` against release 2, target <= 1.1x, each the least CPU of 3 runs (the first and
    two re-runs on copies of the store taken before it, alternately); the CPU of release 2's steps beside (model,
    judge, checks, publication: ``bench_release.Steps``, measured in its first run)."""
    spec_path = ROOT / "resources" / "census_kdd_m_distinct.yaml"
    rng = np.random.default_rng(14)
    big = datasets.resample(table, WHOLE + (releases - 1) * WHOLE_R, rng)
    frames = paper_stream(big, 10, releases, rng, WHOLE_R, WHOLE_R, base=WHOLE, updates=WHOLE_UPDATES)
    compared = (2, releases)
    kept: dict[int, pd.DataFrame] = {}
    best, wall, cpus = dict.fromkeys(compared, np.inf), dict.fromkeys(compared, np.inf), []
    steps = Steps()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = folder / "releases.duckdb"
        for j, frame in enumerate(frames, 1):
            if j in best:
                kept[j] = frame
                shutil.copy(db, folder / f"before_{j}.duckdb")
            w, c = released(spec_path, db, frame, steps if j == 2 else None)
            cpus.append(c)
            if j in best:
                best[j], wall[j] = min(best[j], c), min(wall[j], w)
        for _ in range(2):
            for j in compared:
                shutil.copy(folder / f"before_{j}.duckdb", folder / "scratch.duckdb")
                w, c = released(spec_path, folder / "scratch.duckdb", kept[j])
                best[j], wall[j] = min(best[j], c), min(wall[j], w)
        spec = load_spec(spec_path)
        floor_wall, floor_cpu = read_sort_floor(kept[2][spec.columns], [*spec.quasi_identifiers, spec.sensitive],
                                                folder)  # the columns a release reads: the stream carries more
    last = releases
    rows = [
        ("release 2 / floor", figure(best[2]), figure(wall[2]), f"{figure(floor_cpu)} CPU, {figure(floor_wall)} wall",
         f"{ratio(best[2], floor_cpu)}; {ratio(wall[2], floor_wall)} wall", "<= 15x",
         verdict(best[2] / floor_cpu, 15)),
        (f"release {last} / release 2", figure(best[last]), figure(wall[last]), f"{figure(best[2])} CPU (release 2)",
         ratio(best[last], best[2]), "<= 1.1x", verdict(best[last] / best[2], 1.1)),
    ]
    print_table(
        f"Whole release on {WHOLE:,} rows (m = 4, d = 10, -{WHOLE_R:,}/+{WHOLE_R:,}, {WHOLE_UPDATES:,} updates; "
        "resampled): CPU s, least of 3",
        ["figure", "CPU s", "wall s", "against", "ratio", "target", "verdict"], rows,
        f"CPU s of release 2's steps: model + judge (+ checks, publication) = {steps.core()}; the rest is Dagster and "
        f"the store's reads. CPU s of each release's first run: {', '.join(figure(c, 2) for c in cpus)}.",
    )


def model_at_200k(table: pd.DataFrame, releases: int = RELEASES) -> None:
    """The model alone (``publish``) on ``whole_release``'s stream (200k rows resampled, m = 4, d = 10, -20k/+20k,
    50k updates): release ``releases`` against release 2, the least CPU of 3 runs each, alternately, beside what
    grows (the counterfeits published, the rows of T*(n-1) read, counterfeits included)."""
    spec = load_spec(ROOT / "resources" / "census_kdd_m_distinct.yaml")
    publish = models.descriptor("m_distinct").publish
    rng = np.random.default_rng(14)
    big = datasets.resample(table, WHOLE + (releases - 1) * WHOLE_R, rng)
    previous, kept = None, {}
    for j, raw in enumerate(paper_stream(big, 10, releases, rng, WHOLE_R, WHOLE_R, base=WHOLE,
                                         updates=WHOLE_UPDATES), 1):
        bound = spec.bind(raw)
        snapshot = validate_snapshot(raw, bound)
        if j in (2, releases):
            kept[j] = (snapshot, bound, previous)
        release = publish(snapshot, bound, previous, release_rng(bound, j))
        previous = PreviousRelease(j, snapshot, release.table, release.counterfeits, release.hosting, release.state)
    best, made = dict.fromkeys(kept, np.inf), {}
    for _ in range(3):
        for j, (snapshot, bound, before) in kept.items():
            start = time.process_time()
            made[j] = publish(snapshot, bound, before, release_rng(bound, j))
            best[j] = min(best[j], time.process_time() - start)
    rows = [(j, figure(best[j]), f"{made[j].counterfeit_count:,}", f"{len(kept[j][2].table):,}" if kept[j][2] else "-")
            for j in kept]
    rows.append((f"{releases} / 2", ratio(best[releases], best[2]), "", ""))
    print_table(
        f"The model alone on {WHOLE:,} rows (m = 4, d = 10, -{WHOLE_R:,}/+{WHOLE_R:,}, {WHOLE_UPDATES:,} updates; "
        "resampled): CPU s of publish, least of 3",
        ["release", "CPU s", "counterfeits published", "rows of T*(n-1) read"], rows,
        "the model reads release n-1 only; what grows with the release number is the counterfeits it splits and "
        "publishes and the rows of T*(n-1) (counterfeits included) it reads for the previous signatures.",
    )


def main() -> None:
    workers = loaded("m-Distinct benchmarks", lambda: datasets.load_census_kdd(workers_only=True))
    if workers is None:
        return
    table = workers[["id", *QIS, SENSITIVE]].copy()
    table[SENSITIVE] = table[SENSITIVE].astype(str)
    baseline(table)
    series = over_time(table)
    flatness(series, table)
    over_theta(table)
    counterfeits_and_time(table)
    model_at_200k(table)
    whole_release(table)


if __name__ == "__main__":
    main()
