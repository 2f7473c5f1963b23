"""The models' work through the partition seam (``core.partitioned``): a bucket's split (Xiao-Tao §4.3) does not
depend on the buckets split beside it, and the releases published with one worker and with four are the same."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagster_privrelease.core.encoding import dense_ranks
from dagster_privrelease.core.models.kernels import partition as mondrian
from dagster_privrelease.core.models.kernels import split as kernel
from dagster_privrelease.core.partitioned import LocalBackend, Seeds, using
from dagster_privrelease.core.progress import LineReporter, reporting
from dagster_privrelease.errors import NotPublishable
from tests.budget import examples
from tests.partitioned_checks import assert_same_labels

from . import seam_streams
from .test_m_invariance import _partition, _reference_split, balanced_bucket
from .test_mondrian import small_tables


@pytest.mark.parametrize("relative", [False, True])
@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3).flatmap(lambda d: st.lists(st.one_of(balanced_bucket(d), balanced_bucket(d, levels=300)),
                                                    min_size=1, max_size=6)),
       st.randoms(use_true_random=False))
def test_a_buckets_split_does_not_depend_on_the_buckets_beside_it(relative, buckets, random):
    """The split kernel on every batching of the buckets (one call, four batches, one call per bucket) gives the
    same groups: the ranks are made once over all the buckets (order-preserving; a small bucket holds codes far
    above its own row count) and every extent is read exactly. Rows of the buckets interleaved at random."""
    X = np.vstack([bx for bx, _ in buckets])
    values = np.concatenate([bv for _, bv in buckets])
    keys = np.repeat(1000 - 7 * np.arange(len(buckets)), [len(bv) for _, bv in buckets])
    order = np.array(random.sample(range(len(keys)), len(keys)))
    ranks, table = kernel.rank_codes(X[order])
    assert_same_labels(partial(kernel.split_buckets, table=table, relative=relative), keys[order],
                       kernel.split_columns(ranks, values[order]), Seeds(0, 1), LocalBackend(workers=4))


#: One balanced bucket (3 values x 2 tuples) whose two cuts, along either QI, have the same perimeter sum
#: (2.763347018910238, exactly): §4.3's first QI wins. The float offsets the running extents used before gave it
#: to the second QI when 2, 30 or 1000 buckets were split beside it, found on a release of ``seam_streams``.
TIE = np.array([[0.23943661971830985, 0.2583699709206391], [0.014084507042253521, 0.13114902094135278],
                [0.23943661971830985, 0.0784711418188092], [0.22535211267605634, 0.4022962563959046],
                [0.08450704225352113, 0.3341839472699606], [0.08450704225352113, 0.06449719989527819]])
TIE_VALUES = np.array([5, 7, 5, 3, 3, 7])


@pytest.mark.parametrize("before", [0, 2, 10, 30, 1000])
def test_an_exact_tie_between_qis_goes_to_the_first_wherever_the_bucket_sits(before):
    filler = np.full((6 * before, 2), 0.5)  # buckets of 3 values x 2 identical tuples, cut beside the tie
    X = np.vstack([filler, TIE])
    values = np.concatenate([np.tile([0, 1, 2, 0, 1, 2], before), TIE_VALUES])
    buckets = np.concatenate([np.repeat(np.arange(before), 6), np.full(6, before)])
    groups = kernel.split(X, values, buckets)[-6:]
    assert _partition(groups) == _reference_split(TIE, TIE_VALUES) == {frozenset({0, 1, 4}), frozenset({2, 3, 5})}


@pytest.mark.parametrize("name", ["m_invariance", "m_invariance_mondrian_first"])
def test_releases_with_one_and_four_workers_are_the_same(name, monkeypatch):
    """Every release of a 12-release text-id stream (each reading the one before): the published table, the
    counterfeits and the hosting groups are the same whether the buckets were split (and the first release's
    Mondrian tree grown) in one call or in batches on four threads, Mondrian cut into 16 regions."""
    with using(LocalBackend(workers=1)):
        inline = seam_streams.releases(name)
    monkeypatch.setattr(mondrian, "REGION_ROWS", 0)
    with using(LocalBackend(workers=4)):
        batched = seam_streams.releases(name)
    assert len(inline) >= 12 and len(set(inline)) == len(inline)  # every release its own
    assert batched == inline


@pytest.mark.parametrize("name", seam_streams.SAVED)
@pytest.mark.parametrize(("workers", "region_rows"), [(1, mondrian.REGION_ROWS), (4, 0)])
def test_mondrian_releases_are_the_ones_published_before_the_seam(name, workers, region_rows, monkeypatch):
    """k-anonymity and l-diversity: 12 releases of a text-id stream, each the release the code before the seam
    published (digests saved from it), whether the tree is grown in one call or cut into 16 regions on four
    threads."""
    monkeypatch.setattr(mondrian, "REGION_ROWS", region_rows)
    with using(LocalBackend(workers=workers)):
        assert seam_streams.releases(name) == json.loads(seam_streams.DIGESTS.read_text())[name]


def grown_at_once(X: np.ndarray, sensitive: np.ndarray, k: int, l: int,  # noqa: E741 - the papers' name
                  form: str, unique: bool) -> np.ndarray:
    """Mondrian's groups with the whole tree grown in one pass (``_mondrian`` without a cut), then, for ``unique``,
    each leaf dealt into m-unique groups: the path before the seam."""
    codes, values = pd.factorize(sensitive, sort=True)
    constraint = mondrian.Constraint(k, k, "frequency") if unique else mondrian.Constraint(k, l, form)
    mondrian._check_publishable(codes, values, constraint, unique)
    widths = np.ptp(X, axis=0)
    scale = np.where(widths > 0, widths, 1.0)
    ranks = dense_ranks(X)[0]
    leaves = mondrian._mondrian(X / scale, ranks, codes, len(values), constraint).groups
    return mondrian._m_unique_cut(X / scale, ranks, codes, len(values), leaves, k) if unique else leaves


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_tables(), st.sampled_from([1, 2, 4]), st.integers(0, 12))
def test_mondrian_below_a_cut_has_the_leaves_and_ids_of_the_tree_grown_at_once(table, workers, region_rows):
    """``partition`` with the top levels grown until 4 regions per worker (or a node below ``region_rows``) and
    the regions grown on the backend's threads: the same group id for every row as the tree grown at once."""
    X, s, constraint = table
    try:
        expected = grown_at_once(X, s, **constraint)
    except NotPublishable:
        return
    mondrian.REGION_ROWS, default = region_rows, mondrian.REGION_ROWS
    try:
        with using(LocalBackend(workers=workers)):
            got = mondrian.partition(X, s, **constraint)
    finally:
        mondrian.REGION_ROWS = default
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("constraint", [dict(k=5), dict(l=3, form="distinct"), dict(k=4, unique=True)], ids=str)
def test_mondrian_on_thousands_of_rows_cut_into_regions(constraint, monkeypatch):
    """A 6,000-row table (text-like sensitive values, ties on coarse QIs): 16 regions on four threads give the
    groups of the tree grown at once."""
    rng = np.random.default_rng(4)
    X = np.column_stack([rng.integers(0, 90, 6_000), rng.integers(0, 7, 6_000), rng.random(6_000)])
    s = np.array([f"v{i:02d}" for i in rng.integers(0, 12, 6_000)], dtype=object)
    expected = grown_at_once(X, s, **{"k": 1, "l": 1, "form": "frequency", "unique": False, **constraint})
    heard: list[str] = []
    with using(LocalBackend(workers=4)), reporting(LineReporter(heard.append)):
        got = mondrian.partition(X, s, **constraint)
    np.testing.assert_array_equal(got, expected)
    assert [line.split(":")[0] for line in heard] == ["mondrian on local"]
