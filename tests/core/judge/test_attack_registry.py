"""The attack registry: the same shape as the model registry; the judge and the CLI read it."""

from __future__ import annotations

import pytest

from dagster_privrelease.core.judge import attack_registry
from dagster_privrelease.core.judge.attack_registry import Attack
from dagster_privrelease.core.judge.history import Bound, History, Report
from dagster_privrelease.core.judge.run import run_attacks
from tests.fixtures import xiao_tao

BUILT_IN = ["intersection", "critical", "forward", "cross", "backward", "equivalence", "join", "possible_worlds",
            "sug"]


def count_releases(history: History, bound: Bound) -> Report:
    """A trivial adversary: reports how many releases it read, and fails below the bound's tuples."""
    releases = len(history.release_ids)
    return Report("count_releases", releases >= bound.tuples, summary={"releases": releases})


def test_the_built_in_attacks_are_registered_in_the_order_the_judge_runs_them():
    assert attack_registry.names() == BUILT_IN
    assert attack_registry.attack("intersection").shares and not attack_registry.attack("sug").shares


def test_a_registered_attack_is_run_by_the_judge_after_the_built_in_ones():
    history = xiao_tao.history_1b_2b()
    with attack_registry.registered(Attack("count_releases", count_releases)):
        assert attack_registry.names() == [*BUILT_IN, "count_releases"]
        reports = run_attacks(history, Bound(values=2, tuples=2))
        assert [r.name for r in reports] == [*BUILT_IN, "count_releases"]
        assert reports[-1].ok and reports[-1].summary == {"releases": 2}
        (alone,) = run_attacks(history, Bound(values=2, tuples=3), ["count_releases"])
        assert not alone.ok
    assert attack_registry.find("count_releases") is None


def test_an_unknown_attack_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown attack 'nope'"):
        attack_registry.attack("nope")
    with pytest.raises(ValueError, match=r"unknown attack\(s\) \['nope'\]"):
        run_attacks(xiao_tao.history_1b_2b(), attacks=["nope"])
