"""The two flagship streams a new user brings, published end to end: Census-KDD workers under m-invariance and
under m-Distinct, text ids, twenty releases each, people who leave and come back, through ``privrelease release``
(the Dagster release job and its blocking checks) and through the source sensor as the daemon runs it (a tick on
a persistent instance, its run requests executed, the cursor carried), then judged again by ``verify`` and
``attack``.

Minutes long: ``make test-slow``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dagster_privrelease import cli
from dagster_privrelease.core.spec import load_spec
from dagster_privrelease.core.stream import UpdateRule
from dagster_privrelease.demo import within_update_sets
from dagster_privrelease.orchestration import DuckDBTableSource, release_definitions
from dagster_privrelease.orchestration.sensors import tick
from dagster_privrelease.storage import ReleaseStore

RESOURCES = Path(__file__).resolve().parents[1] / "resources"

pytestmark = pytest.mark.slow


def text_ids(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """``table`` with its integer ids written as people write them: ``p90851``, every seventh as zero-padded digits
    (``0090851``); all distinct as text."""
    ids = pd.Series(table[column].to_numpy())
    text = ids.map("p{}".format).where(ids % 7 != 0, ids.map("{:07d}".format))
    return table.assign(**{column: text.to_numpy()})


def returning_stream(
    table: pd.DataFrame, first: int, r: int, releases: int, rng: np.random.Generator,
    updates: int = 0, rule: UpdateRule | None = None, column: str | None = None,
) -> Iterator[pd.DataFrame]:
    """``releases`` snapshots of ``table``: ``first`` rows at random, then each release deletes ``r`` rows at
    random and inserts ``r``: up to a quarter of them people who left in an earlier release (back with the values
    they left with), the rest rows of ``table`` not seen yet; ``updates`` survivors get ``rule`` applied to
    ``column`` (m-Distinct's internal updates, Li-Zhou §VI-A)."""
    shuffled = table.iloc[rng.permutation(len(table))].reset_index(drop=True)
    current, pool = shuffled.iloc[:first], shuffled.iloc[first:]
    away = shuffled.iloc[:0]
    yield current.reset_index(drop=True)
    for _ in range(releases - 1):
        gone = np.zeros(len(current), dtype=bool)
        gone[rng.choice(len(current), r, replace=False)] = True
        keep, left = current[~gone], current[gone]
        if updates and rule is not None and column is not None:
            values = keep[column].to_numpy().copy()
            chosen = rng.choice(len(keep), updates, replace=False)
            values[chosen] = rule(values[chosen], rng)
            keep = keep.assign(**{column: values})
        back = min(r // 4, len(away))
        new, pool = pool.iloc[: r - back], pool.iloc[r - back:]
        current = pd.concat([keep, away.iloc[:back], new])
        away = pd.concat([away.iloc[back:], left])
        yield current.reset_index(drop=True)


def release_all(spec_path: Path, db: Path, snapshots: Iterator[pd.DataFrame], tmp_path: Path,
                sensor: bool = False) -> int:
    """Publish every snapshot with ``privrelease release`` or, with ``sensor``, by writing it to a DuckDB source
    table and running the source sensor's tick and the run it requests (``through_the_sensor``); then ``verify``
    and ``attack`` the store; each must succeed. Returns the number of releases."""
    runner = CliRunner()
    count = 0
    publish = through_the_sensor(spec_path, db, tmp_path) if sensor else None
    for count, snapshot in enumerate(snapshots, start=1):
        if publish is not None:
            assert publish(snapshot) == f"{count:06d}"
            continue
        path = tmp_path / f"t{count}.parquet"
        snapshot.to_parquet(path)
        result = runner.invoke(cli.app, ["release", "--spec", str(spec_path), "--db", str(db), "--snapshot", str(path)])
        assert result.exit_code == 0, (count, result.output)
        assert f"release {count} published" in result.output, (count, result.output)
    assert ReleaseStore(db, load_spec(spec_path)).release_ids() == list(range(1, count + 1))
    for command in ("verify", "attack"):
        result = runner.invoke(cli.app, [command, "--spec", str(spec_path), "--db", str(db)])
        assert result.exit_code == 0, (command, result.output)
    return count


def through_the_sensor(spec_path: Path, db: Path, tmp_path: Path):
    """``publish(rows) -> partition key``: the rows written to the source table ``source.people``, one tick of
    the table's source sensor on a persistent Dagster instance (its partition requests applied, its cursor carried
    to the next tick), and the one run it requests executed as the daemon's launcher would; the run must
    succeed."""
    spec = load_spec(spec_path)
    source = tmp_path / "data.duckdb"  # not source.duckdb: DuckDB names the database after the file
    defs = release_definitions(spec_path, db, DuckDBTableSource(database=str(source), table="source.people"))
    home = tmp_path / "dagster_home"
    home.mkdir()
    instance = dg.DagsterInstance.from_config(str(home))
    cursor: list[str | None] = [None]

    def publish(rows: pd.DataFrame) -> str:
        with duckdb.connect(str(source)) as con:
            con.execute("CREATE SCHEMA IF NOT EXISTS source")
            con.register("frame", rows)
            con.execute("CREATE OR REPLACE TABLE source.people AS SELECT * FROM frame")
        data = tick(defs, instance, f"{spec.name}_source_changed", cursor[0])
        cursor[0] = data.cursor
        (request,) = data.run_requests or [None]
        assert request is not None, data.skip_message
        run = defs.resolve_job_def(f"{spec.name}_release").execute_in_process(
            partition_key=request.partition_key, tags=request.tags, instance=instance, raise_on_error=False)
        assert run.success, (request.partition_key, [e.message for e in run.all_events if e.is_failure])
        return str(request.partition_key)

    return publish


@pytest.mark.parametrize("sensor", [False, True], ids=["cli", "sensor"])
def test_m_invariance_census_kdd_text_ids_twenty_releases(census_kdd, tmp_path, sensor):
    """Issue 22's first stream: 20,000 Census-KDD workers, ids ``p90851``, 2,000 deleted and 2,000 inserted per
    release (500 of them people coming back), m = 4: all twenty releases publish."""
    spec_path = RESOURCES / "census_kdd.yaml"
    spec = load_spec(spec_path)
    table = text_ids(census_kdd[spec.columns], spec.id)
    db = tmp_path / "census.duckdb"
    snapshots = returning_stream(table, 20_000, 2_000, 20, np.random.default_rng(22))
    assert release_all(spec_path, db, snapshots, tmp_path, sensor) == 20
    history = ReleaseStore(db, spec).history()
    assert history.release_ids == list(range(1, 21))
    assert history.snapshots is not None and history.snapshots[spec.id].str.startswith("00").any()


@pytest.mark.parametrize("sensor", [False, True], ids=["cli", "sensor"])
def test_m_distinct_census_kdd_text_ids_twenty_releases_with_updates(census_kdd, tmp_path, sensor):
    """Issue 22's second stream: 10,000 Census-KDD workers under m-Distinct (m = 4, CUS of diameter 10), text
    ids, 1,000 deleted and 1,000 inserted per release (250 coming back) and 1,000 survivors' occupations updated
    inside their candidate update sets: all twenty releases publish."""
    spec_path = RESOURCES / "census_kdd_m_distinct.yaml"
    spec = load_spec(spec_path)
    table = census_kdd[spec.columns].assign(**{spec.sensitive: census_kdd[spec.sensitive].astype(str)})
    table = text_ids(table, spec.id)
    rule = within_update_sets(spec.model.params["update_sets"])
    snapshots = returning_stream(table, 10_000, 1_000, 20, np.random.default_rng(22), updates=1_000, rule=rule,
                                 column=spec.sensitive)
    assert release_all(spec_path, tmp_path / "m_distinct.duckdb", snapshots, tmp_path, sensor) == 20
