"""DuckDB's memory limit and spill folder for the store (``connection.resource_settings``): a default bounded below
DuckDB's own (80% of the machine), a folder beside the store, both overridable from the environment, and a value
DuckDB refuses named in one line before anything is written."""

from __future__ import annotations

import os

import duckdb
import pytest

from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.errors import StoreError
from dagster_privrelease.storage import ReleaseStore
from dagster_privrelease.storage.connection import MEMORY_SHARE

from .conftest import SPEC, publish, published_rows, snapshot


def _settings(store: ReleaseStore) -> dict[str, str]:
    with store.connect() as con:
        return dict(con.execute("SELECT name, value FROM duckdb_settings() "
                                "WHERE name IN ('memory_limit', 'temp_directory')").fetchall())


def _gib(text: str) -> float:
    number, unit = text.split()
    return float(number) * {"KiB": 2**-20, "MiB": 2**-10, "GiB": 1.0, "TiB": 2**10}[unit]


def test_default_limit_is_a_share_of_the_machine_and_spills_beside_the_store(tmp_path, monkeypatch):
    monkeypatch.delenv("PRIVRELEASE_MEMORY_LIMIT", raising=False)
    monkeypatch.delenv("PRIVRELEASE_TEMP_DIRECTORY", raising=False)
    path = tmp_path / "clinic.duckdb"
    with ReleaseStore(path, parse_spec(SPEC)).session() as store:
        settings = _settings(store)
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    assert _gib(settings["memory_limit"]) == pytest.approx(MEMORY_SHARE * physical, rel=0.01)
    assert settings["temp_directory"] == f"{path}.tmp"


def test_the_environment_overrides_both_and_a_release_publishes_under_them(tmp_path, monkeypatch):
    folder = tmp_path / "spill"
    monkeypatch.setenv("PRIVRELEASE_MEMORY_LIMIT", "300MB")
    monkeypatch.setenv("PRIVRELEASE_TEMP_DIRECTORY", str(folder))
    store = ReleaseStore(tmp_path / "clinic.duckdb", parse_spec(SPEC))
    publish(store, 1, snapshot(range(40)))  # a connection of its own per call: each one is set
    settings = _settings(store)
    assert _gib(settings["memory_limit"]) == pytest.approx(300e6 / 2**30, rel=0.01)
    assert settings["temp_directory"] == str(folder)
    assert published_rows(store) == 40


def test_a_limit_duckdb_refuses_is_one_line_naming_the_variable_and_nothing_is_written(tmp_path, monkeypatch):
    variable, value = "PRIVRELEASE_MEMORY_LIMIT", "lots"
    path = tmp_path / "clinic.duckdb"
    store = ReleaseStore(path, parse_spec(SPEC))
    publish(store, 1, snapshot(range(40)))
    monkeypatch.setenv(variable, value)
    with pytest.raises(StoreError) as caught:
        publish(store, 2, snapshot(range(10, 50), seed=2))
    message = str(caught.value)
    assert "\n" not in message and message.startswith(variable) and repr(value) in message
    monkeypatch.delenv(variable)
    assert store.release_ids() == [1] and published_rows(store) == 40
    publish(store, 2, snapshot(range(10, 50), seed=2))  # the refusal blocks nothing once the value is fixed
    assert store.release_ids() == [1, 2]


def test_the_cli_refuses_a_bad_limit_in_one_line(tmp_path, monkeypatch):
    import yaml
    from typer.testing import CliRunner

    from dagster_privrelease import cli

    (tmp_path / "clinic.yaml").write_text(yaml.safe_dump(SPEC))
    snapshot(range(40)).to_csv(tmp_path / "t1.csv", index=False)
    args = ["release", "--spec", str(tmp_path / "clinic.yaml"), "--db", str(tmp_path / "clinic.duckdb"),
            "--snapshot", str(tmp_path / "t1.csv")]
    monkeypatch.setenv("PRIVRELEASE_MEMORY_LIMIT", "lots")
    refused = CliRunner().invoke(cli.app, args)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.exit_code == 1 and len(lines) == 1, refused.output + refused.stderr
    assert lines[0].startswith("error: ") and "PRIVRELEASE_MEMORY_LIMIT" in lines[0]
    assert "Traceback" not in refused.output + refused.stderr
    with duckdb.connect(str(tmp_path / "clinic.duckdb")) as con:  # refused before any table was made
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'published'").fetchone() == (0,)
