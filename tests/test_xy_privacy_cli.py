"""Wang-Fung Example 1 (Table 1) end to end with the ``privrelease`` commands of docs/models/xy-privacy.md: T2 = (Job, Disease)
recorded as published before the tool, then T1 = (Name, Job, Class) under (X, Y)-anonymity, verify, attack;
and the rules of ``pipeline.record_published`` and ``core.models.recorded``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pandas as pd
import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from dagster_privrelease import cli
from dagster_privrelease.core.judge.history import History, Report
from dagster_privrelease.core.models.recorded import discount_recorded
from dagster_privrelease.core.spec import load_spec, parse_spec
from dagster_privrelease.errors import SpecError, StoreError
from dagster_privrelease.pipeline import record_published, release_next
from dagster_privrelease.storage import ReleaseStore

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
SPEC = RESOURCES / "wang_fung_example.yaml"
T1 = RESOURCES / "examples" / "wang_fung_t1.csv"
T2 = RESOURCES / "examples" / "wang_fung_t2.csv"


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Rich tables 200 columns wide, so that names are never wrapped in the captured output."""
    monkeypatch.setattr(cli, "console", Console(width=200))
    monkeypatch.setattr(cli, "errors", Console(width=200, stderr=True))


def run(*args):
    return CliRunner().invoke(cli.app, [str(a) for a in args])


def test_example_1_with_the_readme_commands(tmp_path):
    db = tmp_path / "wang_fung.duckdb"
    recorded = run("record", "--spec", SPEC, "--db", db, "--snapshot", T2, "--attributes", "Job,Disease")
    assert recorded.exit_code == 0, recorded.output
    assert "release 1 recorded as published, not protected by any model" in recorded.output

    released = run("release", "--spec", SPEC, "--db", db, "--snapshot", T1, "--attributes", "Name,Job")
    assert released.exit_code == 0, released.output
    assert "release 2 published" in released.output and "xy_anonymity ok" in released.output

    verified = run("verify", "--spec", SPEC, "--db", db)
    assert verified.exit_code == 0, verified.output
    assert re.search(r"xy_anonymity +│ holds", verified.output) and "earlier_release=1" in verified.output

    attacked = run("attack", "--spec", SPEC, "--db", db)
    assert attacked.exit_code == 0, attacked.output
    # Under V0 (every QI known) the raw T2 alone discloses everyone's Disease from their Job; T1 adds nothing
    for name in ("join", "intersection", "possible_worlds"):
        assert re.search(rf"{name} +│ holds", attacked.output), attacked.output
    assert attacked.output.count("predating=5, recorded_releases=1") == 3
    # one attack alone is judged against what every attack finds in the recorded release (the join is skipped there)
    joined = run("attack", "--spec", SPEC, "--db", db, "--attack", "join")
    assert joined.exit_code == 0 and "predating=5, recorded_releases=1" in joined.output, joined.output

    with duckdb.connect(str(db), read_only=True) as con:
        manifest = con.execute("SELECT release_id, model, params, attributes, checks, groups "
                               "FROM published.manifest ORDER BY release_id").fetchall()
        t1 = con.execute('SELECT "Name", "Job", "Class", "Disease" FROM published.release WHERE release_id = 2'
                         ).df()
        t2 = con.execute('SELECT group_id, "Name", "Job", "Job__lo" = "Job__hi" AS point, "Class", "Disease" '
                         "FROM published.release WHERE release_id = 1").df()
    (r1, m1, p1, a1, c1, g1), (r2, m2, _, a2, c2, _) = manifest
    assert (r1, m1, json.loads(p1), a1, json.loads(c1), g1) == (1, "recorded", {"published": ["Job", "Disease"]},
                                                                 ["Job"], {}, 0)
    assert (r2, m2, a2) == (2, "xy_privacy", ["Name", "Job"]) and all(json.loads(c2).values())
    # T2 as it was: Job ungeneralised, Disease; no group, no Name, no Class
    assert t2["group_id"].isna().all() and t2["Name"].isna().all() and t2["Class"].isna().all()
    assert t2["point"].all() and sorted(t2["Job"]) == ["Banker", "Banker", "Clerk", "Driver", "Engineer"]
    assert sorted(t2["Disease"]) == ["Cancer", "Cancer", "Cancer", "HIV", "HIV"]
    # T1 = (Name, Job, Class), Job generalised as in the model's tests; no Disease (null)
    assert set(zip(t1["Name"], t1["Job"], t1["Class"], strict=True)) == {
        ("Alice", "White", "c1"), ("Bob", "White", "c2"), ("Bob", "Blue", "c3"), ("Cathy", "Blue", "c4")}
    assert t1["Disease"].isna().all()


def test_recording_again_records_nothing(tmp_path):
    store = ReleaseStore(tmp_path / "s.duckdb", load_spec(SPEC))
    frame = pd.read_csv(T2)
    assert record_published(store, frame, ["Job", "Disease"])["outcome"] == "recorded"
    assert record_published(store, frame, ["Job", "Disease"]) == {
        "release_id": 1, "outcome": "unchanged", "model": "recorded", "rows": 5, "attributes": ["Job", "Disease"]}
    assert store.release_ids() == [1]


def test_record_refuses_bad_attributes_a_model_that_cannot_read_it_and_a_release_after_the_tool(tmp_path):
    spec = load_spec(SPEC)
    frame = pd.read_csv(T2)
    store = ReleaseStore(tmp_path / "s.duckdb", spec)
    with pytest.raises(SpecError, match=r"\['Pid'\].*never the id 'Pid'"):
        record_published(store, frame, ["Pid", "Job"])
    with pytest.raises(SpecError, match="at least one"):
        record_published(store, frame, [])
    raw = yaml.safe_load(SPEC.read_text())
    raw["model"]["publish_sensitive"] = True  # T1 first, on its own: it holds Y
    first = ReleaseStore(tmp_path / "first.duckdb", parse_spec(raw, SPEC.parent))
    release_next(first, frame, ["Name", "Job"])
    with pytest.raises(StoreError, match="release 1 was published by model xy_privacy"):
        record_published(first, frame, ["Job", "Disease"])
    mondrian = parse_spec({"name": "t", "id": "Pid", "sensitive": "Disease", "non_identifiers": ["Class"],
                           "quasi_identifiers": {"Name": {"type": "categorical"}, "Job": {"type": "categorical"}},
                           "model": {"name": "k_anonymity", "k": 2}})
    with pytest.raises(SpecError, match=r"model k_anonymity reads only 'nothing'.*xy_privacy"):
        record_published(ReleaseStore(tmp_path / "m.duckdb", mondrian), frame, ["Job", "Disease"])
    assert not (tmp_path / "m.duckdb").exists() and not (tmp_path / "s.duckdb").exists()  # refused up front


def test_only_what_the_later_releases_add_fails_an_attack():
    """Pid 1 had one candidate with recorded release 1 alone (predates the tool); Pid 2 had two and now has one,
    Pid 3 was not disclosed before: both are the later release's doing and still fail the report."""
    spec = load_spec(SPEC).bind(pd.read_csv(T2))
    history = History(spec, pd.DataFrame({"release_id": [1, 2]}), pd.DataFrame({"release_id": []}),
                      states={"recorded": pd.DataFrame({"release_id": [1], "published": ["Job"]})})
    now = Report("join", False, pd.DataFrame({"Pid": [1, 2, 3], "size": [1, 1, 1]}), {"below_bound": 3})

    def before(h: History) -> list[Report]:
        assert h.release_ids == [1]
        return [Report("intersection", False, pd.DataFrame({"Pid": [1], "size": [1]})),
                Report("join", False, pd.DataFrame({"Pid": [2], "size": [2]}))]

    (report,) = discount_recorded(history, [now], before)
    assert not report.ok and list(report.violations["Pid"]) == [2, 3]
    assert report.summary == {"below_bound": 3, "predating": 1, "recorded_releases": "1"}
    (alone,) = discount_recorded(history, [now], lambda h: [Report("join", False, pd.DataFrame(
        {"Pid": [1, 2, 3], "size": [1, 1, 1]}))])
    assert alone.ok and alone.summary["predating"] == 3 and alone.violations.empty


def _join_counts(db: Path) -> pd.Series:
    """Records of the join of T1 (release 2) and T2 (release 1) on Job per (T1's Name, T2's Disease): a T2 row
    matches a T1 row whose published Job interval holds its Job (Wang-Fung §3.3's consistency predicate)."""
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            'SELECT t1."Name", t2."Disease", count(*) AS n FROM published.release t1 JOIN published.release t2 '
            'ON t2."Job__lo" BETWEEN t1."Job__lo" AND t1."Job__hi" '
            "WHERE t1.release_id = 2 AND t2.release_id = 1 GROUP BY ALL").df().set_index(["Name", "Disease"])["n"]


@pytest.mark.parametrize(("spec", "k_anonymous"), [("wang_fung_example1.yaml", True),
                                                    ("wang_fung_example.yaml", False)])
def test_example_1_requirement_k_anonymity_of_the_join_on_name_disease(tmp_path, spec, k_anonymous):
    """Example 1 asks the join to be 2-anonymous on {Name, Disease}: wang_fung_example1.yaml states it (X = {Name,
    Disease}, Y a key of the join) and its release meets it; the §3.1 form of wang_fung_example.yaml (X = {Name,
    T1.Job}, Y = {Disease}) holds too, but leaves (Cathy, Cancer) on one join record."""
    db = tmp_path / "wang_fung.duckdb"
    store = ReleaseStore(db, load_spec(RESOURCES / spec))
    t1, t2 = (pd.read_csv(RESOURCES / "examples" / f"wang_fung_{t}.csv") for t in ("t1", "t2"))
    for rows in (t1, t2):  # text ids, as a real table has them
        rows["Pid"] = [f"p{pid:03d}" for pid in rows["Pid"]]
    assert record_published(store, t2, ["Job", "Disease"])["outcome"] == "recorded"
    published = release_next(store, t1, ["Name", "Job"])  # the blocking checks, xy_anonymity among them, passed
    assert published["outcome"] == "published" and published["release_id"] == 2

    counts = _join_counts(db)
    assert bool(counts.min() >= 2) is k_anonymous, counts
    if k_anonymous:  # Name alone can be generalised (X ∩ att(T1)); Job stays raw, so the join is Table 1's
        assert counts.to_dict() == {("Any", "Cancer"): 5, ("Any", "HIV"): 2}
    else:
        assert counts[("Cathy", "Cancer")] == 1 and counts[("Cathy", "HIV")] == 1
