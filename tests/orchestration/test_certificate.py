"""The release certificate (``orchestration.certificate``, ``privrelease report``), rendered in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
from html import escape
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dagster_privrelease import cli, pipeline
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.orchestration.certificate import write_certificate
from dagster_privrelease.storage import ReleaseStore
from dagster_privrelease.testing.contract import CLINIC, clinic_people

from ..chromium import render

SPEC = {**CLINIC, "name": "clinic", "model": {"name": "m_invariance", "m": 2}}
#: The guarantee sentence of m-invariance with m = 2, written here from Xiao-Tao Def. 4 (what the UI shows too).
GUARANTEE = ("m-invariance (Xiao & Tao), m = 2: every published group holds at least 2 distinct values of {sensitive}, "
             "and a person keeps their group's signature in every release they appear in.")


def stream_store(path: Path) -> Path:
    """Three m-invariance releases of 30 people with text ids (``p000``...): four leave and four arrive each time;
    release 3 needs counterfeits (seed 1)."""
    rng = np.random.default_rng(1)
    people = clinic_people(40, rng)
    people.insert(0, "pid", [f"p{i:03d}" for i in range(40)])
    store = ReleaseStore(path, parse_spec(SPEC))
    with store.session():
        for j in range(3):
            pipeline.release_next(store, people.iloc[4 * j: 30 + 4 * j])
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    """The stream's store, shared by the module's tests, which only read it."""
    return stream_store(tmp_path_factory.mktemp("certificate") / "clinic.duckdb")


def published(db: Path, sql: str) -> pd.DataFrame:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.sql(sql).df()


def test_the_certificate_loads_in_chromium_without_errors_and_shows_its_plots(db, tmp_path):
    (shown,) = render(write_certificate(db, 3, tmp_path / "release_3.html", parse_spec(SPEC)))
    assert shown.errors == []
    assert len(shown.plots) == 4  # LM, NCP, query error over the history; the group sizes
    assert all(b is not None and b["width"] > 100 and b["height"] > 100 for b in shown.plots)
    sizes = published(db, "SELECT count(*) AS n FROM published.release WHERE release_id = 3 GROUP BY group_id")
    assert len(shown.bars) == sizes["n"].nunique() and all(b is not None and b["height"] > 0 for b in shown.bars)


def test_the_certificate_says_what_the_published_tables_say_and_names_nobody(db, tmp_path):
    html = write_certificate(db, 3, tmp_path / "release_3.html", parse_spec(SPEC)).read_text()
    assert escape(GUARANTEE.format(sensitive=CLINIC["sensitive"])) in html
    verdicts = published(db, "SELECT name, passed, violations, summary FROM published.verdict WHERE release_id = 3")
    assert len(verdicts) >= 10
    for v in verdicts.itertuples():
        summary = json.loads(v.summary)
        word = "skipped" if summary.get("skipped") else "holds" if v.passed else "broken"
        row = re.search(rf"<tr><td>{v.name}</td>.*?</tr>", html)
        assert row and f">{word}<" in row.group(0) and f"<td>{v.violations}</td>" in row.group(0), v.name
    # the histogram from the release's rows, counted here independently: "<n> group(s) of <size> rows"
    sizes = published(db, "SELECT count(*) AS size FROM published.release WHERE release_id = 3 GROUP BY group_id")
    expected = {int(s): int(n) for s, n in sizes["size"].value_counts().items()}
    shown = {int(s): int(n) for n, s in re.findall(r"<title>(\d+) group\(s\) of (\d+) rows</title>", html)}
    assert shown == expected
    counterfeits = published(db, "SELECT sum(count) AS n FROM published.counterfeit WHERE release_id = 3")
    assert f"{int(counterfeits['n'][0])} counterfeit row(s)" in html
    ids = published(db, "SELECT DISTINCT pid FROM private.snapshot")["pid"]
    assert not [i for i in ids if i in html]
    assert "<script" not in html and "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_the_command_writes_the_certificate_and_refuses_in_one_line(db, tmp_path):
    copy = tmp_path / "clinic.duckdb"
    shutil.copy(db, copy)
    spec = tmp_path / "clinic.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    out = tmp_path / "certificates" / "release_2.html"
    runner = CliRunner()
    done = runner.invoke(cli.app, ["report", "--spec", str(spec), "--db", str(copy), "--release", "2", "-o", str(out)])
    assert done.exit_code == 0, done.output
    page = out.read_text()
    assert "clinic: release 2, m_invariance" in page and "its history: releases 1 to 2" in page
    refused = runner.invoke(cli.app, ["report", "--spec", str(spec), "--db", str(copy), "--release", "4", "-o", str(out)])
    assert refused.exit_code == 1
    assert refused.output.strip().splitlines() == [f"error: release 4 is not published in {copy} (published: 1..3)"]
