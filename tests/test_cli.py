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
from dagster_privrelease.core.judge.run import attack_history
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.core.stream import split_base_pool, stream
from dagster_privrelease.errors import SpecError, StoreError
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
    assert "error:" in result.stderr and "2 rows share 1 id(s) (rows 1, 3)" in result.stderr
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
        (files / "clinic.yaml", "bad.csv", "2 rows share 1 id(s) (rows 1, 3)", judge),
        (files / "strict.yaml", "first.csv", "l=3 is larger", judge),
        (files / "clinic.yaml", "first.csv", "blocking check(s) failed: guarantee: Broken: l_diversity 1 violation(s)",
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
        # besides the steps that ran before the refusal (``<step>: <seconds> s``, one line each), one message
        said = [line for line in text.splitlines() if line.strip() and not re.match(r"^[a-z /_]+: \d+\.\d\d s$", line)]
        assert len(said) <= 3, text
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
        assert any("people disclosed beyond the bound" in str(r.dagster_event) for r in logs)  # it did disclose
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
    hints = [line for line in result.output.splitlines() if "open the UI" in line or line.startswith("judge adult")]
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


# -- the store protects itself; every failure a user can cause is one error line (issue #22) ---------------------

#: The ids of ``people``: text, zero-padded, as an operator writes them.
PIDS = re.compile(r"pid-\d{6}")
MINV = {**SPEC, "non_identifiers": [], "model": {"name": "m_invariance", "m": 3}}


def people(ids) -> pd.DataFrame:
    """One row per id, ids ``pid-000123``, four diseases in turn (m = 3 finds its groups)."""
    ids = np.asarray(ids)
    return pd.DataFrame({"pid": [f"pid-{i:06d}" for i in ids], "age": 20 + (ids * 37) % 60,
                         "sex": np.where(ids % 2 == 0, "F", "M"),
                         "disease": np.array(["flu", "hiv", "acne", "asthma"])[ids % 4]})


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """A folder with the m-invariance spec (m = 3), snapshots of text ids and ``two.duckdb``, a store holding
    two releases published by ``privrelease release``; a test works on a copy (``store_copy``)."""
    home = tmp_path_factory.mktemp("history")
    (home / "clinic.yaml").write_text(yaml.safe_dump(MINV))
    for name, ids in (("first", range(40)), ("second", range(4, 44)), ("third", range(8, 48))):
        people(ids).to_csv(home / f"{name}.csv", index=False)
    people(range(10, 11)).to_csv(home / "alone.csv", index=False)  # a person of release 2, alone
    for name in ("first", "second"):
        result = run("release", "--spec", home / "clinic.yaml", "--db", home / "two.duckdb", "--snapshot",
                     home / f"{name}.csv")
        assert result.exit_code == 0, result.output + result.stderr
    return home


def store_copy(history: Path, tmp_path: Path) -> Path:
    db = tmp_path / "store.duckdb"
    db.write_bytes((history / "two.duckdb").read_bytes())
    return db


def one_error_line(result) -> str:
    """The one line a refused command prints: ``error: ...`` on stderr, exit status 1, no traceback, no id."""
    text = result.output + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1, text
    assert len(lines) == 1 and lines[0].startswith("error: "), text
    assert "Traceback" not in text and not PIDS.search(text), text
    return lines[0]


def untouched(path: Path) -> tuple:
    """What must not change in a refused file: its bytes, its modification time, and no DuckDB log beside it."""
    return path.read_bytes(), path.stat().st_mtime_ns, sorted(p.name for p in path.parent.iterdir())


def commands(history: Path, db: Path) -> list[list]:
    """Every command that opens a store, on ``db``."""
    spec = history / "clinic.yaml"
    return [["release", "--spec", spec, "--db", db, "--snapshot", history / "third.csv"],
            ["show", "--db", db], ["show", "--db", db, "--spec", spec], ["verify", "--spec", spec, "--db", db],
            ["attack", "--spec", spec, "--db", db], ["discard", "--spec", spec, "--db", db, "--release", "3"]]


def test_a_database_that_is_not_a_release_store_is_refused_untouched(history, tmp_path):
    db = tmp_path / "hospital.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE patients AS SELECT 'pid-000001' AS pid, 42 AS age")
    before = untouched(db)
    for command in commands(history, db):
        line = one_error_line(run(*command))
        assert f"{db}: not a release store" in line, line
        assert untouched(db) == before, command
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT schema_name, table_name FROM duckdb_tables()").fetchall() == [("main", "patients")]


def test_an_empty_file_is_a_new_store(history, tmp_path):
    db = tmp_path / "new.duckdb"
    db.touch()
    result = run("release", "--spec", history / "clinic.yaml", "--db", db, "--snapshot", history / "first.csv")
    assert result.exit_code == 0 and "release 1 published" in result.output, result.output + result.stderr


@pytest.mark.parametrize("kept", [4096, 0.5])
def test_a_truncated_store_is_one_error_line_and_left_as_it_is(history, tmp_path, kept):
    db = store_copy(history, tmp_path)
    data = db.read_bytes()
    db.write_bytes(data[:kept if isinstance(kept, int) else int(len(data) * kept)])
    before = untouched(db)
    *reading, discard = commands(history, db)
    for command in reading:
        line = one_error_line(run(*command))
        assert line.startswith(f"error: {db}: ") and "truncated or corrupt" in line, line
        assert untouched(db) == before, command
    run(*discard)  # nothing is staged after release 2: refused, or a no-op when the blocks it reads are intact
    assert untouched(db) == before


def test_a_directory_as_the_store_is_one_error_line(history, tmp_path):
    folder = tmp_path / "releases"
    folder.mkdir()
    for command in commands(history, folder):
        assert f"{folder}: a directory, not a release store" in one_error_line(run(*command))
    assert not any(folder.iterdir())


def test_discard_refuses_a_published_release_and_everything_before(history, tmp_path):
    db = store_copy(history, tmp_path)
    spec = history / "clinic.yaml"
    for release_id in ("0", "1", "2"):
        line = one_error_line(run("discard", "--spec", spec, "--db", db, "--release", release_id))
        assert f"release {release_id}: release 2 is the last published one" in line, line
    store = ReleaseStore(db, load_spec(spec))
    with pytest.raises(StoreError, match="release 2 is the last published one"):
        store.discard(0)  # the store's own rule: the library and Dagster get it too
    assert store.release_ids() == [1, 2] and store.snapshot(1) is not None and store.snapshot(2) is not None
    result = run("release", "--spec", spec, "--db", db, "--snapshot", history / "third.csv")
    assert result.exit_code == 0 and "release 3 published" in result.output, result.output + result.stderr
    assert run("discard", "--spec", spec, "--db", db, "--release", "4").exit_code == 0  # nothing staged after 3


@pytest.mark.parametrize(("model", "reason"), [
    ({"name": "m_invariance", "m": 2}, "model.m: m=2 in the spec, m=3 in the manifest"),
    ({"name": "k_anonymity", "k": 2}, "model.name: the spec says 'k_anonymity', but release 2 of"),
])
def test_release_refuses_another_model_or_parameters_than_the_history(history, tmp_path, model, reason):
    from dagster_privrelease import pipeline

    db = store_copy(history, tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({**MINV, "model": model}))
    line = one_error_line(run("release", "--spec", other, "--db", db, "--snapshot", history / "third.csv"))
    assert reason in line and "a new store file" in line, line
    with pytest.raises(SpecError, match=reason.replace("(", r"\(")):
        pipeline.release_next(ReleaseStore(db, load_spec(other)), people(range(8, 48)))
    assert ReleaseStore(db, load_spec(history / "clinic.yaml")).release_ids() == [1, 2]
    result = run("release", "--spec", history / "clinic.yaml", "--db", db, "--snapshot", history / "third.csv")
    assert result.exit_code == 0 and "release 3 published" in result.output, result.output + result.stderr


@pytest.mark.parametrize(("change", "key"), [
    ({"name": "clinic-2024"}, "name: 'clinic-2024' is not a valid table name"),
    ({"quasi_identifiers": {"age": {"type": "numeric"}, "group_id": {"type": "categorical"}}},
     "quasi_identifiers.group_id: column 'group_id' has a name the release store reserves"),
])
def test_a_spec_dagster_or_the_store_cannot_use_is_refused_before_any_file_is_made(history, tmp_path, change, key):
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump({**MINV, **change}))
    db = tmp_path / "new.duckdb"
    line = one_error_line(run("release", "--spec", spec, "--db", db, "--snapshot", history / "first.csv"))
    assert key in line, line
    assert not db.exists()


def test_refused_snapshots_print_one_line_without_ids(history, tmp_path):
    """Duplicate ids and a person of release 2 alone (DuckDB refused the judge's archive, its message quoting
    every id it had seen) are each one line naming counts and rows, never an id."""
    db = store_copy(history, tmp_path)
    twice = people(range(8, 48))
    twice.loc[5, "pid"] = twice.loc[2, "pid"]
    twice.to_csv(tmp_path / "twice.csv", index=False)
    spec = history / "clinic.yaml"
    line = one_error_line(run("release", "--spec", spec, "--db", db, "--snapshot", tmp_path / "twice.csv"))
    assert "column 'pid': 2 rows share 1 id(s) (rows 3, 6)" in line, line
    alone = run("release", "--spec", spec, "--db", db, "--snapshot", history / "alone.csv")
    if alone.exit_code:  # refused (published, when the model finds counterfeits for the person's group)
        one_error_line(alone)
    assert not PIDS.search(alone.output + alone.stderr), alone.output
    result = run("release", "--spec", spec, "--db", db, "--snapshot", history / "third.csv")
    assert result.exit_code == 0 and "published" in result.output, result.output + result.stderr


def test_a_duckdb_error_inside_the_release_job_is_one_line_without_its_text(history, tmp_path, monkeypatch):
    """DuckDB's messages quote the values they refuse: one raised inside a step of the release job reaches the
    user as one line naming the store, and neither the line nor the run's event log holds its text."""
    from dagster_privrelease import pipeline
    from dagster_privrelease.orchestration import run_release

    def refused(store, release_id, attributes=None, backend=None):
        raise duckdb.ConversionException("Conversion Error: Could not convert string 'pid-000012' to INT32")

    monkeypatch.setattr(pipeline, "make_candidate", refused)
    db = store_copy(history, tmp_path)
    line = one_error_line(run("release", "--spec", history / "clinic.yaml", "--db", db, "--snapshot",
                              history / "third.csv"))
    assert line.startswith(f"error: {db}: DuckDB failed to read or write the release store (ConversionException)")
    with dg.instance_for_test() as instance:
        with pytest.raises(StoreError, match="ConversionException") as error:
            run_release(history / "clinic.yaml", db, people(range(8, 48)), instance=instance)
        assert not PIDS.search(str(error.value))
        (record,) = instance.get_run_records()
        logs = "\n".join(dg.serialize_value(r) for r in instance.all_logs(record.dagster_run.run_id))
    assert "ConversionException" in logs and not PIDS.search(logs)


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
