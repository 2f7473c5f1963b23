"""The ``privrelease`` command on small synthetic tables (typer's CliRunner, files under tmp_path)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from dagster_privrelease import cli
from dagster_privrelease.core.models import attack_history
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.core.stream import split_base_pool, stream
from dagster_privrelease.storage import ReleaseStore

RESOURCES = Path(__file__).resolve().parents[1] / "resources"

SPEC = {
    "name": "clinic",
    "id": "pid",
    "sensitive": "disease",
    "quasi_identifiers": {"age": {"type": "numeric"}, "sex": {"type": "categorical"}},
    "non_identifiers": ["visits"],
    "model": {"name": "l_diversity", "l": 2},
}

#: Two releases in which Alice (pid 1) stays in a group with Bob, then with Erin: the intersection of her two
#: groups' sensitive values is {flu} (Xiao-Tao §1, the attack that motivates m-invariance). Bob leaving is a
#: critical absence, Erin arriving a critical addition.
FIRST = pd.DataFrame({"pid": [1, 2, 3, 4], "age": [20, 21, 60, 61], "sex": ["F", "M", "F", "M"],
                      "visits": [1, 2, 3, 4], "disease": ["flu", "hiv", "flu", "hiv"]})
THIRD = pd.DataFrame({"pid": range(6), "age": [20, 21, 22, 60, 61, 62], "sex": ["F", "M"] * 3,
                      "visits": range(6), "disease": ["flu", "hiv", "gastritis"] * 2})
SECOND = pd.DataFrame({"pid": [1, 5, 3, 4], "age": [20, 22, 60, 61], "sex": ["F", "F", "F", "M"],
                       "visits": [1, 5, 3, 4], "disease": ["flu", "gastritis", "flu", "hiv"]})


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Rich tables 200 columns wide, so that names are never wrapped in the captured output."""
    monkeypatch.setattr(cli, "console", Console(width=200))
    monkeypatch.setattr(cli, "errors", Console(width=200, stderr=True))


@pytest.fixture
def files(tmp_path):
    spec = tmp_path / "clinic.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    FIRST.to_csv(tmp_path / "first.csv", index=False)
    THIRD.to_csv(tmp_path / "third.csv", index=False)
    SECOND.astype({"pid": str, "visits": str}).to_parquet(tmp_path / "second.parquet")  # as the CSVs read
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(cli.app, [str(a) for a in args])


def released(files):
    db = files / "clinic.duckdb"
    return run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "first.csv")


def test_release_then_show(files):
    db = files / "clinic.duckdb"
    first = released(files)
    assert first.exit_code == 0, first.output
    assert "release 1 published" in first.output and "l_diversity" in first.output
    second = run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "second.parquet")
    assert second.exit_code == 0, second.output
    assert "release 2 published" in second.output
    assert "intersection failed" in second.output  # reported, not blocking, for the l-diversity baseline
    shown = run("show", "--db", db)
    assert shown.exit_code == 0, shown.output
    assert "2 release(s)" in shown.output and "l=2" in shown.output and "age, sex" in shown.output
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT release_id, rows FROM published.manifest ORDER BY 1").fetchall() == [(1, 4), (2, 4)]
    assert run("show", "--db", db, "--spec", files / "clinic.yaml").exit_code == 0


def test_attack_exits_non_zero_on_disclosure(files):
    db = files / "clinic.duckdb"
    released(files)
    assert run("attack", "--spec", files / "clinic.yaml", "--db", db).exit_code == 0  # one release: no disclosure
    run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "second.parquet")
    result = run("attack", "--spec", files / "clinic.yaml", "--db", db, "--attack", "intersection")
    assert result.exit_code == 1
    assert "intersection" in result.output and "broken" in result.output and "disclosed=1" in result.output
    unknown = run("attack", "--spec", files / "clinic.yaml", "--db", db, "--attack", "telepathy")
    assert unknown.exit_code == 2 and "telepathy" in unknown.output


def test_verify_exits_non_zero_when_a_guarantee_is_broken(files):
    db = files / "clinic.duckdb"
    released(files)
    result = run("verify", "--spec", files / "clinic.yaml", "--db", db)
    assert result.exit_code == 0, result.output
    assert "l_diversity" in result.output and "holds" in result.output
    with duckdb.connect(str(db)) as con:  # tamper: every published row says flu, so no group is 2-diverse
        con.execute("UPDATE published.release SET disease = 'flu'")
    result = run("verify", "--spec", files / "clinic.yaml", "--db", db)
    assert result.exit_code == 1
    assert "broken" in result.output


def test_refusals_exit_non_zero_with_the_reason(files):
    db = files / "clinic.duckdb"
    bad = FIRST.copy()
    bad.loc[2, "pid"] = 1
    bad.to_csv(files / "bad.csv", index=False)
    result = run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "bad.csv")
    assert result.exit_code == 1
    assert "error:" in result.stderr and "duplicate id(s) ['1']" in result.stderr
    (files / "broken.parquet").write_text("not parquet")
    result = run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "broken.parquet")
    assert result.exit_code == 1 and "cannot read the snapshot as PARQUET" in result.stderr
    result = run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "first.csv",
                 "--attributes", "age,height")
    assert result.exit_code == 1 and "['height'] are not quasi-identifiers" in result.stderr
    result = run("verify", "--spec", files / "clinic.yaml", "--db", files / "absent.duckdb")
    assert result.exit_code == 2 and "no release store there" in result.output
    result = run("show", "--db", db)
    assert result.exit_code == 0 and "0 release(s)" in result.output  # nothing was published


def test_a_refusal_never_blocks_the_next_release(files):
    """l=3 on two sensitive values is refused; the corrected rows publish at once, with no discard. A refused
    release leaves its snapshot staged (``discard`` can still drop it) but never blocks the next one."""
    db = files / "clinic.duckdb"
    strict = dict(SPEC, model={"name": "l_diversity", "l": 3})
    (files / "strict.yaml").write_text(yaml.safe_dump(strict))
    refused = run("release", "--spec", files / "strict.yaml", "--db", db, "--snapshot", files / "first.csv")
    assert refused.exit_code == 1 and "l=3 is larger than the 2 distinct values" in refused.stderr
    assert run("discard", "--spec", files / "strict.yaml", "--db", db, "--release", "1").exit_code == 0
    refused = run("release", "--spec", files / "strict.yaml", "--db", db, "--snapshot", files / "first.csv")
    assert refused.exit_code == 1
    result = run("release", "--spec", files / "strict.yaml", "--db", db, "--snapshot", files / "third.csv")
    assert result.exit_code == 0, result.output + result.stderr
    assert "release 1 published" in result.output
    bad = run("release", "--spec", files / "strict.yaml", "--db", db, "--snapshot", files / "third.csv",
              "--attributes", "age,height")
    assert bad.exit_code == 1 and "['height'] are not quasi-identifiers" in bad.stderr
    worse = THIRD.assign(pid=THIRD["pid"] + 10, disease="flu")  # not 3-diverse: refused as release 2
    worse.to_csv(files / "worse.csv", index=False)
    assert run("release", "--spec", files / "strict.yaml", "--db", db, "--snapshot", files / "worse.csv").exit_code == 1
    fixed = THIRD.assign(pid=THIRD["pid"] + 10)
    fixed.to_csv(files / "fixed.csv", index=False)
    result = run("release", "--spec", files / "strict.yaml", "--db", db, "--snapshot", files / "fixed.csv")
    assert result.exit_code == 0 and "release 2 published" in result.output, result.output + result.stderr


def test_the_same_release_twice_publishes_once(files):
    """A user who does not know whether a run published runs it again: nothing more is published, exit 0."""
    db = files / "clinic.duckdb"
    assert released(files).exit_code == 0
    again = released(files)
    assert again.exit_code == 0, again.output + again.stderr
    assert "unchanged" in again.output and "release 1 stands" in again.output
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT release_id FROM published.manifest").fetchall() == [(1,)]
    other = run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "second.parquet")
    assert other.exit_code == 0 and "release 2 published" in other.output, other.output + other.stderr


def test_refusals_print_one_message_and_no_stack_trace(files, capfd, monkeypatch):
    """A bad snapshot, a model that cannot publish and a failed blocking check each print one ``error:`` line:
    no Dagster log, no stack trace (the run's event log keeps them)."""
    from dagster_privrelease import pipeline
    from dagster_privrelease.core.judge.history import Report

    db = files / "clinic.duckdb"
    bad = FIRST.assign(pid=[1, 2, 1, 4])
    bad.to_csv(files / "bad.csv", index=False)
    strict = dict(SPEC, model={"name": "l_diversity", "l": 3})
    (files / "strict.yaml").write_text(yaml.safe_dump(strict))
    judge = pipeline.judge

    def broken(store, release_id):  # the guarantee fails: the blocking check stops publication
        failed = Report("l_diversity", False, pd.DataFrame({"release_id": [1], "group_id": [0]}), {"blocking": True})
        return [*judge(store, release_id), failed]

    cases = [
        (files / "clinic.yaml", "bad.csv", "duplicate id(s) ['1']", judge),
        (files / "strict.yaml", "first.csv", "l=3 is larger", judge),
        (files / "clinic.yaml", "first.csv", "blocking check(s) failed: guarantee: l_diversity: 1 violation(s)",
         broken),
    ]
    for spec, snapshot, reason, judging in cases:
        monkeypatch.setattr(pipeline, "judge", judging)
        capfd.readouterr()
        result = run("release", "--db", db, "--spec", spec, "--snapshot", files / snapshot)
        out, err = capfd.readouterr()
        text = "\n".join([result.output, result.stderr, out, err])
        assert result.exit_code == 1, text
        assert reason in result.stderr, text
        assert "Traceback" not in text and "Stack Trace" not in text and "dagster" not in text.lower(), text
        assert len([line for line in text.splitlines() if line.strip()]) <= 3, text
    assert run("show", "--db", db).exit_code == 0


#: Ids that cannot be mistaken for a count or a group: ``p-00001`` ...
IDS = re.compile(r"p-\d{5}")


def test_no_person_id_leaves_the_private_schema(files, tmp_path):
    """Two releases of the l-diversity baseline whose attacks disclose (reported, not blocking), published through
    Dagster: no id of the table appears anywhere in the run's event log (every event, its metadata, its log
    message, the instance's files), nor in what ``release``, ``verify`` and ``attack`` print."""
    from dagster_privrelease.orchestration import run_release

    db = files / "strings.duckdb"
    named = [frame.assign(pid=[f"p-{i:05d}" for i in frame["pid"]]) for frame in (FIRST, SECOND)]
    for frame, name in zip(named, ("first.csv", "second.csv"), strict=True):
        frame.to_csv(files / name, index=False)
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        runs = [run_release(files / "clinic.yaml", db, frame, instance=instance)["run_id"] for frame in named]
        logs = [record for run_id in runs for record in instance.all_logs(run_id)]
        assert any("intersection/violations by group" in str(r.dagster_event) for r in logs)  # it did disclose
    assert ReleaseStore(db, load_spec(files / "clinic.yaml")).history().snapshots["pid"].str.match(IDS).all()
    events = "\n".join(dg.serialize_value(r) for r in logs)
    assert not IDS.findall(events)
    stored = [p.read_bytes().decode("latin-1") for p in (tmp_path / "dagster").rglob("*") if p.is_file()]
    assert stored and not any(IDS.search(text) for text in stored)
    other = files / "other.duckdb"
    printed = [run("release", "--spec", files / "clinic.yaml", "--db", other, "--snapshot", files / name)
               for name in ("first.csv", "second.csv")]
    printed += [run(command, "--spec", files / "clinic.yaml", "--db", other) for command in ("verify", "attack")]
    assert printed[-1].exit_code == 1  # the attack discloses
    for result in printed:
        assert not IDS.findall(result.output + result.stderr), result.output


def test_demo_publishes_adult_through_dagster(adult, tmp_path, monkeypatch):
    """The demo runs the example code location: sensor ticks, release runs on a persistent instance the UI can
    open, m-invariance; a smaller stream than the default keeps the test short."""
    from dagster_privrelease import demo

    monkeypatch.setitem(demo.DEMOS, "adult", demo.Demo("adult", lambda: adult, base=3_000, batch=200,
                                                       update_fraction=0.01))
    stale = tmp_path / "adult" / "releases.duckdb"
    stale.parent.mkdir()
    stale.write_text("an earlier demo")  # the demo starts over
    result = run("demo", "--home", tmp_path, "--releases", "2")
    assert result.exit_code == 0, result.output
    assert "dagster dev -w workspace.yaml" in result.output and str(stale) in result.output
    for i in (1, 2):  # a line per release, although the output is not a terminal
        assert f"adult: release {i} of 2 published" in result.output
    hints = [line for line in result.output.splitlines() if "open the UI" in line or "judge it again" in line]
    for line in hints:  # commands that work as printed: absolute paths of this environment's executables
        command = line.split(": ", 1)[1].split(" && ")[-1].split()
        executable = next(word for word in command if "=" not in word)
        assert Path(executable).is_absolute() and Path(executable).exists(), line
    assert len(hints) == 2
    with duckdb.connect(str(stale), read_only=True) as con:
        query = "SELECT release_id, model, rows - counterfeits FROM published.manifest ORDER BY 1"
        rows = con.execute(query).fetchall()
    assert rows == [(1, "m_invariance", 3_000), (2, "m_invariance", 3_000)]
    with dg.DagsterInstance.from_config(str(tmp_path / ".dagster")) as instance:
        runs = instance.get_runs(dg.RunsFilter(job_name="adult_release"))
        assert sorted(r.tags["dagster/partition"] for r in runs) == ["000001", "000002"]
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        # the sensor's ticks, where the UI reads them (the location of workspace.yaml, the sensor's name)
        selector = demo.sensor_selector("adult_source_changed").get_id()
        ticks = instance.get_ticks(selector, selector)
        assert len(ticks) == 2 and all(t.status.value == "SUCCESS" for t in ticks)
        assert sorted(run_id for t in ticks for run_id in t.run_ids) == sorted(r.run_id for r in runs)


@pytest.mark.slow
@pytest.mark.realdata
def test_census_kdd_stream_of_twenty_releases_through_the_cli(census_kdd, tmp_path):
    """Xiao-Tao's protocol on Census-KDD workers (T(1) 20,000 rows, r = 2,000, m = 4, the 7 QIs of
    resources/census_kdd.yaml): 20 releases published by ``privrelease release``, i.e. through the Dagster
    release job and its blocking checks, and then judged again: ``verify`` and ``attack`` on the store, and the
    intersection attack with every candidate set recomputed rather than read back from the store."""
    spec_path = RESOURCES / "census_kdd.yaml"
    spec = load_spec(spec_path)
    rng = np.random.default_rng(spec.seed)
    base, pool = split_base_pool(census_kdd[spec.columns], 20_000, rng)
    db = tmp_path / "census.duckdb"
    for i, snapshot in enumerate(stream(base, pool, 2_000, 20, rng), start=1):
        path = tmp_path / f"t{i}.parquet"
        snapshot.to_parquet(path)
        result = run("release", "--spec", spec_path, "--db", db, "--snapshot", path)
        assert result.exit_code == 0, (i, result.output, result.stderr)
    assert run("verify", "--spec", spec_path, "--db", db).exit_code == 0
    assert run("attack", "--spec", spec_path, "--db", db).exit_code == 0
    history = ReleaseStore(db, spec).history()
    assert history.release_ids == list(range(1, 21))
    (fresh,) = attack_history(dataclasses.replace(history, candidate_sets={}, memo={}), ["intersection"])
    assert fresh.ok and fresh.summary["attacked"] > 20_000 and fresh.summary["min_candidates"] >= 4


def one_error_line(result) -> str:
    """The one ``error:`` line a refusal prints (exit 1, no traceback)."""
    lines = [line for line in (result.output + result.stderr).splitlines() if line.strip()]
    assert result.exit_code == 1 and "Traceback" not in result.output + result.stderr, result.output
    assert len(set(lines)) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_a_csv_is_read_as_written(files):
    """Ids ``007``, ``07``, ``7``, ``0007`` are four people and ``None``, ``NA`` are diseases; a column named twice
    is refused naming it."""
    db = files / "padded.duckdb"
    (files / "padded.csv").write_text("pid,age,sex,visits,disease\n007,20,F,1,None\n07,21,M,2,NA\n7,60,F,3,None\n"
                                      "0007,61,M,4,NA\n")
    result = run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "padded.csv")
    assert result.exit_code == 0, result.output + result.stderr
    assert "release 1 published" in result.output
    stored = ReleaseStore(db, load_spec(files / "clinic.yaml")).snapshot(1)
    assert stored is not None and sorted(stored["pid"]) == ["0007", "007", "07", "7"]
    assert sorted(stored["disease"]) == ["NA", "NA", "None", "None"]
    again = run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot", files / "padded.csv")
    assert again.exit_code == 0 and "unchanged" in again.output
    (files / "twice.csv").write_text("pid,age,sex,age,visits,disease\np1,20,F,21,1,flu\np2,60,M,61,2,hiv\n")
    line = one_error_line(run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot",
                              files / "twice.csv"))
    assert line == f"error: {files / 'twice.csv'}: column(s) ['age'] named more than once; a snapshot names each " \
                   "column once"
    (files / "forty.csv").write_text("pid,age,sex,visits,disease\np1,20,F,1,flu\np2,forty,M,2,hiv\n")
    line = one_error_line(run("release", "--spec", files / "clinic.yaml", "--db", db, "--snapshot",
                              files / "forty.csv"))
    assert "column 'age', row 2 (line 3)" in line and "p2" not in line and "forty" not in line.replace("forty.csv", "")
    assert ReleaseStore(db, load_spec(files / "clinic.yaml")).release_ids() == [1]


def test_a_bad_yaml_spec_is_one_line_naming_file_line_and_column(files):
    db = files / "yaml.duckdb"
    malformed = files / "malformed.yaml"
    malformed.write_text("name: clinic\nid: pid\n sensitive: disease\n")
    line = one_error_line(run("release", "--spec", malformed, "--db", db, "--snapshot", files / "first.csv"))
    assert line.startswith(f"error: {malformed}: not valid YAML at line 3, column ")
    twice = files / "twice.yaml"
    twice.write_text(yaml.safe_dump(SPEC) + "id: visits\n")
    line = one_error_line(run("release", "--spec", twice, "--db", db, "--snapshot", files / "first.csv"))
    assert "key 'id' is written twice in one mapping (first at line" in line and str(twice) in line
    assert not db.exists()
