"""The steps of a release as they run (``core.progress``): silent by default, one line per step when the CLI's
output is not a terminal, and the same steps in the Dagster run's event log."""

from __future__ import annotations

import io
import re

import dagster as dg
import pandas as pd
import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from dagster_privrelease import cli
from dagster_privrelease.core.progress import LineReporter, reporting, step
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.orchestration import run_release
from dagster_privrelease.pipeline import release_next
from dagster_privrelease.storage import ReleaseStore

SPEC = {
    "name": "ward",
    "id": "pid",
    "sensitive": "disease",
    "quasi_identifiers": {"age": {"type": "numeric"}, "zip": {"type": "numeric"}},
    "model": {"name": "m_invariance", "m": 2},
}
DISEASES = ["flu", "hiv", "gastritis", "dyspepsia"]
#: Two releases of 16 people with text ids (zero-padded): four leave, four arrive.
FIRST = pd.DataFrame({"pid": [f"p{i:03d}" for i in range(16)], "age": [20 + 3 * i for i in range(16)],
                      "zip": [10_000 + 7 * i for i in range(16)], "disease": DISEASES * 4})
SECOND = pd.concat([FIRST.iloc[4:], FIRST.iloc[:4].assign(pid=[f"p{i:03d}" for i in range(16, 20)])],
                   ignore_index=True)
#: The steps every m-invariance release reports (release 2: the model reads release 1), besides the attacks.
STEPS = ["staging", "model / previous signatures", "model / buckets", "model / split on local", "model / release table",
         "model", "judge / reading the history", "judge / verifiers", "judge / saving the memo", "judge",
         "expectations", "publication"]
#: Steps that end in this order (the candidate's two checks may run in either order).
ORDER = ["staging", "model / split on local", "model", "judge", "publication"]
LINE = re.compile(r"^(?P<name>[a-z_ /]+): \d+\.\d\d s$")


@pytest.fixture
def files(tmp_path):
    (tmp_path / "ward.yaml").write_text(yaml.safe_dump(SPEC))
    FIRST.to_csv(tmp_path / "first.csv", index=False)
    SECOND.to_csv(tmp_path / "second.csv", index=False)
    return tmp_path


def step_lines(text: str) -> list[str]:
    """The step names of the lines of ``text`` that read ``<step>: <seconds> s``."""
    return [m["name"] for m in map(LINE.match, text.splitlines()) if m]


def assert_release_steps(names: list[str]) -> None:
    """``names`` are one release's steps: each of ``STEPS`` once, every attack of the suite once, in run order."""
    attacks = [n for n in names if n.startswith("judge / attack ")]
    assert sorted(n for n in names if n not in attacks) == sorted(STEPS)
    assert "judge / attack intersection" in attacks and len(attacks) == len(set(attacks)) >= 2
    assert [n for n in names if n in ORDER] == ORDER


def test_steps_are_silent_by_default_and_nested_steps_are_named_by_both():
    heard: list[str] = []
    with step("outside"):  # nobody listens
        pass
    with reporting(LineReporter(heard.append)), reporting(LineReporter(heard.append)):  # two listeners
        with step("model"):
            with step("split"):
                pass
        with pytest.raises(ValueError), step("broken"):
            raise ValueError("a step that raised is not reported as finished")
    assert step_lines("\n".join(heard)) == ["model / split", "model / split", "model", "model"]


def test_cli_output_not_a_terminal_shows_one_line_per_step(files, monkeypatch):
    monkeypatch.setattr(cli, "console", Console(width=200, force_terminal=False))
    db = files / "ward.duckdb"
    for snapshot in ("first.csv", "second.csv"):
        result = CliRunner().invoke(cli.app, ["release", "--spec", str(files / "ward.yaml"), "--db", str(db),
                                              "--snapshot", str(files / snapshot)])
        assert result.exit_code == 0, result.output
    assert_release_steps(step_lines(result.output))
    assert "release 2 published" in result.output
    assert not any(pid in result.output for pid in SECOND["pid"])  # steps name what runs, never who


def test_dagster_run_log_has_the_step_lines(files):
    instance = dg.DagsterInstance.ephemeral()
    run_release(files / "ward.yaml", files / "ward.duckdb", FIRST, instance=instance)
    heard: list[str] = []
    row = run_release(files / "ward.yaml", files / "ward.duckdb", SECOND, instance=instance,
                      progress=LineReporter(heard.append))
    logged = [e.user_message for e in instance.all_logs(row["run_id"]) if e.dagster_event is None]
    names = step_lines("\n".join(logged))
    assert names == step_lines("\n".join(heard))  # the run log and the caller's reporter hear the same steps
    assert_release_steps(names)


def test_cli_on_a_terminal_prints_each_finished_step_under_a_status_line(files, monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=screen, width=200, force_terminal=True))
    result = CliRunner().invoke(cli.app, ["release", "--spec", str(files / "ward.yaml"), "--db",
                                          str(files / "ward.duckdb"), "--snapshot", str(files / "first.csv")])
    assert result.exit_code == 0, result.output
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())  # without the terminal's escape codes
    assert re.search(r"✓ model / split on local: \d+\.\d\d s", shown) and re.search(r"✓ publication: \d+\.\d\d s", shown)
    assert "release 1 published" in shown


def test_release_next_reports_its_steps_to_the_reporter_passed_in(files):
    store = ReleaseStore(files / "ward.duckdb", load_spec(files / "ward.yaml"))
    assert release_next(store, FIRST)["outcome"] == "published"  # silent: no reporter
    heard: list[str] = []
    assert release_next(store, SECOND, progress=LineReporter(heard.append))["outcome"] == "published"
    names = step_lines("\n".join(heard))
    assert len(names) == len(heard)  # every line reads ``<step>: <seconds> s``
    assert_release_steps([*names, "expectations"])  # the library's release runs no Great Expectations check
