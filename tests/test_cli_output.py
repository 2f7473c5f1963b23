"""What the ``privrelease`` command prints, as a person reads it: ``show`` one line per release with long
parameters summarised (``--json`` for everything), help texts without markup whose summaries fit one line, attack
tables that say what their counts are, and hints that fit the situation (a spec that is not the store's)."""

from __future__ import annotations

import json
import re
import typing

import duckdb
import pandas as pd
import pytest
import typer
import yaml
from rich.console import Console
from typer.core import TyperGroup

from dagster_privrelease import cli
from dagster_privrelease.core.judge.history import Report

from . import test_cli
from .test_cli import SPEC, released, run

#: The fixtures of ``test_cli``: its store files and its wide console.
files, wide_console = test_cli.files, test_cli.wide_console

#: m-Distinct-like update sets: 46 values, each with 10 others (Li-Zhou §VI-A, CUS of diameter 10).
UPDATE_SETS = {f"{v:03d}": [f"{(v + d) % 46:03d}" for d in range(1, 11)] for v in range(46)}


def _long_params_history(files, releases: int) -> None:
    """``releases`` more manifest rows in the store of ``released``, each with the update sets as a parameter."""
    with duckdb.connect(str(files / "clinic.duckdb")) as con:
        for release_id in range(2, releases + 2):
            con.execute(
                "INSERT INTO published.manifest SELECT ?, 'm_distinct', ?, attributes, created_at, rows, groups, "
                "counterfeits, checks, utility FROM published.manifest WHERE release_id = 1",
                [release_id, json.dumps({"m": 4, "update_sets": UPDATE_SETS})],
            )


def test_show_is_one_line_per_release_and_json_has_everything(files):
    """Six releases, five with 46 update sets of 10 values each: ``show`` prints a bounded table (a line per
    release, the update sets by their size, no value of them), ``--json`` every field in full."""
    assert released(files).exit_code == 0
    _long_params_history(files, 5)
    shown = run("show", "--db", files / "clinic.duckdb")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert len(lines) <= 6 + 6, shown.output  # title, borders and header, then one line per release
    assert "update_sets=46 entries" in shown.output and "'001'" not in shown.output
    assert sum("m_distinct" in line for line in lines) == 5
    with pytest.MonkeyPatch.context() as narrow:  # a narrow terminal: still a line per release, numbers whole
        narrow.setattr(cli, "console", Console(width=100))
        squeezed = run("show", "--db", files / "clinic.duckdb").output.splitlines()
    assert len(squeezed) == len(lines) and all(len(line) <= 100 for line in squeezed), squeezed
    assert all(re.search(r"│ +4 │", line) for line in squeezed if "m_distinct" in line)  # rows, not cut
    printed = run("show", "--db", files / "clinic.duckdb", "--json")
    assert printed.exit_code == 0, printed.output
    rows = json.loads(printed.output)
    assert [r["release_id"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert rows[1]["params"]["update_sets"] == UPDATE_SETS and rows[0]["params"]["l"] == 2
    assert pd.Timestamp(rows[0]["created_at"]) <= pd.Timestamp.now()
    assert set(rows[0]) >= {"model", "attributes", "rows", "groups", "checks", "utility"}


def test_help_texts_have_no_markup_and_one_line_summaries():
    """Every command's help: no RST markup (double backticks), and a first paragraph of one line, which typer
    prints as the command's summary in ``privrelease --help`` (a paragraph broken over lines prints broken)."""
    group = typer.main.get_command(cli.app)
    assert isinstance(group, TyperGroup)
    assert set(group.commands) >= {"release", "record", "show", "verify", "attack", "discard", "demo"}
    for name, command in group.commands.items():
        shown = run(name, "--help")
        assert shown.exit_code == 0 and "``" not in shown.output, (name, shown.output)
        summary = (command.help or "").split("\n\n")[0]
        assert summary and "\n" not in summary, (name, summary)
    top = run("--help")
    assert "``" not in top.output
    for command in group.commands.values():  # each summary on one line of the command list, whole
        assert any((command.help or "").split("\n\n")[0][:40] in line for line in top.output.splitlines())


def test_demo_tables_are_the_registrys():
    """``--table`` offers exactly the demo registry's tables and ``all``; another name is refused, listing them."""
    from dagster_privrelease.demo import DEMOS

    assert typing.get_args(cli.DemoTable) == (*DEMOS, "all")
    refused = run("demo", "--table", "census", "--home", "unused")
    assert refused.exit_code == 2 and all(name in refused.output for name in DEMOS)


def test_a_spec_of_other_columns_is_named_as_the_wrong_spec(files):
    """``show --spec`` with a spec whose columns are not the store's: one line naming the spec, the differing
    columns on both sides and both ways out (the store's own spec, or a new store for a changed table)."""
    assert released(files).exit_code == 0
    other = dict(SPEC, name="ward", non_identifiers=["stay"])
    (files / "ward.yaml").write_text(yaml.safe_dump(other))
    result = run("show", "--db", files / "clinic.duckdb", "--spec", files / "ward.yaml")
    assert result.exit_code == 1
    (line,) = [x for x in result.stderr.splitlines() if x.strip()]
    assert "spec 'ward' does not match the store's history" in line
    assert "visits (non_identifier)" in line and "stay (non_identifier)" in line
    assert "pass the one the store was built with" in line


@pytest.mark.parametrize(("report", "found", "result"), [
    (Report("equivalence", True, pd.DataFrame({"kind": ["linked pair, no value disclosed"] * 1200}),
            {"bound": 4, "disclosed": 0}), "1,200 linked pair, no value disclosed", "holds"),
    (Report("intersection", False, pd.DataFrame({"size": [1, 2]}), {"bound": 4, "disclosed": 1}),
     "2 below the bound", "broken"),
    (Report("intersection", True, pd.DataFrame(), {"bound": 2, "below_bound": 5, "predating": 5}),
     "5 below the bound, 5 of them disclosed by a recorded release", "holds"),
    (Report("join", True, pd.DataFrame({"size": [1]}), {"bound": 2}),
     "1 below the bound, none breaking the guarantee", "holds"),
    (Report("critical", True, pd.DataFrame(), {"bound": 4, "attacked": 0}), "nobody below the bound", "holds"),
    (Report("m_invariance", True, pd.DataFrame(), {}), "no violation", "holds"),
])
def test_attack_tables_say_what_their_counts_are(report, found, result, capsys, monkeypatch):
    """The "found" column names what the rows are: linked pairs that disclose nothing are not "violations" beside
    "holds"; individuals below the bound of a broken attack are; a report that holds with rows says they break
    nothing. A skipped attack shows its reason, not a count."""
    monkeypatch.setattr(cli, "console", Console(width=200))
    cli._reports_table("attacks", [report, Report("sug", True, summary={"skipped": "not applicable: no CUS"})])
    out = capsys.readouterr().out
    assert cli._found_text(report) == found
    row = next(line for line in out.splitlines() if report.name in line)
    assert found[:16] in row and result in row  # the cell wraps a long text
    assert "violations" not in out
    skipped = next(line for line in out.splitlines() if "sug" in line)
    assert "skipped" in skipped and "not applicable: no CUS" in skipped and "skipped=" not in skipped
