"""The synthetic insert/delete/update stream (core/stream.py): Xiao-Tao §5 and Li-Zhou §VI-A protocols."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.core.stream import (
    changes,
    increment,
    never_back,
    not_lower,
    split_base_pool,
    stream,
    within_sets,
)
from tests.budget import examples


def table(n: int, start: int = 0) -> pd.DataFrame:
    ids = np.arange(start, start + n)
    return pd.DataFrame({
        "id": ids,
        "age": 20 + ids % 50,
        "sex": np.where(ids % 2 == 0, "F", "M"),
        "disease": np.array(["flu", "gastritis", "dyspepsia", "bronchitis"])[ids % 4],
    })


def test_split_base_pool_partitions_the_table():
    df = table(100)
    base, pool = split_base_pool(df, 30, np.random.default_rng(1))
    assert len(base) == 30 and len(pool) == 70
    assert set(base["id"]).isdisjoint(pool["id"]) and set(base["id"]) | set(pool["id"]) == set(df["id"])
    assert base["id"].is_monotonic_increasing and pool["id"].is_monotonic_increasing  # the table's order
    assert base["id"].tolist() != list(range(30))  # a random sample, not the first rows
    assert base.index.tolist() == list(range(30)) and pool.index.tolist() == list(range(70))
    again, _ = split_base_pool(df, 30, np.random.default_rng(1))
    pd.testing.assert_frame_equal(base, again)
    with pytest.raises(ValueError, match="base_size must be in 0..100"):
        split_base_pool(df, 101, np.random.default_rng(1))


def test_each_release_deletes_r_rows_and_inserts_r_unused_pool_rows():
    """Xiao-Tao §5: T(j) = T(j-1) minus r random rows plus r rows randomly removed from the pool."""
    base, pool = table(200), table(300, start=1000)
    snapshots = list(stream(base, pool, r=50, releases=7, rng=np.random.default_rng(3)))
    assert len(snapshots) == 7  # H = 1 + 300/50
    pd.testing.assert_frame_equal(snapshots[0], base)
    seen: set[int] = set(base["id"])
    gone: set[int] = set()
    for prev, cur in itertools.pairwise(snapshots):
        assert changes(prev, cur, "id") == {"inserts": 50, "deletes": 50, "updates": 0}
        new = set(cur["id"]) - set(prev["id"])
        assert new <= set(pool["id"]) and new.isdisjoint(seen)  # each pool row is inserted once
        gone |= set(prev["id"]) - set(cur["id"])
        assert gone.isdisjoint(cur["id"])  # a deleted row never comes back
        seen |= new
        assert len(cur) == 200 and cur.index.tolist() == list(range(200))
        survivors = cur[cur["id"].isin(prev["id"])]
        assert survivors["id"].tolist() == [i for i in prev["id"] if i in set(cur["id"])]  # survivors keep order
    assert seen == set(base["id"]) | set(pool["id"])  # the pool is used up exactly


def test_deletions_and_insertions_are_random():
    base, pool = table(1000), table(1000, start=5000)
    first, second = stream(base, pool, r=500, releases=2, rng=np.random.default_rng(11))
    deleted = np.array(sorted(set(first["id"]) - set(second["id"])))
    inserted = second["id"].to_numpy()[-500:]
    # uniform choices: the mean of 500 of 0..999 is 499.5 with standard error ~ 9.1
    assert abs(deleted.mean() - 499.5) < 40
    assert abs(inserted.mean() - 5499.5) < 40
    assert not (np.diff(inserted) > 0).all()  # not taken in pool order


def test_li_zhou_volumes_delete_and_insert_different_amounts():
    """Li-Zhou §VI-A: remove 2,000 and insert 5,000 per release (scaled down by 100 here)."""
    base, pool = table(200), table(1000, start=1000)
    sizes = [len(s) for s in stream(base, pool, r=20, inserts=50, releases=5, rng=np.random.default_rng(0))]
    assert sizes == [200, 230, 260, 290, 320]


def test_stream_is_deterministic_and_leaves_its_inputs_alone():
    base, pool = table(50), table(60, start=100)
    before = (base.copy(), pool.copy())
    a = list(stream(base, pool, 10, 4, np.random.default_rng(5), update_fraction=0.2, update_columns=["disease"]))
    b = list(stream(base, pool, 10, 4, np.random.default_rng(5), update_fraction=0.2, update_columns=["disease"]))
    for x, y in zip(a, b, strict=True):
        pd.testing.assert_frame_equal(x, y)
    pd.testing.assert_frame_equal(base, before[0])
    pd.testing.assert_frame_equal(pool, before[1])
    a[1].loc[0, "age"] = -1  # a yielded frame is the caller's to change
    assert (a[2]["age"] >= 0).all()


def test_internal_updates_change_a_fraction_of_the_survivors_to_another_domain_value():
    base, pool = table(400), table(400, start=1000)
    domain = set(base["disease"]) | set(pool["disease"])
    snaps = list(stream(base, pool, r=100, releases=3, rng=np.random.default_rng(2), update_fraction=0.25,
                        update_columns=["disease"]))
    for prev, cur in itertools.pairwise(snaps):
        assert changes(prev, cur, "id") == {"inserts": 100, "deletes": 100, "updates": 75}  # 25% of 300 survivors
        both = prev.merge(cur, on="id", suffixes=("_prev", "_cur"))
        moved = both[both["disease_prev"] != both["disease_cur"]]
        assert len(moved) == 75 and set(moved["disease_cur"]) <= domain
        assert (both["age_prev"] == both["age_cur"]).all() and (both["sex_prev"] == both["sex_cur"]).all()


def test_internal_updates_with_a_rule_per_column():
    """Li-Zhou §VI-A: 'the age of each record will increase 1'; here for the updated rows."""
    base, pool = table(100), table(100, start=1000)
    first, second = stream(base, pool, r=0, inserts=0, releases=2, rng=np.random.default_rng(4), update_fraction=1.0,
                           update_columns={"age": lambda v, rng: v + 1})
    assert (second["age"].to_numpy() == first["age"].to_numpy() + 1).all()
    assert changes(first, second, "id") == {"inserts": 0, "deletes": 0, "updates": 100}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"r": 10, "releases": 5}, "insert 10 rows each after the first, 40 in all, but the pool holds 30 rows"),
        ({"r": 25, "inserts": 5, "releases": 4}, "cannot delete r=25 rows from snapshot 2 of 10 rows"),
        ({"r": -1, "releases": 2}, "must be >= 0"),
        ({"r": 1, "releases": 2, "update_fraction": 0.5}, "needs update_columns"),
        ({"r": 1, "releases": 2, "update_fraction": 1.5, "update_columns": ["age"]},
         r"update_fraction must be in \[0, 1\]"),
        ({"r": 1, "releases": 2, "update_fraction": 0.5, "update_columns": ["salary"]},
         r"\['salary'\] are not columns"),
    ],
)
def test_stream_refuses_what_it_cannot_honour_when_called(kwargs, message):
    base, pool = table(30), table(30, start=100)
    with pytest.raises(ValueError, match=message):
        stream(base, pool, rng=np.random.default_rng(0), **kwargs)


def test_a_constant_column_cannot_be_updated():
    base = table(10).assign(sex="F")
    with pytest.raises(ValueError, match="column 'sex' has fewer than 2 values"):
        stream(base, base.iloc[:0], 0, 1, np.random.default_rng(0), update_fraction=0.5, update_columns=["sex"])


def test_changes_counts_inserts_deletes_updates():
    prev = pd.DataFrame({"id": [1, 2, 3, 4, 7], "a": [1.0, np.nan, 3.0, 4.0, 7.0], "s": ["x", "y", "z", "w", None]})
    cur = pd.DataFrame({"id": [4, 2, 3, 5, 6, 7], "a": [4.0, np.nan, 3.5, 5.0, 6.0, 7.0],
                        "s": ["w", "y", "z", "v", "u", "t"]})
    # id 1 deleted; 5, 6 inserted; 3 (a changed) and 7 (s set) updated; 2 (null in both) and 4 (moved) unchanged
    assert changes(prev, cur, "id") == {"inserts": 2, "deletes": 1, "updates": 2}


def test_zero_or_one_release_needs_no_pool():
    base = table(5)
    assert list(stream(base, base.iloc[:0], r=3, releases=0, rng=np.random.default_rng(0))) == []
    (only,) = stream(base, base.iloc[:0], r=3, releases=1, rng=np.random.default_rng(0))
    pd.testing.assert_frame_equal(only, base)


def test_changes_handles_nullable_and_categorical_columns():
    prev = pd.DataFrame({"id": [1, 2, 3, 4], "n": pd.array([1, None, 3, None], dtype="Int64"),
                         "s": pd.array(["x", None, "z", "w"], dtype="string"),
                         "c": pd.Categorical(["a", "b", "a", "b"])})
    cur = pd.DataFrame({"id": [1, 2, 3, 4], "n": pd.array([1, None, 4, 5], dtype="Int64"),
                        "s": pd.array(["x", None, "z", "w"], dtype="string"),
                        "c": pd.Categorical(["a", "b", "a", "c"])})
    # 3: n 3 -> 4; 4: n null -> 5 and c b -> c (other categories); 2: nulls on both sides
    assert changes(prev, cur, "id") == {"inserts": 0, "deletes": 0, "updates": 2}


# ------------------------------------------------------------------------------- Li-Zhou §VI-A's update rules

LEVELS = ["primary", "middle", "high", "bachelor", "master", "doctorate"]
MARITAL = ["Never married", "Married", "Divorced", "Widowed"]
PARTITION = {"flu": ["flu", "cold"], "cold": ["flu", "cold"], "ulcer": ["ulcer"], "gastritis": ["gastritis", "ulcer"]}


def _legal(rule_name: str, old: str, new: str) -> bool:
    """The definitions, written out: Li-Zhou §VI-A's semantics of each attribute."""
    if rule_name == "education":
        return LEVELS.index(new) >= LEVELS.index(old)
    if rule_name == "marital":
        return old == "Never married" or new != "Never married"
    return new in {old, *PARTITION.get(old, [])}


RULES = {"education": (not_lower(LEVELS), LEVELS), "marital": (never_back(MARITAL, "Never married"), MARITAL),
         "sensitive": (within_sets(PARTITION), sorted(PARTITION))}


@settings(max_examples=examples(50), deadline=None)
@given(name=st.sampled_from(sorted(RULES)), picks=st.lists(st.integers(0, 5), min_size=1, max_size=40),
       seed=st.integers(0, 2**32 - 1))
def test_update_rules_only_make_legal_updates(name, picks, seed):
    rule, domain = RULES[name]
    old = np.array([domain[p % len(domain)] for p in picks], dtype=object)
    new = rule(old, np.random.default_rng(seed))
    assert len(new) == len(old) and all(_legal(name, a, b) for a, b in zip(old, new, strict=True))


@pytest.mark.parametrize("name", sorted(RULES))
def test_update_rules_draw_every_legal_value_uniformly(name):
    """'may stay the same or change ... with equal probabilities' (§VI-A): 4,000 draws from each value hit each
    legal value about equally often (within 5 standard errors)."""
    rule, domain = RULES[name]
    rng = np.random.default_rng(9)
    for old in domain:
        new = rule(np.array([old] * 4_000, dtype=object), rng)
        legal = [v for v in domain if _legal(name, old, v)]
        counts = pd.Series(new).value_counts()
        assert set(counts.index) == set(legal)
        p = 1 / len(legal)
        assert (abs(counts / 4_000 - p) <= 5 * np.sqrt(p * (1 - p) / 4_000)).all()


def test_a_value_outside_the_rule_stays_and_increment_caps():
    assert list(not_lower(LEVELS)(np.array(["unknown"], dtype=object), np.random.default_rng(0))) == ["unknown"]
    assert increment(1, cap=90)(np.array([5, 89, 90]), np.random.default_rng(0)).tolist() == [6, 90, 90]


def test_li_zhou_protocol_updates_every_row_and_a_count_of_rows():
    """§VI-A: every survivor ages by 1 (``every_row``), 'updates on sensitive values only randomly occurred on
    5,000 records' (``updates``, here 40 of the survivors)."""
    base, pool = table(200), table(200, start=1000)
    always_other = {"disease": lambda v, rng: np.where(v == "flu", "bronchitis", "flu")}
    first, second, third = stream(base, pool, r=20, inserts=30, releases=3, rng=np.random.default_rng(6), updates=40,
                                  update_columns=always_other, every_row={"age": increment(1)})
    for prev, cur in ((first, second), (second, third)):
        both = prev.merge(cur, on="id", suffixes=("_prev", "_cur"))
        assert len(both) == len(prev) - 20 and len(cur) == len(prev) + 10
        assert (both["age_cur"] == both["age_prev"] + 1).all()
        assert (both["disease_cur"] != both["disease_prev"]).sum() == 40
    with pytest.raises(ValueError, match="give update_fraction or updates"):
        stream(base, pool, 1, 2, np.random.default_rng(0), update_fraction=0.5, updates=3, update_columns=["sex"])
    with pytest.raises(ValueError, match=r"every_row column\(s\) \['salary'\]"):
        stream(base, pool, 1, 2, np.random.default_rng(0), every_row={"salary": increment()})
