"""A release reads its snapshot and the judge its window as codes (categoricals), and publishes what the object
path published: 13 m-invariance releases of a text-id stream (people leave, come back, newcomers arrive), each
snapshot a Parquet file read by ``pipeline.read_snapshot`` and released by ``pipeline.release_next``, are compared
release by release with a reference saved from the code before this path (the partition seam's split, before the
snapshot was read as codes) (``fixtures/release_reference.json``:
``frame_digest`` of each release's published rows and counterfeit counts, which ignores row order and dtypes).

Regenerate the reference only from a checkout whose outputs are known good:
``PYTHONPATH=<checkout> python tests/test_release_reference.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dagster_privrelease import pipeline
from dagster_privrelease.core.spec import parse_spec
from dagster_privrelease.storage import ReleaseStore, frame_digest

REFERENCE = Path(__file__).parent / "fixtures" / "release_reference.json"
RELEASES, ROWS, CHURN = 13, 160, 16
SPEC = {
    "name": "reference", "id": "pid", "sensitive": "disease", "seed": 20261127,
    "quasi_identifiers": {
        "age": {"type": "numeric", "min_width": 1},
        "sex": {"type": "categorical"},
        "region": {"type": "categorical", "hierarchy": {"Any": {"North": ["n1", "n2"], "South": ["s1", "s2"]}}},
    },
    "non_identifiers": ["ward"],
    "model": {"name": "m_invariance", "m": 2, "hold_back": True},
}


def people(count: int, rng: np.random.Generator) -> pd.DataFrame:
    """``count`` people with text ids ``p00007``; every fifth zero-padded digits only (``0000005``)."""
    numbers = np.arange(count)
    ids = np.where(numbers % 5 == 0, [f"{n:07d}" for n in numbers], [f"p{n:05d}" for n in numbers])
    return pd.DataFrame({
        "pid": ids.astype(object), "age": rng.integers(20, 70, count), "sex": rng.choice(["F", "M"], count),
        "region": rng.choice(["n1", "n2", "s1", "s2"], count),
        "ward": rng.choice(np.array(["w1", "w2", None], dtype=object), count),
        "disease": rng.permutation(np.resize(np.array(["flu", "hiv", "gastritis", "asthma"], dtype=object), count)),
    })


def snapshots() -> list[pd.DataFrame]:
    """T(1..RELEASES): ROWS people, then CHURN leave and CHURN arrive each release, a quarter of them people who
    left earlier (with their old rows)."""
    rng = np.random.default_rng(7)
    everyone = people(ROWS + RELEASES * CHURN, rng)
    current, fresh, away = everyone.iloc[:ROWS], ROWS, everyone.iloc[:0]
    out = [current]
    for _ in range(RELEASES - 1):
        gone = rng.choice(len(current), CHURN, replace=False)
        left = current.iloc[gone]
        back = away.iloc[:CHURN // 4]
        new = everyone.iloc[fresh:fresh + CHURN - len(back)]
        fresh += len(new)
        away = pd.concat([away.iloc[len(back):], left])
        current = pd.concat([current.drop(current.index[gone]), back, new])
        out.append(current.reset_index(drop=True))
    return out


def published(folder: Path) -> list[dict]:
    """Release every snapshot through Parquet files; each release's outcome, rows digest and counterfeits."""
    spec = parse_spec(SPEC)
    store = ReleaseStore(folder / "reference.duckdb", spec)
    found = []
    with store.session():
        for j, rows in enumerate(snapshots(), start=1):
            path = folder / f"t{j}.parquet"
            rows.to_parquet(path, index=False)
            outcome = pipeline.release_next(store, pipeline.read_snapshot(path, spec))
            with store.connect() as con:
                table = con.sql("SELECT * EXCLUDE (release_id) FROM published.release WHERE release_id = ?",
                                params=[j]).df()
                fakes = con.sql("SELECT group_id, count FROM published.counterfeit WHERE release_id = ?",
                                params=[j]).df()
            found.append({"release_id": j, "outcome": outcome["outcome"], "rows": len(table),
                          "digest": frame_digest(table), "counterfeits": frame_digest(fakes)})
    return found


def test_published_rows_equal_the_reference(tmp_path):
    reference = json.loads(REFERENCE.read_text())
    found = published(tmp_path)
    assert [r["outcome"] for r in found] == ["published"] * RELEASES
    assert found == reference


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        REFERENCE.write_text(json.dumps(published(Path(tmp)), indent=1) + "\n")
    sys.stderr.write(f"wrote {REFERENCE}\n")
