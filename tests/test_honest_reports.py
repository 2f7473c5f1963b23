"""Issue #11 item 8: reports say what they count. The equivalence attack names its linked pairs (most disclose
nothing) rather than calling them violations; ``verify`` and ``attack`` judge a history with the model and
parameters it was published with (``published.manifest``) and refuse a spec that contradicts them."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import yaml
from typer.testing import CliRunner

from dagster_privrelease import cli, pipeline
from dagster_privrelease.core.judge import attacks
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.storage import ReleaseStore

from .fixtures import taxonomy_paper, xiao_tao


def test_equivalence_names_its_linked_pairs():
    held = attacks.equivalence_attack(xiao_tao.history_1b_3a())  # 2-invariant: links, no disclosure
    assert held.ok and held.summary["disclosed"] == 0
    assert held.summary["linked_pairs_checked"] >= held.summary["linked_pairs_below_bound"] == len(held.violations) > 0
    assert not {"instances", "below_bound"} & set(held.summary)
    assert set(held.violations["kind"]) == {"linked pair, no value disclosed"}
    broken = attacks.equivalence_attack(taxonomy_paper.figure_3())
    assert not broken.ok and "disclosing link" in set(broken.violations["kind"])
    assert (broken.violations["kind"] == "disclosing link").sum() == broken.summary["disclosed"]


def table(ids) -> pd.DataFrame:
    ids = np.asarray(ids, dtype=np.int64)
    return pd.DataFrame({"pid": ids, "age": 20 + (ids * 37) % 60, "sex": np.where(ids % 2 == 0, "F", "M"),
                         "disease": np.array(["flu", "hiv", "acne", "asthma"])[ids % 4]})


def spec_file(path, model: dict):
    raw = {"name": "clinic", "id": "pid", "sensitive": "disease",
           "quasi_identifiers": {"age": {"type": "numeric"}, "sex": {"type": "categorical"}}, "model": model}
    path.write_text(yaml.safe_dump(raw))
    return raw


def run(*args):
    return CliRunner().invoke(cli.app, [str(a) for a in args])


def test_verify_and_attack_judge_with_the_published_parameters(tmp_path):
    """An m = 3 history: a spec saying m = 4 (or another model) is refused, naming the parameter and both values,
    instead of reporting "m_uniqueness broken"; the spec it was published with verifies."""
    db = tmp_path / "m.duckdb"
    raw = spec_file(tmp_path / "m3.yaml", {"name": "m_invariance", "m": 3})
    store = ReleaseStore(db, parse_spec(raw))
    for ids in (range(60), range(12, 72)):
        assert pipeline.release_next(store, table(ids))["outcome"] == "published"
    spec_file(tmp_path / "m4.yaml", {"name": "m_invariance", "m": 4})
    spec_file(tmp_path / "k.yaml", {"name": "k_anonymity", "k": 3})
    for command in ("verify", "attack"):
        ok = run(command, "--spec", tmp_path / "m3.yaml", "--db", db)
        assert ok.exit_code == 0, ok.output + ok.stderr
        wrong = run(command, "--spec", tmp_path / "m4.yaml", "--db", db)
        assert wrong.exit_code == 1 and "broken" not in wrong.output, wrong.output
        assert "model.m: m=4 in the spec, m=3 in the manifest" in wrong.stderr, wrong.stderr
        assert "release 2 of" in wrong.stderr and "set m: 3" in wrong.stderr
        other = run(command, "--spec", tmp_path / "k.yaml", "--db", db)
        assert other.exit_code == 1 and "published with model 'm_invariance'" in other.stderr, other.stderr


def test_the_cli_table_says_what_the_equivalence_rows_are(tmp_path):
    db = tmp_path / "m.duckdb"
    raw = spec_file(tmp_path / "m2.yaml", {"name": "m_invariance", "m": 2})
    store = ReleaseStore(db, parse_spec(raw))
    for ids in (range(40), range(4, 44), range(8, 48)):
        pipeline.release_next(store, table(ids))
    result = run("attack", "--spec", tmp_path / "m2.yaml", "--db", db, "--attack", "equivalence")
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if "equivalence" in line)
    assert "holds" in line and "linked_pairs_checked=" in line and "disclosed=0" in line, line
    assert re.search(r"│ [\d,]+ linked pair, no value disclosed │", line), line
    skipped = run("attack", "--spec", tmp_path / "m2.yaml", "--db", db, "--attack", "forward")
    line = next(line for line in skipped.output.splitlines() if "forward" in line)
    assert "skipped" in line and "holds" not in line, line
