"""The judge's window (``History.first``, issue #12): judging release n from releases n-1 and n and the judge's
memo of release n-1 gives the same report as judging the complete history 1..n from scratch, for every verifier
and attack, on random small histories (those of ``test_fast_judge``, where groups, values and membership change
at random, so that earlier releases break the guarantees too: the window must carry what they broke)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from dagster_privrelease.core.judge import attack_registry, run
from dagster_privrelease.core.judge.history import IncompleteHistory
from tests.budget import examples

from .test_fast_judge import PROPERTY, SEEDS, VALUES, assert_same_report, random_history
from .windows import complete, through_windows, window

#: Fewer examples than ``PROPERTY``: each runs one attack or a model's verifiers once per release and once more.
WINDOW = settings(PROPERTY, max_examples=examples(20))

#: The models whose verifiers read a horizontal history (the vertical ones are tested with their own histories).
MODELS = {
    "k_anonymity": {"name": "k_anonymity", "k": 2},
    "l_diversity": {"name": "l_diversity", "l": 2, "form": "distinct"},
    "m_invariance": {"name": "m_invariance", "m": 2},
    "m_distinct": {"name": "m_distinct", "m": 2, "update_sets": {v: list(VALUES) for v in VALUES}},
}


@pytest.mark.parametrize("attack", attack_registry.names())
@WINDOW
@given(SEEDS)
def test_every_attack_through_the_window_equals_the_complete_history(attack, seed):
    model = "m_distinct" if attack == "sug" else "m_invariance"  # SUG needs update sets; m_distinct skips others
    history = random_history(seed, model=MODELS[model])
    expected = run.attack_history(complete(history), [attack])
    got, fallbacks = through_windows(history, lambda step: run.attack_history(step, [attack]))
    assert fallbacks == 0
    for a, b in zip(got, expected, strict=True):
        assert_same_report(a, b)


@pytest.mark.parametrize("model", list(MODELS))
@WINDOW
@given(SEEDS)
def test_every_verifier_through_the_window_equals_the_complete_history(model, seed):
    history = random_history(seed, model=MODELS[model])
    expected = run.verify_history(complete(history))
    got, fallbacks = through_windows(history, run.verify_history)
    assert fallbacks == 0
    assert [r.name for r in got] == [r.name for r in expected]
    for a, b in zip(got, expected, strict=True):
        assert_same_report(a, b)


def test_a_window_without_the_memo_refuses_rather_than_guess():
    history = random_history(7, releases=4)
    last = history.release_ids[-1]
    step = window(history, last, {})
    with pytest.raises(IncompleteHistory, match="intersection"):
        run.attack_history(step, ["intersection"])
