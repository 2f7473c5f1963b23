"""Vertical histories (a release request per release, each its own attributes) through the pipeline: the judge's
attacks read releases that publish other attributes, and (X, Y)-privacy keeps to one table."""

from __future__ import annotations

import numpy as np
import pytest

from dagster_privrelease import pipeline
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.errors import NotPublishable
from dagster_privrelease.storage import ReleaseStore
from dagster_privrelease.testing.contract import CLINIC, clinic_people

XY = {**CLINIC, "model": {"name": "xy_privacy", "X": ["age", "sex", "region"], "Y": [], "k": 2}, "seed": 1}


def people(count: int = 90):
    """``count`` people of the contract's clinic with text ids."""
    frame = clinic_people(count, np.random.default_rng(4))
    frame.insert(0, "pid", [f"p{i:04d}x" for i in range(count)])
    return frame


def test_a_release_of_other_attributes_is_judged_on_the_attributes_both_publish(tmp_path):
    """Release 1 publishes age, sex and region, release 2 sex and region, neither the sensitive value: the
    correspondence attacks compare class boxes on sex and region only (the backward attack crashed on boxes of
    three columns against two) and count a class's records when no value tells them apart (the forward and cross
    attacks reported every person at 0 candidates); both releases publish and every check passes."""
    store = ReleaseStore(tmp_path / "xy.duckdb", parse_spec(XY))
    rows = people()
    first = pipeline.release_next(store, rows)
    second = pipeline.release_next(store, rows, ["sex", "region"])
    assert (first["outcome"], second["outcome"]) == ("published", "published")
    assert all(second["checks"].values()), second["checks"]
    assert {"forward", "cross", "backward"} <= set(second["checks"])


def test_xy_privacy_refuses_a_table_that_is_not_the_one_it_projected(tmp_path):
    """Wang-Fung release projections of one table: a newcomer, a departure or a changed value is refused by the
    model itself, counting and naming no one, and the same rows then publish."""
    store = ReleaseStore(tmp_path / "xy.duckdb", parse_spec(XY))
    rows = people()
    pipeline.release_next(store, rows)
    changed = rows.copy()
    changed.loc[3, "visits"] = changed.loc[3, "visits"] + 1
    for other, counts in ((rows.iloc[1:], "0 inserted, 1 deleted, 0 changed"),
                          (changed, "0 inserted, 0 deleted, 1 changed")):
        with pytest.raises(NotPublishable, match=counts) as refused:
            pipeline.release_next(store, other, ["sex", "region"])
        assert not any(pid in str(refused.value) for pid in rows["pid"])
    assert pipeline.release_next(store, rows, ["sex", "region"])["outcome"] == "published"
