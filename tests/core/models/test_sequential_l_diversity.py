"""Sequential ℓ-diversity (Shmueli-Tassa): Example 4.2 (Tables 9-14), Lemma 8.1, the permutations of Alg. 1 Step 6,
Theorems 4.2-4.4 as properties, insertions (§5.2), refusals (§5.3) and new columns (§4.3, eq. (8)).

Every privacy claim is judged by the judge's verifier (``core.judge.verifiers.shmueli_tassa``) on worlds it rebuilds
itself from the compact frame (``worlds_from_permutations``), or by a brute force over Def. 3.1 written here; never
by the model's own code.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import cast

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dagster_privrelease.core import models
from dagster_privrelease.core.judge.history import History
from dagster_privrelease.core.judge.verifiers import shmueli_tassa as verifier
from dagster_privrelease.core.judge.verifiers.shmueli_tassa import (
    sequential_l_diversity,
    world_diversity,
    worlds_from_permutations,
)
from dagster_privrelease.core.models import sequential_l_diversity as sld
from dagster_privrelease.core.models.sequential_l_diversity import possible_worlds as pw
from dagster_privrelease.core.models.sequential_l_diversity import sequential_release as sr
from dagster_privrelease.core.models.sequential_l_diversity.information_loss import InformationLoss
from dagster_privrelease.core.release import PreviousRelease
from dagster_privrelease.core.spec import BoundSpec, Model, Spec, parse_spec, validate_snapshot
from dagster_privrelease.errors import NotPublishable, SpecError
from dagster_privrelease.pipeline import model_spec
from tests.budget import examples
from tests.fixtures import shmueli_tassa as fx

MODEL = models.descriptor("sequential_l_diversity")


# ------------------------------------------------------------------------------------------------------------ helpers


def _with_model(spec: Spec, **params) -> Spec:
    return dataclasses.replace(spec, model=Model("sequential_l_diversity", MODEL.parse_params(params)))


def _bound(spec: Spec) -> BoundSpec:
    """``spec`` as the bound spec it is (``Spec.bind`` was called on it)."""
    assert isinstance(spec, BoundSpec)
    return spec


def _table_9_spec(**params) -> BoundSpec:
    return _bound(_with_model(fx.table_9_spec(), **{"l": 2, **params}))


def _paper_world() -> pd.DataFrame:
    """Table 9(b) in the model's compact form (world 1 of ℓ - 1 = 1)."""
    return fx.table_9b_permutation().assign(world=np.int64(1))


def _publish(snapshot, spec, attributes, worlds, seed=0, previous=None) -> pd.DataFrame:
    return MODEL.publish(snapshot, model_spec(spec, attributes), previous, np.random.default_rng(seed),
                         possible_worlds=worlds).table


def _stamp(table: pd.DataFrame, release_id: int) -> pd.DataFrame:
    return table.assign(release_id=np.int64(release_id))


def _generalised_entries(table: pd.DataFrame, spec: Spec) -> int:
    """Entries of the released quasi-identifiers that are not a single value."""
    return int(sum((table[f"{a}__lo"] != table[f"{a}__hi"]).sum() for a in spec.quasi_identifiers
                   if f"{a}__lo" in table.columns))


def _judge(releases: pd.DataFrame, truth: pd.DataFrame, worlds: pd.DataFrame, spec: BoundSpec, l: int,  # noqa: E741
           snapshots: pd.DataFrame | None = None):
    """The judge's Thm. 4.3 / Def. 3.2 reports on worlds it rebuilds from the compact frame."""
    rebuilt = {"true": truth, **worlds_from_permutations(truth, worlds, spec)}
    return sequential_l_diversity(releases, rebuilt, spec, l, snapshots=snapshots)


def _multiset(table: pd.DataFrame, attribute: str) -> list[tuple[str, str]]:
    return sorted(zip(table[attribute].astype(str), table["A3"].astype(str), strict=True))


# --------------------------------------------------------------------------------------------- the registered model


def test_registered_with_its_parameters():
    assert MODEL.vertical and MODEL.reads == "previous" and MODEL.diversity_param == "l"
    assert [s.name for s in MODEL.stages] == ["possible_worlds"]
    assert MODEL.parse_params({"l": 3}) == {"l": 3, "p": 100, "loss": "LM", "partition": "joint"}
    assert MODEL.bound({"l": 4}).values == 4
    for bad in ({"l": 1}, {"l": 2, "loss": "NCP"}, {"l": 2, "p": 0}, {"l": 2, "partition": "greedy"}, {}):
        with pytest.raises(SpecError):
            MODEL.parse_params(bad)


# ------------------------------------------------------------------------------------------------ Example 4.2


def test_example_4_2_reproduces_tables_10_and_11():
    """With the paper's fake world T1 (Table 9(b)), V1 and V2 are Tables 10(b) and 11(b), whatever order ψ takes the
    two worlds in (the optimal matchings are unique here), with 4 generalised entries in all (§4.5)."""
    spec, truth = _table_9_spec(), fx.table_9a()
    for seed in range(6):  # both orders of ψ occur
        v1 = _publish(truth, spec, ["A1"], _paper_world(), seed)
        v2 = _publish(truth, spec, ["A2"], _paper_world(), seed)
        assert _multiset(v1, "A1") == [("r", "2"), ("rt", "1"), ("rt", "3"), ("s", "2"), ("s", "3")]
        assert _multiset(v2, "A2") == [("x", "2"), ("xz", "1"), ("xz", "3"), ("y", "2"), ("y", "3")]
        assert "A2" not in v1.columns and "A1" not in v2.columns and v1["group_id"].isna().all()
        assert _generalised_entries(v1, spec) + _generalised_entries(v2, spec) == 4  # the paper's 4
    expected = fx.table_12().query("release_id > 0")
    for attribute, rid in (("A1", 1), ("A2", 2)):
        assert _multiset(expected.query(f"release_id == {rid}"), attribute) == _multiset(
            _publish(truth, spec, [attribute], _paper_world()), attribute)


def test_example_4_2_releases_admit_both_worlds():
    spec, truth = _table_9_spec(), fx.table_9a()
    releases = pd.concat([_stamp(_publish(truth, spec, ["A1"], _paper_world()), 1),
                          _stamp(_publish(truth, spec, ["A2"], _paper_world()), 2)], ignore_index=True)
    admitted, diverse = _judge(releases, truth, _paper_world(), spec, 2)
    assert admitted.ok and admitted.summary["checks"] == 4, admitted.violations
    assert diverse.ok


def test_example_4_2_non_sequential_has_7_generalised_entries():
    """§4.5 / Table 14: one anonymisation of the whole table, projected, generalises 7 entries against the
    sequential 4. The count is the paper's exactly; which entries are generalised is not: for the values 2 and 3
    two matchings tie (e.g. b(r,y) with a(r,x) and d(s,x) with c(s,y), or the crossed pairs, both cost 2 in LM),
    as the paper's own Table 13 picks one of several optimal non-homogeneous anonymisations."""
    spec, truth = _table_9_spec(), fx.table_9a()
    for seed in range(4):
        p1, p2 = sld.non_sequential(truth, spec, _paper_world(), [("A1",), ("A2",)], np.random.default_rng(seed))
        assert _generalised_entries(p1, spec) + _generalised_entries(p2, spec) == 7
        assert "A2__lo" not in p1.columns and "A1__lo" not in p2.columns
        releases = pd.concat([_stamp(p1, 1), _stamp(p2, 2)], ignore_index=True)
        assert all(r.ok for r in _judge(releases, truth, _paper_world(), spec, 2))


def _linkable_values(truth: pd.DataFrame, releases: list[pd.DataFrame], qis: list[str]) -> dict[str, set[str]]:
    """Brute force over Def. 3.1: every table W with T's identifiers and quasi-identifiers (so V0 = ID || T|[Q]
    admits it) and any sensitive values, kept when each release has a bijection f with v_f(n) generalising w_n;
    returns, per individual, the values the surviving worlds link it to. Independent of the model and the judge."""
    ranks = {"A1": {"r": 0, "t": 1, "s": 2}, "A2": {"x": 0, "z": 1, "y": 2}}  # the fixture's leaf orders
    values = sorted(set(truth["A3"]))
    points = [{q: ranks[q][truth.loc[i, q]] for q in qis} for i in range(len(truth))]
    rows = [[(r.iloc[k], [q for q in qis if f"{q}__lo" in r.columns and r[f"{q}__lo"].notna().all()])
             for k in range(len(r))] for r in releases]
    linked: dict[str, set[str]] = {str(i): set() for i in truth["ID"]}

    def covers(world, row, attrs, n):
        return row["A3"] == world[n] and all(row[f"{q}__lo"] <= points[n][q] <= row[f"{q}__hi"] for q in attrs)

    for world in itertools.product(values, repeat=len(truth)):
        if all(any(all(covers(world, *release[f[n]], n) for n in range(len(truth)))
                   for f in itertools.permutations(range(len(truth)))) for release in rows):
            for n, s in enumerate(world):
                linked[truth.loc[n, "ID"]].add(s)
    return linked


def test_example_4_2_every_individual_linkable_to_two_values():
    spec, truth = _table_9_spec(), fx.table_9a()
    releases = [_publish(truth, spec, ["A1"], _paper_world()), _publish(truth, spec, ["A2"], _paper_world())]
    linked = _linkable_values(truth, releases, ["A1", "A2"])
    assert all(len(v) >= 2 for v in linked.values()), linked
    # Example 1.1's point: publishing T|{A1,A3} and T|{A2,A3} ungeneralised leaves a linked to 1 alone
    raw = [fx.table_12().query(f"release_id == {r}").reset_index(drop=True) for r in (1, 2)]
    for table, attribute in zip(raw, ("A1", "A2"), strict=True):
        table[f"{attribute}__lo"] = table[f"{attribute}__hi"] = [
            {"r": 0, "t": 1, "s": 2, "x": 0, "z": 1, "y": 2}[v] for v in truth[attribute]]
    assert _linkable_values(truth, raw, ["A1", "A2"])["a"] == {"1"}


def test_example_4_2_with_algorithm_1_worlds():
    """Algorithm 1 itself on Table 9(a): Mondrian splits it into the 2-diverse buckets {a, b, e} and {c, d} (the
    paper keeps one bucket "for the sake of simplicity"). Both buckets leave no choice (three distinct values in
    a cycle, range limitation to h + 1; a swap), so the fake world is deterministic: a <- b, b <- e, e <- a, c <-> d.
    The worlds are 2-diverse, the releases admit them, every individual stays linkable to two values, and the
    generalised entries are again the paper's 4 (sequential) and 7 (non-sequential)."""
    spec, truth = _table_9_spec(), fx.table_9a()
    worlds = pd.DataFrame()
    for seed in range(5):
        worlds = MODEL.stages[0].run(truth, spec, None, np.random.default_rng(seed))["possible_worlds"]
        assert sorted(worlds.columns) == sorted(["world", "ID", "source_ID"]) and set(worlds["world"]) == {1}
        assert sorted(zip(worlds["ID"], worlds["source_ID"], strict=True)) == [
            ("a", "b"), ("b", "e"), ("c", "d"), ("d", "c"), ("e", "a")]
    v1, v2 = _publish(truth, spec, ["A1"], worlds), _publish(truth, spec, ["A2"], worlds)
    assert _generalised_entries(v1, spec) + _generalised_entries(v2, spec) == 4
    projected = sld.non_sequential(truth, spec, worlds, [("A1",), ("A2",)], np.random.default_rng(0))
    assert sum(_generalised_entries(t, spec) for t in projected) == 7
    releases = pd.concat([_stamp(v1, 1), _stamp(v2, 2)], ignore_index=True)
    assert all(r.ok for r in _judge(releases, truth, worlds, spec, 2))
    assert all(len(v) >= 2 for v in _linkable_values(truth, [v1, v2], ["A1", "A2"]).values())


# ------------------------------------------------------------------------------------- Algorithm 1, step by step


def test_information_loss_lm_and_em_of_table_9():
    """§2.2 by hand on Table 9(a)'s A1 (r, r, s, s, t; leaves r, t, s): LM eq. (1) of the node rt is (2-1)/(3-1),
    of the root 1; EM of rt is H(2/3, 1/3), of the root H(2/5, 1/5, 2/5); a numeric interval's LM is its length
    over T's range."""
    spec, truth = _table_9_spec(), fx.table_9a()
    rt, root = (np.array([[0]]), np.array([[1]])), (np.array([[0]]), np.array([[2]]))
    lm = InformationLoss(truth, spec, ("A1",), "LM")
    em = InformationLoss(truth, spec, ("A1",), "EM")
    assert lm.loss(*rt)[0] == pytest.approx(0.5) and lm.loss(*root)[0] == pytest.approx(1.0)
    h = lambda *q: -sum(x * np.log2(x) for x in q)  # noqa: E731
    assert em.loss(*rt)[0] == pytest.approx(h(2 / 3, 1 / 3)) and em.loss(*root)[0] == pytest.approx(h(0.4, 0.2, 0.4))
    assert lm.snap(np.array([[0]]), np.array([[2]]))[0][0, 0] == 0  # r..s is the root's range 0..2
    numeric = InformationLoss(pd.DataFrame({"age": [20.0, 30.0, 60.0]}), cast(BoundSpec, _random_spec(2)), ("age",),
                              "LM")  # a numeric attribute needs no binding
    assert numeric.loss(np.array([[0]]), np.array([[1]]))[0] == pytest.approx(10 / 40)


def test_step_2_buckets_are_diverse_and_bounded():
    """Mondrian leaves of equal points are dealt into buckets of ℓ..2ℓ-1 pairwise different values."""
    spec = _random_spec(3)
    rng = np.random.default_rng(2)
    table = _random_table(rng, np.arange(600), 6).assign(age=30, zone="n1", sex=rng.choice(["F", "M"], 600))
    snapshot = validate_snapshot(table, spec)
    spec = spec.bind(snapshot)
    bucket = pw.buckets(snapshot, np.arange(600), spec, 3)
    sizes = np.bincount(bucket)
    assert sizes.min() >= 3 and sizes.max() <= max(pw.LARGEST_BUCKET, 12)
    counts = pd.crosstab(bucket, snapshot["disease"]).to_numpy()
    assert (counts.max(axis=1) * 3 <= sizes).all()  # Def. 2.3


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.lists(st.integers(1, 6), min_size=1, max_size=7), min_size=1, max_size=4), st.integers(2, 6))
def test_lemma_8_1_cyclic_order(counts_per_bucket, l):  # noqa: E741
    """Every ℓ cyclically consecutive values of every bucket differ, and the cycle holds the bucket's values."""
    buckets, values = [], []
    for b, drawn in enumerate(counts_per_bucket):
        counts = list(drawn)
        while max(counts) * l > sum(counts):  # make the bucket ℓ-diverse (Def. 2.3) by adding new values
            counts.append(1)
        for v, c in enumerate(counts):
            buckets += [b] * c
            values += [v] * c
    perm = np.random.default_rng(len(values)).permutation(len(values))
    bucket, value = np.asarray(buckets)[perm], np.asarray(values)[perm]
    start, cycle = pw.cyclic_order(bucket, value, l)
    for b in range(len(start)):
        n = int(np.sum(bucket == b))
        ring = cycle[start[b] : start[b] + n]
        assert sorted(ring) == sorted(value[bucket == b])
        for h in range(n):
            window = [ring[(h + j) % n] for j in range(l)]
            assert len(set(window)) == l, (ring, h)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=6), st.integers(2, 7), st.integers(0, 2**32 - 1))
def test_step_6_permutations_are_range_limited_and_diverse(extra, l, seed):  # noqa: E741
    sizes = np.array([l + e for e in extra])
    start = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    sigma = pw.range_limited_permutations(start, int(sizes.sum()), l, np.random.default_rng(seed))
    for b, n in enumerate(sizes):
        local = sigma[:, start[b] : start[b] + n] - start[b]
        assert ((local >= 0) & (local < n)).all()
        for i in range(l - 1):
            assert sorted(local[i]) == list(range(n))  # a permutation of the bucket
        offsets = (local - np.arange(n)) % n
        assert ((offsets >= 1) & (offsets <= l - 1)).all()  # range limitation
        assert all(len(set(offsets[:, h])) == l - 1 for h in range(n))  # diversity (with the identity)


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 4), st.integers(0, 12))
def test_step_5_greedy_order_is_eq_7(seed, l, extra):  # noqa: E741
    """The vectorised greedy (cells of equal points, all buckets at once) against eq. (7) tuple by tuple: position
    h takes the unplaced tuple of value cycle[h] of least Σ_j IL(closure{t, t_{h-1}, ..., t_{h-j}}), ties to the
    least random priority (the same ``rng.permutation`` the model draws first)."""
    rng = np.random.default_rng(seed)
    spec = _random_spec(l)
    snapshot = validate_snapshot(_random_table(rng, np.arange(3 * l + extra), 6), spec)
    spec = spec.bind(snapshot)
    snapshot["zone"] = rng.choice(["n1", "s3"], len(snapshot))  # few points: cells of several tuples
    il = InformationLoss(snapshot, spec, tuple(spec.quasi_identifiers), "LM")
    bucket = rng.permutation(np.arange(len(snapshot)) % 2)
    values = np.arange(len(snapshot)) % (2 * l)  # every value at most twice: each bucket is ℓ-diverse when big
    assume(all(np.bincount(values[bucket == b]).max() * l <= (bucket == b).sum() for b in (0, 1)))
    start, cycle = pw.cyclic_order(bucket, values, l)
    order = pw.greedy_order(bucket, values, start, cycle, il.ranks, il, l, np.random.default_rng(seed))
    priority = np.random.default_rng(seed).permutation(len(snapshot))

    def cost(t: int, placed: list[int]) -> float:
        """Eq. (7) for candidate t after the tuples ``placed``."""
        total = 0.0
        for j in range(1, min(len(placed), l - 1) + 1):
            box = [t, *placed[-j:]]
            total += float(il.loss(il.ranks[box].min(axis=0), il.ranks[box].max(axis=0)))
        return total

    for b in (0, 1):
        members = [int(t) for t in np.flatnonzero(bucket == b)]
        placed: list[int] = []
        for h in range(len(members)):
            pool = [t for t in members if t not in placed and values[t] == cycle[start[b] + h]]
            placed.append(min(pool, key=lambda t, done=tuple(placed): (cost(t, list(done)), priority[t])))
        assert list(order[start[b] : start[b] + len(members)]) == placed


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 9), st.integers(1, 3),
       st.sampled_from([sr.sub_components, sr.joint_sub_components]))
def test_section_4_4_sub_components(seed, p, components, split):
    """Every component of eq. (9) is split into sub-components of at most p rows and as many world tuples, and
    none crosses a component (both partitions)."""
    rng = np.random.default_rng(seed)
    spec = _random_spec(2)
    snapshot = validate_snapshot(_random_table(rng, np.arange(40), 4), spec)
    spec = spec.bind(snapshot)
    il = InformationLoss(snapshot, spec, tuple(spec.quasi_identifiers), "EM")
    comp_v = rng.permutation(np.arange(40) % components)
    comp_w = rng.permutation(comp_v)
    sub_v, sub_w = split(il, il.ranks, il.ranks, comp_v, il.ranks, comp_w, p)
    assert np.bincount(sub_v).max() <= p
    np.testing.assert_array_equal(np.bincount(sub_v), np.bincount(sub_w, minlength=int(sub_v.max()) + 1))
    for sub in np.unique(sub_v):
        assert len(set(comp_v[sub_v == sub]) | set(comp_w[sub_w == sub])) == 1


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 12))
def test_joint_halving_keeps_the_lower_half_of_rows_with_the_lower_half_of_tuples(seed, p):
    """``joint_sub_components`` against its rule by hand on one numeric attribute: sorted rows and sorted tuples of a
    component cut at the same ranks, so sub-component i holds the i-th slice of both (the widest attribute is the
    only one)."""
    rng = np.random.default_rng(seed)
    spec = _random_spec(2)
    snapshot = validate_snapshot(_random_table(rng, np.arange(40), 4), spec)
    spec = spec.bind(snapshot)
    il = InformationLoss(snapshot, spec, ("age",), "LM")
    rows, tuples = il.ranks[rng.permutation(40)], il.ranks
    comp = np.zeros(40, dtype=np.int64)
    sub_v, sub_w = sr.joint_sub_components(il, rows, rows, comp, tuples, comp, p)
    order_v = np.lexsort((np.arange(40), rows[:, 0]))
    order_w = np.lexsort((np.arange(40), tuples[:, 0]))
    slices_v = [sub_v[order_v][i] for i in range(40)]
    slices_w = [sub_w[order_w][i] for i in range(40)]
    assert slices_v == slices_w  # the k-th smallest row and the k-th smallest tuple share a sub-component
    assert np.bincount(sub_v).max() <= p


def _naive_partition(il, lo, hi, node, rows, points, tuples) -> dict[int, int]:
    """§4.4's partition of W^(k) from its statement, tuple by tuple: groups of V_R^(k) by decreasing size (ties by
    id), each taking the n_j tuples left with the least IL(closure{u_j, w}) + tie term (distance to the mean box
    centre of the group, weighted by ``_TIE``), ties by the tuple's ranks (lexicographic) then its position."""
    centre = il.centres(lo, hi)
    groups, counts = np.unique(node[rows], return_counts=True)
    left, out, position = list(tuples), {}, {int(t): k for k, t in enumerate(tuples)}
    for j in np.argsort(-counts, kind="stable"):
        members = rows[node[rows] == groups[j]]
        u_lo, u_hi = il.snap(lo[members].min(axis=0), hi[members].max(axis=0))
        middle = centre[members].sum(axis=0) / len(members)

        def dist(t, u_lo=u_lo, u_hi=u_hi, middle=middle):
            total = 0.0
            for m in range(points.shape[1]):
                r = points[t, m]
                total += float(il.attribute_loss(m, np.minimum(u_lo[m], r), np.maximum(u_hi[m], r))) + sr._TIE * abs(
                    float(il.position(m, np.array([r]))[0]) - middle[m])
            return total

        taken = sorted(left, key=lambda t: (dist(t), tuple(points[t]), position[int(t)]))[: counts[j]]
        for t in taken:
            out[t] = int(groups[j])
        left = [t for t in left if t not in set(taken)]
    return out


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 8), st.sampled_from(["LM", "EM"]))
def test_section_4_4_partition_of_the_world_is_the_greedy_rule(seed, groups, loss):
    """``_partition_world`` (distances per distinct point) against the rule tuple by tuple."""
    rng = np.random.default_rng(seed)
    spec = _random_spec(2)
    snapshot = validate_snapshot(_random_table(rng, np.arange(30), 4), spec)
    spec = spec.bind(snapshot)
    il = InformationLoss(snapshot, spec, tuple(spec.quasi_identifiers), loss)
    other = il.ranks[rng.permutation(30)]
    lo, hi = il.snap(np.minimum(il.ranks, other), np.maximum(il.ranks, other))
    rows, tuples = np.arange(30), rng.permutation(30)
    node = rng.integers(0, groups, 30)
    points = il.ranks[rng.integers(0, 30, 30)]  # repeated points: ties between tuples of one point
    sub_w = np.full(30, -1)
    sr._partition_world(il, lo, hi, il.centres(lo, hi), node, rows, points, tuples, sub_w)
    expected = _naive_partition(il, lo, hi, node, rows, points, tuples)
    assert {int(t): int(sub_w[t]) for t in tuples} == expected


# ------------------------------------------------------------------------------- random tables: Theorems 4.2-4.4


def _random_spec(l: int, **params) -> Spec:  # noqa: E741
    raw = {
        "name": "random", "id": "pid", "sensitive": {"name": "disease", "values": list("abcdef")},
        "quasi_identifiers": {
            "age": {"type": "numeric", "min_width": 2},
            "zone": {"type": "categorical",
                     "hierarchy": {"Any": {"N": ["n1", "n2", "n3"], "S": {"S1": ["s1", "s2"], "S2": ["s3"]}}}},
            "sex": {"type": "categorical"},
        },
        "non_identifiers": ["blood"],
        "model": {"name": "sequential_l_diversity", "l": l, **params},
    }
    return parse_spec(raw)


def _random_table(rng: np.random.Generator, ids, values: int) -> pd.DataFrame:
    """Random rows whose sensitive values cycle through the first ``values`` of a..f, shuffled: ℓ-diverse (Def.
    2.3) when the most frequent value is in at most 1/ℓ of them."""
    n = len(ids)
    return pd.DataFrame({
        "pid": np.asarray(ids),
        "age": rng.integers(20, 60, n),
        "zone": rng.choice(["n1", "n2", "n3", "s1", "s2", "s3"], n),
        "sex": rng.choice(["F", "M"], n),
        "blood": rng.choice(["A", "O"], n),
        "disease": rng.permutation(np.array(list("abcdef"))[np.arange(n) % values]),
    })


def _diverse(table: pd.DataFrame, l: int) -> bool:  # noqa: E741
    return table["disease"].value_counts().max() * l <= len(table)


tables = st.tuples(st.integers(2, 3), st.integers(0, 2**32 - 1), st.integers(0, 20))


def _random_worlds(params, **spec_options):
    """A random ℓ-diverse table (``params``: ℓ, seed, extra rows) under ``_random_spec(l, **spec_options)`` and
    Algorithm 1's worlds of it: ``(l, seed, snapshot, spec, worlds)``."""
    l, seed, extra = params  # noqa: E741
    rng = np.random.default_rng(seed)
    spec = _random_spec(l, **spec_options)
    snapshot = validate_snapshot(_random_table(rng, np.arange(3 * l + extra), int(rng.integers(l, 7))), spec)
    assume(_diverse(snapshot, l))
    spec = spec.bind(snapshot)
    return l, seed, snapshot, spec, MODEL.stages[0].run(snapshot, spec, None, rng)["possible_worlds"]


def _first_step(params, attributes, loss):
    """``_random_worlds`` with the information loss of ``attributes`` under ``loss``, the suffix keys and world
    sources, and the first step's boxes (every other row already widened to rank 0):
    ``(l, seed, snapshot, spec, worlds, il, keys, sources, lo, hi)``."""
    l, seed, snapshot, spec, worlds = _random_worlds(params, loss=loss)  # noqa: E741
    il = InformationLoss(snapshot, spec, tuple(attributes), loss)
    keys, sources = sr.suffix_keys(snapshot, spec), sr.world_sources(snapshot, spec, worlds, l)
    lo, hi = il.ranks.copy(), il.ranks.copy()
    lo[::2] = 0  # some rows already generalised: boxes, not points
    return l, seed, snapshot, spec, worlds, il, keys, sources, lo, hi


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables, st.sampled_from([("age",), ("zone",), ("sex", "zone"), ("age", "zone", "sex")]),
       st.sampled_from(["LM", "EM"]), st.sampled_from([2, 100]))
def test_theorem_4_3_every_release_admits_every_world(params, attributes, loss, p):
    l, seed, extra = params  # noqa: E741
    rng = np.random.default_rng(seed)
    spec = _random_spec(l, loss=loss, p=p)
    snapshot = validate_snapshot(_random_table(rng, np.arange(3 * l + extra), int(rng.integers(l, 7))), spec)
    spec = spec.bind(snapshot)
    if not _diverse(snapshot, l):
        with pytest.raises(NotPublishable, match=r"not \d-diverse"):
            MODEL.stages[0].run(snapshot, spec, None, rng)
        return
    worlds = MODEL.stages[0].run(snapshot, spec, None, rng)["possible_worlds"]
    assert len(worlds) == (l - 1) * len(snapshot)
    table = _publish(snapshot, spec, list(attributes), worlds, seed)
    admitted, diverse = _judge(_stamp(table, 1), snapshot, worlds, spec, l)
    assert admitted.ok, admitted.violations
    assert diverse.ok, diverse.violations  # Theorem 4.2
    assert set(table.columns) >= {f"{a}__lo" for a in attributes}
    assert not set(table.columns) & {f"{a}__lo" for a in spec.quasi_identifiers if a not in attributes}


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables, st.integers(0, 10))
def test_insertions_extend_the_worlds_and_every_release_admits_them(params, batch_extra):
    """§5.2: an ℓ-diverse batch gets its own worlds, unioned with the old ones; the first release admits the
    union restricted to its individuals, the second admits all of it (judge with the per-release snapshots)."""
    l, seed, extra = params  # noqa: E741
    rng = np.random.default_rng(seed)
    spec = _random_spec(l)
    first = validate_snapshot(_random_table(rng, np.arange(3 * l + extra), int(rng.integers(l, 7))), spec)
    batch = _random_table(rng, np.arange(1000, 1000 + 2 * l + batch_extra), int(rng.integers(l, 7)))
    assume(_diverse(first, l) and _diverse(batch, l))
    second = validate_snapshot(pd.concat([first, batch], ignore_index=True), spec)
    spec = spec.bind(second)
    w1 = MODEL.stages[0].run(first, spec, None, rng)["possible_worlds"]
    v1 = _publish(first, spec, ["age", "zone"], w1, seed)
    previous = PreviousRelease(1, first, v1, pd.DataFrame(), pd.DataFrame(), {"possible_worlds": _stamp(w1, 1)})
    w2 = MODEL.stages[0].run(second, spec, previous, rng)["possible_worlds"]
    old = w1.merge(w2, how="left", indicator=True)
    assert (old["_merge"] == "both").all() and len(w2) == (l - 1) * len(second)
    v2 = _publish(second, spec, ["zone", "sex"], w2, seed)
    snapshots = pd.concat([_stamp(first, 1), _stamp(second, 2)], ignore_index=True)
    releases = pd.concat([_stamp(v1, 1), _stamp(v2, 2)], ignore_index=True)
    admitted, diverse = _judge(releases, second, w2, spec, l, snapshots=snapshots)
    assert admitted.ok and admitted.summary["checks"] == 2 * l, admitted.violations
    assert diverse.ok


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables, st.sampled_from([("age",), ("zone", "sex")]))
def test_theorem_4_4_a_release_does_not_depend_on_its_position(params, attributes):
    """For a fixed generator and attribute set, release R's table is the same as if it were the first release,
    whatever was published before it."""
    l, seed, extra = params  # noqa: E741
    rng = np.random.default_rng(seed)
    spec = _random_spec(l)
    snapshot = validate_snapshot(_random_table(rng, np.arange(3 * l + extra), int(rng.integers(l, 7))), spec)
    spec = spec.bind(snapshot)
    assume(_diverse(snapshot, l))
    worlds = MODEL.stages[0].run(snapshot, spec, None, rng)["possible_worlds"]
    alone = _publish(snapshot, spec, list(attributes), worlds, seed=7)
    earlier = _publish(snapshot, spec, ["age", "zone", "sex"], worlds, seed=1)
    previous = PreviousRelease(3, snapshot, earlier, pd.DataFrame(), pd.DataFrame(),
                               {"possible_worlds": _stamp(worlds, 3)})
    later_worlds = MODEL.stages[0].run(snapshot, spec, previous, rng)["possible_worlds"]
    pd.testing.assert_frame_equal(later_worlds, worlds)  # no insertion: the worlds are kept as they are
    later = _publish(snapshot, spec, list(attributes), later_worlds, seed=7, previous=previous)
    pd.testing.assert_frame_equal(later, alone)


# ------------------------------------------------------------------------------------------ refusals, new columns


def _first_release(seed: int):
    """An 8-row first release at l = 2 with its worlds, as the stage keeps them: ``(spec, rng, T(1), previous)``."""
    spec = _random_spec(2)
    rng = np.random.default_rng(seed)
    first = validate_snapshot(_random_table(rng, np.arange(8), 4), spec)
    spec = spec.bind(first)
    w1 = MODEL.stages[0].run(first, spec, None, rng)["possible_worlds"]
    previous = PreviousRelease(1, first, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(),
                               {"possible_worlds": _stamp(w1, 1)})
    return spec, rng, first, previous


def test_a_batch_that_is_not_diverse_is_refused():
    spec, rng, first, previous = _first_release(0)
    batch = _random_table(rng, np.arange(100, 103), 1)  # three tuples of 'a'
    second = validate_snapshot(pd.concat([first, batch], ignore_index=True), spec)
    with pytest.raises(NotPublishable, match=r"batch of 3 inserted tuple\(s\) is not 2-diverse.*'a' in 3.*add at "
                                             r"least 3 tuple"):
        MODEL.stages[0].run(second, spec, previous, rng)


@pytest.mark.parametrize("change, model", [("delete", "m_invariance"), ("update", "m_distinct")])
def test_deletions_and_updates_are_refused(change, model):
    spec, rng, first, previous = _first_release(1)
    second = first.iloc[1:] if change == "delete" else first.assign(zone=np.where(first["pid"] == 3, "s3", "n1"))
    with pytest.raises(NotPublishable, match=rf"{change}d.*§5.3.*{model}"):
        MODEL.stages[0].run(second.reset_index(drop=True), spec, previous, rng)


def test_a_column_revealed_later_fills_the_worlds_by_eq_8():
    """§4.3: the worlds were made before ``blood_pressure`` existed; a later release publishes it and the worlds,
    kept as permutations, give it to every individual (its own value, a quasi-identifier) without recomputation."""
    spec = _random_spec(2)
    rng = np.random.default_rng(3)
    table = _random_table(rng, np.arange(12), 3)
    snapshot = validate_snapshot(table, spec)
    worlds = MODEL.stages[0].run(snapshot, spec.bind(snapshot), None, rng)["possible_worlds"]
    pressure = dataclasses.replace(spec.quasi_identifiers["age"], name="pressure")
    wider = dataclasses.replace(spec, quasi_identifiers={**spec.quasi_identifiers, "pressure": pressure})
    later = validate_snapshot(table.assign(pressure=rng.integers(90, 150, len(table))), wider)
    wider = wider.bind(later)
    v = _publish(later, wider, ["pressure", "zone"], worlds)
    assert all(r.ok for r in _judge(_stamp(v, 1), later, worlds, wider, 2))


# ------------------------------------------------------------------------------------------ the model's verifier


def _history(spec, snapshots, releases, worlds) -> History:
    empty = pd.DataFrame({"release_id": pd.Series(dtype=np.int64), "group_id": pd.Series(dtype=np.int64),
                          "count": pd.Series(dtype=np.int64)})
    return History(spec, releases, empty, snapshots, None, states={"possible_worlds": worlds})


def test_verify_checks_the_last_release_against_the_stored_worlds():
    spec, truth = _table_9_spec(), fx.table_9a()
    v1 = _stamp(_publish(truth, spec, ["A1"], _paper_world()), 1)
    v2 = _stamp(_publish(truth, spec, ["A2"], _paper_world()), 2)
    snapshots = pd.concat([_stamp(truth, 1), _stamp(truth, 2)], ignore_index=True)
    worlds = pd.concat([_stamp(_paper_world(), 1), _stamp(_paper_world(), 2)], ignore_index=True)
    reports = MODEL.verify(_history(spec, snapshots, pd.concat([v1, v2], ignore_index=True), worlds))
    assert [r.name for r in reports] == ["worlds_admitted", "world_diversity", "possible_worlds_extend"]
    assert all(r.ok for r in reports) and reports[0].summary["checks"] == 2  # release 2 only: O(|R|)
    # release 2 published ungeneralised (T|{A2, A3}) does not admit the fake world
    exact = v2.assign(A2__lo=[0.0, 2.0, 2.0, 0.0, 1.0], A2__hi=[0.0, 2.0, 2.0, 0.0, 1.0], A2=list(truth["A2"]),
                      A3=list(truth["A3"]))
    failed = MODEL.verify(_history(spec, snapshots, pd.concat([v1, exact], ignore_index=True), worlds))
    assert not failed[0].ok and set(failed[0].violations["world"]) == {"1"}
    # release 2's worlds must extend release 1's
    other = worlds.assign(source_ID=np.where(worlds["release_id"] == 2, worlds["source_ID"].map(
        {"b": "c", "c": "d", "d": "e", "e": "a", "a": "b"}), worlds["source_ID"]))
    reports = MODEL.verify(_history(spec, snapshots, pd.concat([v1, v2], ignore_index=True), other))
    assert reports[2].name == "possible_worlds_extend" and not reports[2].ok


def test_world_diversity_of_algorithm_1_with_l_3():
    """Theorem 4.2 on a larger table: the ℓ worlds link every individual to ℓ different values."""
    spec = _random_spec(3)
    rng = np.random.default_rng(5)
    snapshot = validate_snapshot(_random_table(rng, np.arange(60), 6), spec)
    spec = spec.bind(snapshot)
    worlds = MODEL.stages[0].run(snapshot, spec, None, rng)["possible_worlds"]
    rebuilt = {"true": snapshot, **worlds_from_permutations(snapshot, worlds, spec)}
    assert world_diversity(rebuilt, spec, 3).ok


@pytest.mark.parametrize("seed", range(4))
def test_judging_worlds_of_coded_text_gives_the_reports_of_plain_text(seed):
    """The verifier reads the worlds gathered from a truth whose text QIs and sensitive column are categoricals
    (``shmueli_tassa._coded``): Def. 3.1's and Def. 3.2's reports equal those of the plain text columns, for worlds
    the release admits and for a world tampered with (one source moved), which it does not (text ids)."""
    spec = _random_spec(3)
    rng = np.random.default_rng(seed)
    snapshot = validate_snapshot(_random_table(rng, [f"p{i:03d}" for i in range(60)], 6), spec)
    spec = spec.bind(snapshot)
    worlds = MODEL.stages[0].run(snapshot, spec, None, rng)["possible_worlds"]
    release = _stamp(_publish(snapshot, spec, ["age", "zone"], worlds, seed), 1)
    tampered = worlds.assign(source_pid=np.where(worlds["world"] == 1, np.roll(worlds["source_pid"], 1),
                                                 worlds["source_pid"]))
    for compact in (worlds, tampered):
        plain, coded = (_judge(release, truth, compact, spec, 3) for truth in (snapshot, verifier._coded(snapshot, spec)))
        assert isinstance(verifier._coded(snapshot, spec)["zone"].dtype, pd.CategoricalDtype)
        for a, b in zip(plain, coded, strict=True):
            assert (a.name, a.ok, a.summary) == (b.name, b.ok, b.summary)
            pd.testing.assert_frame_equal(a.violations, b.violations, check_dtype=False, check_categorical=False)
    assert not _judge(release, snapshot, tampered, spec, 3)[0].ok


# ------------------------------------------------------------------------------------- through the release pipeline


def test_release_next_publishes_an_insert_and_refuses_a_deletion(tmp_path):
    """The pipeline end to end on a temporary store: the possible_worlds stage, the candidate, the judge (this
    model's verifiers and the attacks, blocking) and publication, then an ℓ-diverse insert (§5.2), then a deletion
    refused (§5.3) with nothing published."""
    from dagster_privrelease import pipeline
    from dagster_privrelease.storage import ReleaseStore

    rng = np.random.default_rng(11)
    first = _random_table(rng, np.arange(40), 4)
    batch = _random_table(rng, np.arange(100, 110), 5)
    with ReleaseStore(tmp_path / "seq.duckdb", _random_spec(2)).session() as store:
        one = pipeline.release_next(store, first, attributes=["age", "zone"])
        two = pipeline.release_next(store, pd.concat([first, batch], ignore_index=True), attributes=["age", "zone"])
        for summary in (one, two):
            assert all(summary["checks"].values()), summary["checks"]
        assert two["inserts"] == 10 and two["rows"] == 50
        # the verifier (Def. 3.1 / Thm. 4.3) and the possible-world attack each keep their own check
        assert {"worlds_admitted", "world_diversity", "possible_worlds_extend", "possible_worlds", "join"} <= set(
            two["checks"])
        with pytest.raises(NotPublishable, match="deleted"):
            pipeline.release_next(store, first.iloc[1:], attributes=["age"])
        assert store.release_ids() == [1, 2]


def test_release_next_vertical_releases(tmp_path):
    """Releases with their own attributes through the pipeline: the model's guarantees, the possible-world attack
    and the join attack with every QI known (V0, the adversary of §3) pass, every individual keeping at least ℓ
    values through the join of the two releases (Theorem 4.3: the true and the fake world each give a joined
    record), and the release is published."""
    from dagster_privrelease import pipeline
    from dagster_privrelease.storage import ReleaseStore

    first = _random_table(np.random.default_rng(11), np.arange(40), 4)
    with ReleaseStore(tmp_path / "seq.duckdb", _random_spec(2)).session() as store:
        assert all(pipeline.release_next(store, first, attributes=["age", "zone"])["checks"].values())
        pipeline.stage(store, 2, first)
        for step in MODEL.stages:
            pipeline.prepare(store, 2, step.name)
        pipeline.make_candidate(store, 2, ["sex", "zone"])
        reports = pipeline.judge(store, 2)
        guarantees = [r for r in reports if r.summary["kind"] == "guarantee"]
        attacks = {r.name: r for r in reports if r.summary["kind"] == "attack"}
        assert [r.name for r in guarantees] == ["worlds_admitted", "world_diversity", "possible_worlds_extend"]
        assert all(r.ok for r in guarantees)
        assert attacks["possible_worlds"].ok and attacks["intersection"].ok
        assert attacks["possible_worlds"].summary["min_candidates"] >= 2
        assert attacks["join"].ok and attacks["join"].summary["min_candidates"] >= 2, attacks["join"].violations
        pipeline.publish(store, 2, reports)
        assert store.release_ids() == [1, 2]


def test_the_store_reads_the_worlds_as_private_possible_world(tmp_path):
    """The compact worlds (eq. (5)) read through the model's view ``private.possible_world(world, <id>,
    <sensitive>)`` after two published requests with an insert between them: ℓ rows per individual of the latest
    release, world 0 its true value, world 1 the value the judge's own ``worlds_from_permutations`` rebuilds from
    the stored permutation, and ℓ different values per individual (Def. 3.2, checked by the judge)."""
    from dagster_privrelease import pipeline
    from dagster_privrelease.storage import ReleaseStore

    rng = np.random.default_rng(4)
    first = _random_table(rng, np.arange(30), 4)
    second = pd.concat([first, _random_table(rng, np.arange(100, 110), 5)], ignore_index=True)
    spec = _random_spec(2)
    with ReleaseStore(tmp_path / "seq.duckdb", spec).session() as store:
        pipeline.release_next(store, first, attributes=["age", "zone"])
        pipeline.release_next(store, second, attributes=["zone", "sex"])
        with store.connect() as con:
            view = con.execute("SELECT * FROM private.possible_world ORDER BY world, pid").df()
            compact = con.execute("SELECT world, pid, source_pid FROM private.state_possible_worlds "
                                  "WHERE release_id = 2").df()
            published = con.execute("SELECT table_name FROM information_schema.tables "
                                    "WHERE table_schema = 'published'").df()["table_name"].tolist()
    assert list(view.columns) == ["world", "pid", "disease"] and len(view) == 2 * len(second)
    truth = view[view["world"] == 0].set_index("pid")["disease"]
    assert truth.to_dict() == second.set_index("pid")["disease"].to_dict()
    rebuilt = worlds_from_permutations(second, compact, cast(BoundSpec, spec))["1"].set_index("pid")["disease"]
    assert view[view["world"] == 1].set_index("pid")["disease"].to_dict() == rebuilt.to_dict()
    worlds = {str(w): frame for w, frame in view.groupby("world")}
    assert world_diversity(worlds, cast(BoundSpec, spec), 2).ok
    assert "possible_world" not in published and not any("world" in t for t in published)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables, st.sampled_from(["LM", "EM"]), st.sampled_from([2, 5, 100]))
def test_matchings_costed_by_join_tables_equal_the_direct_costs(params, loss, p):
    """Algorithm 2's edge weights looked up in ``InformationLoss.join_table`` (one gather per entry) give the
    release the direct IL(closure{v, w}) (a minimum, a maximum and a look-up per attribute, the reference) gives:
    the same costs in the same order, hence the same matchings, boxes and carried suffixes, for a fixed seed."""
    import dagster_privrelease.core.models.sequential_l_diversity.information_loss as information_loss

    l, seed, extra = params  # noqa: E741
    rng = np.random.default_rng(seed)
    spec = _random_spec(l, loss=loss, p=p)
    snapshot = validate_snapshot(_random_table(rng, np.arange(3 * l + extra), int(rng.integers(l, 7))), spec)
    assume(_diverse(snapshot, l))
    spec = spec.bind(snapshot)
    worlds = MODEL.stages[0].run(snapshot, spec, None, rng)["possible_worlds"]
    il = InformationLoss(snapshot, spec, tuple(spec.quasi_identifiers), loss)
    assert all(il.join_table(j) is not None for j in range(len(il.attributes)))  # the fast path is taken
    keys, sources = sr.suffix_keys(snapshot, spec), sr.world_sources(snapshot, spec, worlds, l)
    fast = sr.sequential_release(il, keys, sources, p, np.random.default_rng(seed))
    saved = information_loss._JOIN_LEAVES
    information_loss._JOIN_LEAVES = 0  # no join table: the direct costs
    try:
        direct_il = InformationLoss(snapshot, spec, tuple(spec.quasi_identifiers), loss)
        assert all(direct_il.join_table(j) is None for j in range(len(direct_il.attributes)))
        direct = sr.sequential_release(direct_il, keys, sources, p, np.random.default_rng(seed))
    finally:
        information_loss._JOIN_LEAVES = saved
    for a, b in zip(fast, direct, strict=True):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------- Step 5 as a transportation problem (exact matching)


def _plan_inputs(seed: int, rows: int, boxes: int, points: int):
    """Random supplies and demands of equal total (every box and point at least once), and a cost of few values
    (ties, as LM's) or continuous (as EM's)."""
    rng = np.random.default_rng(seed)
    boxes, points = min(boxes, rows), min(points, rows)
    supply = np.bincount(rng.integers(0, boxes, rows - boxes), minlength=boxes) + 1
    demand = np.bincount(rng.integers(0, points, rows - points), minlength=points) + 1
    cost = rng.integers(0, 4, (boxes, points)) / 3.0 if seed % 2 else rng.random((boxes, points))
    return cost, supply, demand


@settings(max_examples=examples(150), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 14), st.integers(1, 6), st.integers(1, 6))
def test_transport_plan_costs_what_the_expanded_assignment_costs(seed, rows, boxes, points):
    """The naive reference: ``linear_sum_assignment`` on the tuple-level cost matrix (each box repeated by its
    supply, each point by its demand) has the same optimal total as ``transport_plan``, whose plan is integral and
    meets every supply and demand."""
    from scipy.optimize import linear_sum_assignment

    cost, supply, demand = _plan_inputs(seed, rows, boxes, points)
    x = sr.transport_plan(cost, supply, demand)
    assert x is not None
    assert (x >= 0).all() and (x.sum(axis=1) == supply).all() and (x.sum(axis=0) == demand).all()
    expanded = cost[np.repeat(np.arange(len(supply)), supply)][:, np.repeat(np.arange(len(demand)), demand)]
    r, c = linear_sum_assignment(expanded)
    assert float((cost * x).sum()) == pytest.approx(float(expanded[r, c].sum()), abs=1e-9)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables, st.sampled_from([("age",), ("zone",), ("sex", "zone"), ("age", "zone", "sex")]),
       st.sampled_from(["LM", "EM"]))
def test_exact_step_5_is_a_minimum_cost_perfect_matching_of_every_component(params, attributes, loss):
    """``match`` on a random release's first step (V_R = a world, W another): a perfect matching inside every
    component of eq. (9) whose total IL(closure{v, w}) equals ``linear_sum_assignment`` on each whole component's
    tuple-level cost matrix (the reference, written from the definition)."""
    from scipy.optimize import linear_sum_assignment

    _, _, snapshot, _, _, il, keys, sources, lo, hi = _first_step(params, attributes, loss)
    comp_v, comp_w = keys[sources[0]], keys[sources[1]]
    matched = sr.match(il, lo, hi, comp_v, il.ranks, comp_w, p=100)
    assert sorted(matched) == list(range(len(snapshot)))  # perfect
    assert (comp_w[matched] == comp_v).all()  # inside the components of eq. (9)
    cost = il.loss(np.minimum(lo, il.ranks[matched]), np.maximum(hi, il.ranks[matched]))
    for k in np.unique(comp_v):
        v, w = np.flatnonzero(comp_v == k), np.flatnonzero(comp_w == k)
        full = il.loss(np.minimum(lo[v][:, None], il.ranks[w][None]), np.maximum(hi[v][:, None], il.ranks[w][None]))
        r, c = linear_sum_assignment(full)
        assert float(cost[v].sum()) == pytest.approx(float(full[r, c].sum()), abs=1e-9)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables, st.sampled_from([("age",), ("sex", "zone"), ("age", "zone", "sex")]), st.sampled_from([2, 100]))
def test_theorem_4_3_on_the_split_path(params, attributes, p):
    """With no component solved exactly (``TRANSPORT_CELLS`` = 0: §4.4's sub-components of at most p everywhere,
    the path of the large components), every release still admits every world (the judge's check)."""
    l, seed, snapshot, spec, worlds = _random_worlds(params, p=p)  # noqa: E741
    saved = sr.TRANSPORT_CELLS
    sr.TRANSPORT_CELLS = 0
    try:
        split = _publish(snapshot, spec, list(attributes), worlds, seed)
    finally:
        sr.TRANSPORT_CELLS = saved
    admitted, diverse = _judge(_stamp(split, 1), snapshot, worlds, spec, l)
    assert admitted.ok, admitted.violations
    assert diverse.ok


def _least_cost_of(cost: np.ndarray, supply: np.ndarray, demand: np.ndarray, units: int) -> float:
    """The naive reference for a partial plan: the least cost of ``units`` disjoint (row, tuple) pairs of the
    tuple-level matrix (each box repeated by its supply, each point by its demand), by ``linear_sum_assignment``
    with n - units dummy rows and columns (a dummy pairs at cost 0 with any real row or tuple, never with another
    dummy), so exactly ``units`` real pairs remain."""
    from scipy.optimize import linear_sum_assignment

    expanded = cost[np.repeat(np.arange(len(supply)), supply)][:, np.repeat(np.arange(len(demand)), demand)]
    n, extra = len(expanded), len(expanded) - units
    padded = np.zeros((n + extra, n + extra))
    padded[:n, :n] = expanded
    padded[n:, n:] = 1e6  # dummy with dummy: never
    r, c = linear_sum_assignment(padded)
    return float(padded[r, c].sum())


@settings(max_examples=examples(150), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 16), st.integers(1, 16), st.integers(1, 6))
def test_a_stopped_transport_plan_is_a_least_cost_partial_plan(seed, rows, boxes, points, phases):
    """``transport_plan`` stopped after at most ``phases`` phases (its budget, or its early stop, which a
    continuous cost of more than ``_FEW_COSTS`` distinct values allows) returns an integral partial plan within
    every supply and demand, of the least cost of any set of as many pairs (the reference above, from the
    definition): what ``transport_match`` keeps is the cheapest matching of its size."""
    cost, supply, demand = _plan_inputs(seed, rows, boxes, points)
    x = sr.transport_plan(cost, supply, demand, phases)
    assert (x >= 0).all() and (x.sum(axis=1) <= supply).all() and (x.sum(axis=0) <= demand).all()
    assert x.sum() > 0  # phase 1 always sends
    if int(supply.sum()) <= phases:  # at most one unit per phase is needed: it finishes
        assert x.sum() == supply.sum()
    assert float((cost * x).sum()) == pytest.approx(_least_cost_of(cost, supply, demand, int(x.sum())), abs=1e-9)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables, st.sampled_from([("age",), ("sex", "zone"), ("age", "zone", "sex")]), st.sampled_from(["LM", "EM"]))
def test_theorem_4_3_when_the_exact_step_stops_early(params, attributes, loss):
    """With ``TRANSPORT_PHASES`` = 1 (every exact run stopped after phase 1, its partial plan kept and the rest sent
    to §4.4's split): Step 5 is still a perfect matching inside every component of eq. (9), and the release admits
    every world (the judge's check, independent of the model)."""
    l, seed, snapshot, spec, worlds, il, keys, sources, lo, hi = _first_step(params, attributes, loss)  # noqa: E741
    saved = sr.TRANSPORT_PHASES
    sr.TRANSPORT_PHASES = 1
    try:
        matched = sr.match(il, lo, hi, keys[sources[0]], il.ranks, keys[sources[1]], p=2)
        table = _publish(snapshot, spec, list(attributes), worlds, seed)
    finally:
        sr.TRANSPORT_PHASES = saved
    assert sorted(matched) == list(range(len(snapshot)))
    assert (keys[sources[1]][matched] == keys[sources[0]]).all()
    admitted, diverse = _judge(_stamp(table, 1), snapshot, worlds, spec, l)
    assert admitted.ok, admitted.violations
    assert diverse.ok


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(40, 70), st.integers(12, 16), st.integers(12, 16), st.integers(2, 8))
def test_the_early_stop_on_many_costs_keeps_a_least_cost_partial_plan(seed, rows, boxes, points, phases):
    """The early stop's own path (a continuous cost of more than ``_FEW_COSTS`` distinct values, a budget): the
    plan, complete or not, stays within every supply and demand and costs the least of any set of as many pairs
    (``_least_cost_of``, from the definition)."""
    cost, supply, demand = _plan_inputs(2 * seed, rows, boxes, points)  # even seed: continuous cost
    assert len(np.unique(cost)) > sr._FEW_COSTS
    x = sr.transport_plan(cost, supply, demand, phases)
    assert (x >= 0).all() and (x.sum(axis=1) <= supply).all() and (x.sum(axis=0) <= demand).all()
    assert x.sum() >= 1  # phase 1 always sends
    assert float((cost * x).sum()) == pytest.approx(_least_cost_of(cost, supply, demand, int(x.sum())), abs=1e-9)


# ------------------------------------------------------------ the pairs at no cost before §4.4's split (identical_match)


@settings(max_examples=examples(150), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 30), st.integers(0, 30), st.integers(1, 3), st.integers(1, 3))
def test_identical_match_pairs_as_many_point_rows_as_the_naive_count(seed, rows, tuples, components, d):
    """``identical_match`` on random boxes (some single points) and tuples: every pair is a point row and a tuple
    at that point in the same component, no row or tuple twice, and as many pairs as the naive count from the
    definition (per component and point, the fewer of its point rows and its tuples)."""
    from collections import Counter

    rng = np.random.default_rng(seed)
    lo = rng.integers(0, 3, (rows, d))
    hi = lo + (rng.random((rows, d)) < 0.3) * rng.integers(1, 3, (rows, d))
    comp_v, comp_w = rng.integers(0, components, rows), rng.integers(0, components, tuples)
    points = rng.integers(0, 3, (tuples, d))
    r, t = sr.identical_match(lo, hi, comp_v, points, comp_w)
    assert len(set(r.tolist())) == len(r) and len(set(t.tolist())) == len(t) == len(r)
    assert (lo[r] == hi[r]).all() and (lo[r] == points[t]).all() and (comp_v[r] == comp_w[t]).all()
    point_rows = Counter((int(comp_v[i]), *map(int, lo[i])) for i in range(rows) if (lo[i] == hi[i]).all())
    at = Counter((int(comp_w[j]), *map(int, points[j])) for j in range(tuples))
    assert len(r) == sum(min(n, at[key]) for key, n in point_rows.items())


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(tables, st.sampled_from([("age",), ("zone",), ("sex", "zone"), ("age", "zone", "sex")]))
def test_identical_pairs_belong_to_a_minimum_cost_matching_under_lm(params, attributes):
    """The exchange argument of ``identical_match``, checked on random first steps under LM: in every component
    of eq. (9), the least cost of a perfect matching that keeps the identical pairs (zero ``linear_sum_assignment``
    on the rows and tuples left, plus theirs) equals the least cost of any (``linear_sum_assignment`` on the whole
    component's tuple-level matrix, the reference)."""
    from scipy.optimize import linear_sum_assignment

    _, _, _, _, _, il, keys, sources, lo, hi = _first_step(params, attributes, "LM")
    comp_v, comp_w = keys[sources[0]], keys[sources[1]]
    rows, tuples = sr.identical_match(lo, hi, comp_v, il.ranks, comp_w)
    assume(len(rows) > 0)  # a step with identical pairs to check

    def least(v: np.ndarray, w: np.ndarray) -> float:
        if not len(v):
            return 0.0
        full = il.loss(np.minimum(lo[v][:, None], il.ranks[w][None]), np.maximum(hi[v][:, None], il.ranks[w][None]))
        r, c = linear_sum_assignment(full)
        return float(full[r, c].sum())

    kept = il.loss(np.minimum(lo[rows], il.ranks[tuples]), np.maximum(hi[rows], il.ranks[tuples]))
    for k in np.unique(comp_v):
        v, w = np.flatnonzero(comp_v == k), np.flatnonzero(comp_w == k)
        mine = np.isin(rows, v)
        rest_v, rest_w = np.setdiff1d(v, rows[mine]), np.setdiff1d(w, tuples[mine])
        assert float(kept[mine].sum()) + least(rest_v, rest_w) == pytest.approx(least(v, w), abs=1e-9)


@settings(max_examples=examples(100), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 3000), st.integers(1, 400), st.integers(1, 200))
def test_more_distinct_than_is_the_count_of_distinct_values(seed, n, values, k):
    """``_more_distinct_than`` (a prefix sorted first) answers as ``len(np.unique(...)) > k``, the definition."""
    cells = np.random.default_rng(seed).integers(0, values, n) / 7.0
    assert sr._more_distinct_than(cells, k) == (len(np.unique(cells)) > k)


@settings(max_examples=examples(100), deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([3, 2**40]))
def test_distinct_points_are_runs_of_the_rows_sorted_by_point(seed, top):
    """``sequential_release._distinct_points`` (one stable sort of ``encoding.rank_keys``, which re-ranks when the
    key would overflow) against the definition: the distinct rows in lexicographic order, each one's rows in row
    order, where its run starts and how long it is; no rows, no runs."""
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(0, 50)), int(rng.integers(1, 4))
    points = rng.integers(0, 3, size=(n, d)) * (top // 3)  # 2**40: the key overflows int64 past two columns
    point, members, first, alive = sr._distinct_points(points)
    rows: dict[tuple, list[int]] = {}
    for r, row in enumerate(points.tolist()):
        rows.setdefault(tuple(row), []).append(r)
    distinct = sorted(rows)
    assert point.tolist() == [list(p) for p in distinct]
    assert members.tolist() == [r for p in distinct for r in rows[p]]
    assert alive.tolist() == [len(rows[p]) for p in distinct]
    assert first.tolist() == [sum(len(rows[p]) for p in distinct[:u]) for u in range(len(distinct))]
