"""The model registry: a model is one module and one registration.

A toy model is declared and registered from this test module alone (no edit of the package); the spec, the
pipeline, the judge, the CLI and the Dagster definitions then know it. It is deliberately trivial: every tuple in
one group, the coarsest k-anonymous release there is.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dagster_privrelease import cli, pipeline
from dagster_privrelease.core import models
from dagster_privrelease.core.judge.history import Bound
from dagster_privrelease.core.judge.run import attack_history, verify_history
from dagster_privrelease.core.judge.verifiers import verify_k_anonymity
from dagster_privrelease.core.models import ModelDescriptor, Param
from dagster_privrelease.core.release import PreviousRelease, Release, build_release
from dagster_privrelease.core.spec import Spec, parse_spec
from dagster_privrelease.errors import SpecError
from dagster_privrelease.orchestration import run_release
from dagster_privrelease.storage import ReleaseStore


def publish_one_group(
    snapshot: pd.DataFrame, spec: Spec, previous: PreviousRelease | None, rng: np.random.Generator
) -> Release:
    """Every tuple in group 1: k-anonymous for any k up to the table's size."""
    return build_release(snapshot, np.ones(len(snapshot), dtype=np.int64), spec, rng)


TOY = ModelDescriptor(
    name="toy_one_group",
    paper="none: a test double",
    params={"k": Param(int, minimum=2, maximum=1000, help="the fewest rows of the one group")},
    publish=publish_one_group,
    verify=verify_k_anonymity,
    bound=lambda params: Bound(values=2, tuples=int(params["k"])),
    across_releases=True,
    reads="nothing",
)


@pytest.fixture
def toy():
    with models.registered(TOY) as model:
        yield model


def raw(model: dict) -> dict:
    return {
        "name": "toy", "id": "pid", "sensitive": "disease",
        "quasi_identifiers": {"age": {"type": "numeric"}, "sex": {"type": "categorical"}},
        "model": model,
    }


def people(ids: range, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = len(ids)
    return pd.DataFrame({
        "pid": list(ids), "age": rng.integers(20, 70, n), "sex": rng.choice(["F", "M"], n),
        "disease": rng.choice(["flu", "hiv", "cold", "ulcer"], n),
    })


def test_an_unregistered_model_is_refused_by_the_spec():
    with pytest.raises(SpecError, match="unknown model 'toy_one_group'"):
        parse_spec(raw({"name": "toy_one_group", "k": 3}))


def test_a_registered_model_gets_its_parameters_validated(toy):
    assert parse_spec(raw({"name": "toy_one_group", "k": 3})).model.params == {"k": 3}
    with pytest.raises(SpecError, match="model.k: must be at most 1000"):
        parse_spec(raw({"name": "toy_one_group", "k": 5000}))
    with pytest.raises(SpecError, match=r"unknown parameter\(s\) \['m'\]"):
        parse_spec(raw({"name": "toy_one_group", "k": 3, "m": 2}))
    assert "toy_one_group" in models.names()


def test_a_registered_model_publishes_and_is_judged_by_the_pipeline(toy, tmp_path):
    store = ReleaseStore(tmp_path / "toy.duckdb", parse_spec(raw({"name": "toy_one_group", "k": 3})))
    first = pipeline.release_next(store, people(range(40)))
    second = pipeline.release_next(store, people(range(10, 50), seed=1))
    assert (first["groups"], second["groups"]) == (1, 1)
    assert first["checks"]["k_anonymity"] and second["checks"]["k_anonymity"]
    history = store.history()
    assert all(r.ok for r in verify_history(history))
    assert {r.name for r in attack_history(history)} >= {"intersection", "forward"}


def test_a_registered_model_runs_through_dagster_and_the_cli(toy, tmp_path):
    spec_path = tmp_path / "toy.yaml"
    # the frame's ids are integers: the CSV's are read as integers too (text unless the spec says so)
    spec_path.write_text(yaml.safe_dump({**raw({"name": "toy_one_group", "k": 3}), "csv": {"types": {"pid": "integer"}}}))
    db = tmp_path / "toy.duckdb"
    row = run_release(spec_path, db, people(range(30)))
    assert (row["release_id"], row["model"], row["groups"]) == (1, "toy_one_group", 1)
    csv = tmp_path / "t2.csv"
    people(range(5, 35), seed=2).to_csv(csv, index=False)
    runner = CliRunner()
    released = runner.invoke(cli.app, ["release", "--spec", str(spec_path), "--db", str(db), "--snapshot", str(csv)])
    assert released.exit_code == 0, released.output
    verified = runner.invoke(cli.app, ["verify", "--spec", str(spec_path), "--db", str(db)])
    assert verified.exit_code == 0, verified.output
    assert ReleaseStore(db, parse_spec(raw({"name": "toy_one_group", "k": 3}))).release_ids() == [1, 2]


def test_a_model_naming_an_unknown_attack_is_refused_at_registration():
    leaky = dataclasses.replace(TOY, name="toy_skips", skipped_attacks={"no_such_attack": "why not"})
    with pytest.raises(ValueError, match=r"model 'toy_skips': skipped_attacks names unknown attack\(s\) "
                                         r"\['no_such_attack'\]"):
        models.register(leaky)
    assert models.find("toy_skips") is None


def test_a_param_bound_is_a_keyword_never_a_positional_default():
    with pytest.raises(TypeError):
        Param(int, 2)  # pyright: ignore[reportCallIssue]  # reads as a default: the minimum is minimum=2
    param = Param(int, minimum=2)
    assert (param.minimum, param.default) == (2, None)
