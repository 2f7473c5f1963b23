"""Issue #11 item 6: an attribute subset is refused up front, with one message, for a model that republishes every
quasi-identifier: by the library (``pipeline.model_spec``, before anything is staged), by ``privrelease release
--attributes`` (before the Dagster job runs, no store file left) and by the request sensor, all through
``pipeline.model_spec``."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dagster_privrelease import cli, pipeline
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.errors import SpecError
from dagster_privrelease.orchestration.sensors import read_request
from dagster_privrelease.storage import ReleaseStore

RAW = {
    "name": "clinic", "id": "pid", "sensitive": "disease",
    "quasi_identifiers": {"age": {"type": "numeric"}, "sex": {"type": "categorical"}},
    "model": {"name": "m_invariance", "m": 2},
}
ROWS = pd.DataFrame({"pid": range(8), "age": [20, 21, 30, 31, 40, 41, 50, 51], "sex": ["F", "M"] * 4,
                     "disease": ["flu", "hiv"] * 4})
REFUSAL = (r"attributes \['age'\]: model m_invariance publishes every quasi-identifier of spec 'clinic' "
           r"\(\['age', 'sex'\]\) in every release; a subset needs a vertical model \(\[.*'sequential_l_diversity'.*\]\)"
           r"\. Ask for every quasi-identifier")


def test_the_library_refuses_a_subset_before_staging(tmp_path):
    spec = parse_spec(RAW)
    with pytest.raises(SpecError, match=REFUSAL):
        pipeline.model_spec(spec, ["age"])
    store = ReleaseStore(tmp_path / "c.duckdb", spec)
    with pytest.raises(SpecError, match=REFUSAL):
        pipeline.release_next(store, ROWS, ["age"])
    assert store.snapshot(1) is None and store.release_ids() == []
    assert pipeline.model_spec(spec, ["sex", "age"]) is not spec  # every QI, in any order: allowed
    assert list(pipeline.model_spec(spec, ["sex", "age"]).quasi_identifiers) == ["age", "sex"]
    assert pipeline.release_next(store, ROWS, ["sex", "age"])["outcome"] == "published"
    with pytest.raises(SpecError, match=REFUSAL):  # an existing history: refused before "unchanged" is decided
        pipeline.release_next(store, ROWS, ["age"])
    assert store.release_ids() == [1]


def test_the_cli_refuses_a_subset_before_running_the_job(tmp_path):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(RAW))
    ROWS.to_csv(tmp_path / "rows.csv", index=False)
    db = tmp_path / "c.duckdb"
    result = CliRunner().invoke(cli.app, ["release", "--spec", str(tmp_path / "s.yaml"), "--db", str(db),
                                          "--snapshot", str(tmp_path / "rows.csv"), "--attributes", "age"])
    assert result.exit_code == 1, result.output
    assert "error:" in result.stderr and "publishes every quasi-identifier" in result.stderr
    assert "a subset needs a vertical model" in result.stderr
    assert not db.exists()  # refused up front: no store file left behind


def test_the_request_sensor_refuses_with_the_same_message(tmp_path):
    spec = parse_spec(RAW)
    (tmp_path / "r.yaml").write_text("attributes: [age]\n")
    with pytest.raises(SpecError) as library:
        pipeline.model_spec(spec, ["age"])
    with pytest.raises(ValueError, match=r"request r\.yaml: ") as sensor:
        read_request(tmp_path / "r.yaml", spec)
    assert str(sensor.value) == f"request r.yaml: {library.value}"
    (tmp_path / "all.yaml").write_text("attributes: [sex, age]\n")
    assert read_request(tmp_path / "all.yaml", spec) == ("age", "sex")


def test_a_request_file_is_read_with_the_spec_loader(tmp_path):
    """A request's YAML is refused as a spec's is: one line naming the file, line and column; a key written twice
    is refused rather than the second one winning."""
    spec = parse_spec(RAW)
    (tmp_path / "twice.yaml").write_text("attributes: [age]\nattributes: [sex]\n")
    with pytest.raises(ValueError) as twice:
        read_request(tmp_path / "twice.yaml", spec)
    assert str(twice.value) == (f"request {tmp_path / 'twice.yaml'}: not valid YAML at line 2, column 1: key "
                                "'attributes' is written twice in one mapping (first at line 1); write each key once")
    (tmp_path / "broken.yaml").write_text("attributes: [age\n")
    with pytest.raises(ValueError, match=r"broken.yaml: not valid YAML at line 2, column 1: ") as broken:
        read_request(tmp_path / "broken.yaml", spec)
    assert "\n" not in str(broken.value)
