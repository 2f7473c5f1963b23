"""The model contract (``dagster_privrelease.testing.contract``) over every registered model and every kind of
identifier: ``make test`` runs a 12-release stream with text ids and a 5-release one with each other id kind;
``make test-slow`` runs 20 releases of 300 rows with every id kind. The judge is run again from scratch on the
complete history at every 4th (5th) release and the last."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dagster_privrelease.core import models
from dagster_privrelease.core.release import build_release
from dagster_privrelease.errors import NotPublishable
from dagster_privrelease.testing.contract import (
    CASES,
    ID_KINDS,
    REFUSED_AT,
    Case,
    ContractViolation,
    Outcome,
    case_for,
    padded_ids,
    run_contract,
)

#: Models whose ``publish`` never reads the id column (Mondrian's partition of the quasi-identifiers, no state):
#: with them an id kind other than text runs only the store, the pipeline and the judge, which m_invariance's
#: run with that id kind covers on the same stream (deletions, returners, groups leaving; every attack). Their
#: runs with those id kinds are in ``make test-slow``.
ID_BLIND = {"k_anonymity", "l_diversity"}


def cases(everything: bool = False) -> list:
    """(model, id kind) over the registry; an id-blind model's runs with other than text ids marked slow unless
    ``everything``."""

    def marked(name: str, kind: str) -> list:
        return [pytest.mark.slow] if not everything and name in ID_BLIND and kind != "text" else []

    return [pytest.param(name, kind, marks=marked(name, kind), id=f"{name}-{kind}")
            for name in models.names() for kind in ID_KINDS]


def check(outcome: Outcome, case: Case, releases: int) -> None:
    """The stream held what its case says it holds."""
    assert outcome.published == list(range(1, releases + 1))
    if case.deletes and releases >= 4:
        assert outcome.newcomer_groups_left > 0 and (outcome.returners > 0 or not case.returners)
    if case.refused is not None and releases >= 4:
        assert REFUSED_AT in [release_id for release_id, _ in outcome.refusals]
    if case.updates:
        assert outcome.updates > 0


def test_every_registered_model_has_a_contract_case():
    assert set(models.names()) <= set(CASES), "add the model's stream to contract.CASES"


@pytest.mark.parametrize(("name", "kind"), cases())
def test_the_model_keeps_the_contract(tmp_path, name, kind):
    case = case_for(name)
    releases = 12 if kind == "text" else 5
    check(run_contract(tmp_path / "s.duckdb", case, kind, releases=releases, judge_every=4), case, releases)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "kind"), cases(everything=True))
def test_the_model_keeps_the_contract_on_a_long_stream(tmp_path, name, kind):
    case = case_for(name)
    check(run_contract(tmp_path / "s.duckdb", case, kind, releases=20, rows=300, seed=7, judge_every=5), case, 20)


def test_ids_that_differ_only_by_padding_are_different_people():
    assert list(padded_ids(np.arange(4))) == ["5000000", "005000000", "0005000000", "5000001"]


def test_a_refusal_that_names_a_person_breaks_the_contract(tmp_path):
    """A third-party model registered for the test: l_diversity that refuses its third release naming an id."""
    l_diversity = models.descriptor("l_diversity")
    calls = []

    def publish(snapshot, spec, previous, rng):
        calls.append(1)
        if len(calls) == 3:
            raise NotPublishable(f"cannot place {snapshot[spec.id].iloc[-1]}")
        return l_diversity.publish(snapshot, spec, previous, rng)

    with models.registered(dataclasses.replace(l_diversity, name="leaky", publish=publish)):
        with pytest.raises(ContractViolation, match=r"leaky \(text ids\): 1 id\(s\) appear outside the private"):
            run_contract(tmp_path / "s.duckdb", Case({"name": "leaky", "l": 2}), "text", releases=3)
    assert len(calls) == 3, "the refusal was caught when it was made"


def test_a_candidate_the_judge_refuses_breaks_the_contract(tmp_path):
    """A model that promises l-diversity but publishes every row alone is refused by the judge, not by itself."""
    l_diversity = models.descriptor("l_diversity")

    def publish(snapshot, spec, previous, rng):
        return build_release(snapshot, np.arange(len(snapshot)), spec, rng)

    with models.registered(dataclasses.replace(l_diversity, name="alone", publish=publish)):
        with pytest.raises(ContractViolation, match=r"alone \(uuid ids\), release 1: the judge refused the model's "
                                                    r"candidate: release 1 is not published: l_diversity failed"):
            run_contract(tmp_path / "s.duckdb", Case({"name": "alone", "l": 2}), "uuid", releases=2)
