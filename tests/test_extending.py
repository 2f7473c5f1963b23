"""The three hooks added from outside the package, through its public API only (``docs/extending.md``): a model,
an attack and a source, each declared in this test module, registered, and run through a release."""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
import sys
from collections.abc import Iterator

import dagster as dg
import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import dagster_privrelease as pr
from dagster_privrelease import cli, pipeline
from dagster_privrelease.core.judge import attack_registry
from dagster_privrelease.core.judge.verifiers import verify_k_anonymity
from dagster_privrelease.core.models import registry
from dagster_privrelease.orchestration.partitions import partition_key

RAW_SPEC = {
    "name": "clinic", "id": "pid", "sensitive": "disease",
    "quasi_identifiers": {"age": {"type": "numeric"}, "sex": {"type": "categorical"}},
}


def people(first: int, n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` people with text ids ``p001``...: the rows of one snapshot."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "pid": [f"p{i:03d}" for i in range(first, first + n)], "age": rng.integers(20, 70, n),
        "sex": rng.choice(["F", "M"], n), "disease": rng.choice(["flu", "hiv", "cold", "ulcer"], n),
    })


def test_the_public_api_names_resolve_and_importing_it_loads_no_dagster():
    assert all(getattr(pr, name) is not None for name in pr.__all__)
    assert pr.register is registry.register and pr.register_attack is attack_registry.register
    code = "import sys, dagster_privrelease; print(sorted({'dagster', 'duckdb'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------------------------------------------- a model


def publish_one_group(snapshot: pd.DataFrame, spec: pr.Spec, previous: pr.PreviousRelease | None,
                      rng: np.random.Generator) -> pr.Release:
    """Every tuple in group 1: k-anonymous for any k up to the table's size."""
    return pr.build_release(snapshot, np.ones(len(snapshot), dtype=np.int64), spec, rng)


ONE_GROUP = pr.ModelDescriptor(
    name="one_group",
    paper="none: an example",
    params={"k": pr.Param(int, minimum=2, maximum=1000, help="the fewest rows of the one group")},
    publish=publish_one_group,
    verify=verify_k_anonymity,
    bound=lambda params: pr.Bound(values=2, tuples=int(params["k"])),
    reads="nothing",
)


# --------------------------------------------------------------------------------------------------- an attack


def shrinking_table(history: pr.History, bound: pr.Bound) -> pr.Report:
    """An adversary who learns something whenever the table shrinks: fails when a release has fewer rows than
    the one before it (a toy, to show the shape: ``(History, Bound) -> Report``)."""
    sizes = [len(history.release(j)) for j in history.release_ids]
    shrunk = sum(b < a for a, b in itertools.pairwise(sizes))
    return pr.Report("shrinking_table", shrunk == 0, summary={"releases": len(sizes), "shrunk": shrunk})


@pytest.fixture
def one_group() -> Iterator[pr.ModelDescriptor]:
    model = pr.register(ONE_GROUP)
    yield model
    registry.unregister(model.name)


@pytest.fixture
def shrinking() -> Iterator[pr.Attack]:
    attack = pr.register_attack(pr.Attack("shrinking_table", shrinking_table))
    yield attack
    attack_registry.unregister(attack.name)


def store_of(tmp_path, model: dict) -> pr.ReleaseStore:
    spec_path = tmp_path / "clinic.yaml"
    spec_path.write_text(yaml.safe_dump({**RAW_SPEC, "model": model}))
    return pr.ReleaseStore(tmp_path / "clinic.duckdb", pr.load_spec(spec_path))


def test_a_model_from_outside_publishes_through_the_pipeline(tmp_path, one_group):
    store = store_of(tmp_path, {"name": "one_group", "k": 3})
    first = pipeline.release_next(store, people(0, 40))
    second = pipeline.release_next(store, people(10, 40, seed=1))
    assert (first["groups"], second["groups"]) == (1, 1)
    assert first["checks"]["k_anonymity"] and second["checks"]["k_anonymity"]
    assert store.release_ids() == [1, 2]


def test_an_attack_from_outside_is_run_by_the_judge_and_blocks(tmp_path, one_group, shrinking):
    store = store_of(tmp_path, {"name": "one_group", "k": 3})
    assert pipeline.release_next(store, people(0, 40))["checks"]["shrinking_table"]
    alone = CliRunner().invoke(cli.app, ["attack", "--spec", str(tmp_path / "clinic.yaml"), "--db",
                                         str(tmp_path / "clinic.duckdb"), "--attack", "shrinking_table"])
    assert alone.exit_code == 0 and "shrinking_table" in alone.output, alone.output
    with pytest.raises(pr.NotPublishable, match="shrinking_table"):
        pipeline.release_next(store, people(0, 30))
    assert store.release_ids() == [1]  # nothing published by the refusal


def test_a_model_may_skip_an_attack_from_outside(tmp_path, one_group, shrinking):
    pr.register(dataclasses.replace(ONE_GROUP, skipped_attacks={"shrinking_table": "the one group hides sizes"}))
    store = store_of(tmp_path, {"name": "one_group", "k": 3})
    pipeline.release_next(store, people(0, 40))
    assert pipeline.release_next(store, people(0, 30))["checks"]["shrinking_table"]  # reported as skipped


# ---------------------------------------------------------------------------------------------------- a source


class CsvFileSource:
    """The current rows of one CSV file (ids and categories as text): a source of the ``Source`` protocol."""

    replays = False  # a snapshot is captured once, not rebuilt

    def __init__(self, path: str) -> None:
        self.path = path

    def fingerprint(self, spec: pr.Spec) -> pr.Fingerprint:
        rows = self.read(spec)
        return pr.Fingerprint(rows=len(rows), digest=str(pd.util.hash_pandas_object(rows, index=False).sum()))

    def read(self, spec: pr.Spec, position: int | None = None) -> pd.DataFrame:
        return pd.read_csv(self.path, dtype={spec.id: str, "sex": str, "disease": str})[list(spec.columns)]

    def next_key(self, keys: list[str], fingerprint: pr.Fingerprint) -> str:
        return partition_key(max((int(k) for k in keys), default=0) + 1)


def test_a_source_from_outside_feeds_the_release_job(tmp_path):
    csv = tmp_path / "clinic.csv"
    people(0, 40).to_csv(csv, index=False)
    spec_path = tmp_path / "clinic.yaml"
    spec_path.write_text(yaml.safe_dump({**RAW_SPEC, "model": {"name": "k_anonymity", "k": 4}}))
    defs = pr.release_definitions(spec_path, tmp_path / "clinic.duckdb", CsvFileSource(str(csv)))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("clinic_releases", ["000001"])
    result = defs.resolve_job_def("clinic_release").execute_in_process(partition_key="000001", instance=instance)
    assert result.success
    store = pr.ReleaseStore(tmp_path / "clinic.duckdb", pr.load_spec(spec_path))
    assert store.release_ids() == [1]
    assert sorted(store.snapshot(1)["pid"]) == [f"p{i:03d}" for i in range(40)]
