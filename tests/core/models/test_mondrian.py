"""Mondrian partitioning (core/mondrian.py): every guarantee is checked by the small independent checker below
(pandas groupby counts over the output), never by re-running the partitioner's own tests of its constraint."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.core.models import mondrian
from dagster_privrelease.core.models.kernels import partition as kernel
from dagster_privrelease.core.models.kernels.partition import partition
from dagster_privrelease.core.release import PreviousRelease
from dagster_privrelease.core.spec import Model, load_spec, validate_snapshot
from dagster_privrelease.errors import NotPublishable
from tests.budget import examples
from tests.fixtures import xiao_tao

RESOURCES = Path(__file__).resolve().parents[3] / "resources"


# --- the independent checker ---------------------------------------------------------------------------------


def violations(groups: np.ndarray, sensitive, *, k=1, l=1, form="frequency", unique=False) -> list[str]:  # noqa: E741
    """Every way ``groups`` fails to be a partition into ids 0..g-1 whose groups meet the constraint."""
    frame = pd.DataFrame({"g": np.asarray(groups), "s": np.asarray(sensitive)})
    out = []
    ids = np.sort(frame["g"].unique())
    if not np.array_equal(ids, np.arange(len(ids))):
        out.append(f"group ids are not 0..g-1: {ids[:10]}")
    size = frame.groupby("g").size()
    distinct = frame.groupby("g")["s"].nunique()
    top = frame.groupby(["g", "s"]).size().groupby(level="g").max()
    out += [f"group {g} has {n} < k={k} rows" for g, n in size[size < k].items()]
    if unique:
        out += [f"group {g} repeats a sensitive value" for g in size.index[distinct != size]]
    elif form == "distinct":
        out += [f"group {g} has {d} < l={l} distinct values" for g, d in distinct[distinct < l].items()]
    else:
        bad = top * l > size
        out += [f"group {g}: a value in {top[g]} of {size[g]} rows, over 1/{l}" for g in size.index[bad]]
    return out


def table_violates(sensitive, *, k=1, l=1, form="frequency", unique=False) -> bool:  # noqa: E741
    """Whether the whole table, as one group, fails the constraint (m = k when ``unique``: m-eligibility)."""
    counts = pd.Series(np.asarray(sensitive)).value_counts()
    n = int(counts.sum())
    if unique:
        return n < k or counts.max() * k > n
    if n < k:
        return True
    if form == "distinct":
        return len(counts) < l
    return counts.max() * l > n


def disjoint_boxes(X: np.ndarray, groups: np.ndarray) -> bool:
    """Strict partitioning: any two groups' bounding boxes are separated along some attribute."""
    frame = pd.DataFrame(X)
    frame["g"] = groups
    lo = frame.groupby("g").min().to_numpy()
    hi = frame.groupby("g").max().to_numpy()
    apart = (hi[:, None, :] < lo[None, :, :]) | (hi[None, :, :] < lo[:, None, :])
    overlap = ~apart.any(axis=2)
    np.fill_diagonal(overlap, False)
    return not overlap.any()


# --- synthetic tables ----------------------------------------------------------------------------------------


def synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """An age-like, a zipcode-like and two categorical-rank columns; 8 sensitive values, one more common."""
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [rng.integers(17, 90, n), rng.integers(10000, 99999, n), rng.integers(0, 16, n), rng.integers(0, 2, n)]
    ).astype(np.float64)
    s = rng.choice(8, size=n, p=np.r_[np.full(7, 0.85 / 7), 0.15])
    return X, s


SYN_X, SYN_S = synthetic(5000, 7)


@pytest.mark.parametrize("k", [5, 10])
def test_k_anonymity_on_synthetic_data(k):
    groups = partition(SYN_X, SYN_S, k=k)
    assert violations(groups, SYN_S, k=k) == []
    assert disjoint_boxes(SYN_X, groups)
    assert groups.max() + 1 > len(SYN_X) // (4 * k)  # cut deep, not one big group


@pytest.mark.parametrize("form", ["frequency", "distinct"])
@pytest.mark.parametrize("l", [2, 3, 5])
def test_l_diversity_on_synthetic_data(l, form):  # noqa: E741
    groups = partition(SYN_X, SYN_S, l=l, form=form)
    assert violations(groups, SYN_S, l=l, form=form) == []
    assert disjoint_boxes(SYN_X, groups)


@pytest.mark.parametrize("m", [2, 3, 4, 5, 6])
def test_m_unique_on_synthetic_data(m):
    groups = partition(SYN_X, SYN_S, k=m, unique=True)
    assert violations(groups, SYN_S, k=m, unique=True) == []


def test_m_unique_cut_of_a_leaf_no_split_can_shrink():
    # every tuple has the same QI values: Mondrian cannot cut; the leaf is dealt into m-unique groups
    s = np.repeat(np.arange(5), [4, 4, 3, 2, 2])  # 15 tuples, max 4 <= 15/3: 3-eligible
    X = np.zeros((15, 2))
    groups = partition(X, s, k=3, unique=True)
    assert violations(groups, s, k=3, unique=True) == []
    assert groups.max() + 1 == 5  # floor(15 / 3) groups


def test_m_unique_groups_are_ordered_slices_of_their_leaf():
    # one leaf (identical second attribute, first attribute never separable under 2-eligibility): each value's
    # tuples are dealt to groups in ascending order of the widest attribute
    s = np.array([0, 0, 0, 1, 1, 1])
    X = np.column_stack([np.array([1, 2, 3, 1, 2, 3], dtype=float), np.zeros(6)])
    groups = partition(X, s, k=2, unique=True)
    assert violations(groups, s, k=2, unique=True) == []
    frame = pd.DataFrame({"g": groups, "x": X[:, 0]})
    assert sorted(frame.groupby("g")["x"].agg(["min", "max"]).itertuples(index=False)) == [(1, 1), (2, 2), (3, 3)]


def test_hand_traced_mondrian_on_xiao_tao_table_1a():
    """Table 1a with m = 2 traced by hand (age and zipcode normalised by their ranges; ties go to age):
    age < 37 | >= 37; left on age <= 23 | > 23; right on zipcode < 33k | >= 33k, then age <= 40 | > 40."""
    t1 = xiao_tao.table_1a()
    X = t1[["age", "zipcode"]].to_numpy()
    groups = partition(X, t1["disease"].to_numpy(), k=2, unique=True)
    got = {frozenset(t1["name"][groups == g]) for g in np.unique(groups)}
    assert got == {
        frozenset({"Bob", "Alice", "David"}),
        frozenset({"Andy", "Helen"}),
        frozenset({"Gary", "Linda"}),
        frozenset({"Jane", "Ken"}),
        frozenset({"Paul", "Steve"}),
    }
    assert violations(groups, t1["disease"], k=2, unique=True) == []


def test_categorical_split_keeps_taxonomy_runs_contiguous():
    # a categorical column of leaf ranks 0..7: every group covers a contiguous run of ranks it fully owns
    rng = np.random.default_rng(3)
    X = rng.integers(0, 8, (400, 1)).astype(float)
    groups = partition(X, rng.integers(0, 4, 400), k=20)
    frame = pd.DataFrame({"g": groups, "r": X[:, 0]})
    spans = frame.groupby("g")["r"].agg(["min", "max"]).sort_values("min").to_numpy()
    assert (spans[1:, 0] > spans[:-1, 1]).all()


def test_scale_changes_the_split_attribute():
    # equal raw ranges; scale makes attribute 1 look narrow, so the first cut is on attribute 0
    X = np.column_stack([np.arange(8.0), np.arange(8.0)[::-1]])
    s = np.zeros(8)
    groups = partition(X, s, k=4, scale=np.array([1.0, 100.0]))
    assert set(groups[X[:, 0] < 4]) != set(groups[X[:, 0] >= 4])
    assert violations(groups, s, k=4) == []


# --- refusals ------------------------------------------------------------------------------------------------


def test_fewer_rows_than_k_is_not_publishable():
    with pytest.raises(NotPublishable, match=r"3 rows, fewer than k=5"):
        partition(np.zeros((3, 1)), np.array(["a", "b", "c"]), k=5)


def test_not_m_eligible_names_the_value_and_counts():
    s = np.array(["flu", "flu", "flu", "cold", "hiv"])
    with pytest.raises(NotPublishable, match=r"'flu' is in 3 of the 5 rows, more than 1/2.*not m-eligible"):
        partition(np.zeros((5, 1)), s, k=2, unique=True)


def test_frequency_l_diversity_impossible_names_the_value():
    s = np.array(["flu"] * 4 + ["cold"] * 3 + ["hiv"] * 3)
    with pytest.raises(NotPublishable, match=r"'flu' is in 4 of the 10 rows, more than 1/3 \(at most 3\)"):
        partition(np.zeros((10, 1)), s, l=3)


def test_distinct_l_diversity_impossible_names_the_values():
    with pytest.raises(NotPublishable, match=r"2 distinct value\(s\) \['cold', 'flu'\], fewer than l=3"):
        partition(np.zeros((6, 1)), np.array(["flu", "cold"] * 3), l=3, form="distinct")


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="form"):
        partition(np.zeros((4, 1)), np.zeros(4), form="entropy")
    with pytest.raises(ValueError, match="m=k=2"):
        partition(np.zeros((4, 1)), np.arange(4), k=2, l=3, unique=True)


# --- properties ----------------------------------------------------------------------------------------------


@st.composite
def small_tables(draw):
    n = draw(st.integers(1, 40))
    d = draw(st.integers(1, 3))
    X = np.array(draw(st.lists(st.lists(st.integers(0, 6), min_size=d, max_size=d), min_size=n, max_size=n)))
    s = np.array(draw(st.lists(st.integers(0, draw(st.integers(0, 5))), min_size=n, max_size=n)))
    unique = draw(st.booleans())
    k = draw(st.integers(1, 4))
    l = draw(st.integers(1, k if unique else 4))  # noqa: E741
    return X.astype(np.float64), s, dict(k=k, l=l, form=draw(st.sampled_from(["frequency", "distinct"])), unique=unique)


@settings(max_examples=examples(300), deadline=None)
@given(small_tables())
def test_partition_property(table):
    X, s, constraint = table
    if table_violates(s, **constraint):
        with pytest.raises(NotPublishable):
            partition(X, s, **constraint)
        return
    groups = partition(X, s, **constraint)
    assert groups.dtype == np.int64 and groups.shape == (len(X),)
    assert violations(groups, s, **constraint) == []
    if not constraint["unique"]:
        assert disjoint_boxes(X, groups)


# --- Adult ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adult_table(adult):
    spec = load_spec(RESOURCES / "adult.yaml")
    snapshot = validate_snapshot(adult, spec)
    spec = spec.bind(snapshot)
    return snapshot, spec


def adult_matrix(snapshot, spec) -> np.ndarray:
    """The QIs as numbers, built here from the taxonomies' leaf order (not with encoding.encode)."""
    columns = []
    for name, qi in spec.quasi_identifiers.items():
        values = snapshot[name]
        columns.append(values.to_numpy(np.float64) if qi.numeric else values.map(qi.taxonomy.rank).to_numpy())
    return np.column_stack(columns).astype(np.float64)


@pytest.mark.parametrize(
    "constraint",
    [dict(k=5), dict(k=10)]
    + [dict(l=l, form=f) for l in (2, 3, 5) for f in ("frequency", "distinct")]  # noqa: E741
    + [dict(k=m, unique=True) for m in (2, 3, 4, 5, 6)],
    ids=str,
)
def test_adult_first_release(adult_table, constraint):
    snapshot, spec = adult_table
    X = adult_matrix(snapshot, spec)
    s = snapshot[spec.sensitive].to_numpy()
    groups = partition(X, s, scale=kernel.domain_widths(X, spec), **constraint)
    assert violations(groups, s, **constraint) == []
    # a real partition, not one group (frequency 5-diversity of occupation is hard on Adult: 71 groups measured)
    assert groups.max() + 1 > 50


def published_boxes_contain_genuine_tuples(release, snapshot, spec) -> None:
    table = release.table
    boxes = table.groupby("group_id")[[f"{a}__{b}" for a in spec.quasi_identifiers for b in ("lo", "hi")]]
    assert (boxes.nunique() == 1).all().all()  # homogeneous: one box per group
    boxes = boxes.first()
    tuples = snapshot.merge(release.hosting, on=spec.id).join(boxes, on="group_id")
    X = adult_matrix(tuples, spec)
    for j, name in enumerate(spec.quasi_identifiers):
        assert (tuples[f"{name}__lo"].to_numpy() <= X[:, j]).all(), name
        assert (X[:, j] <= tuples[f"{name}__hi"].to_numpy()).all(), name


@pytest.mark.parametrize(
    "model, params",
    [
        ("k_anonymity", {"k": 10}),
        ("l_diversity", {"l": 3, "form": "frequency"}),
        ("l_diversity", {"l": 5, "form": "distinct"}),
    ],
)
def test_adult_models_publish_boxes_holding_every_tuple(adult_table, model, params):
    snapshot, spec = adult_table
    spec = dataclasses.replace(spec, model=Model(model, params))
    publish = mondrian.publish_k_anonymity if model == "k_anonymity" else mondrian.publish_l_diversity
    release = publish(snapshot, spec, None, np.random.default_rng(0))
    assert len(release.table) == len(snapshot) and release.counterfeit_count == 0
    hosting_groups = release.hosting["group_id"].to_numpy()
    s = snapshot.set_index(spec.id).loc[release.hosting[spec.id], spec.sensitive].to_numpy()
    assert (
        violations(hosting_groups, s, k=params.get("k", 1), l=params.get("l", 1), form=params.get("form", "frequency"))
        == []
    )
    published_boxes_contain_genuine_tuples(release, snapshot, spec)


def test_baselines_ignore_the_previous_release():
    spec = dataclasses.replace(xiao_tao.spec(), model=Model("k_anonymity", {"k": 3}))
    t2 = xiao_tao.table_2a()
    previous = PreviousRelease(1, xiao_tao.table_1a(), xiao_tao.table_1b(), pd.DataFrame(), xiao_tao.hosting_1b())
    alone = mondrian.publish_k_anonymity(t2, spec, None, np.random.default_rng(1))
    after = mondrian.publish_k_anonymity(t2, spec, previous, np.random.default_rng(1))
    pd.testing.assert_frame_equal(alone.table, after.table)
    assert violations(alone.hosting["group_id"].to_numpy(), t2["disease"], k=3) == []
