"""Text-id streams of many releases published by a model, and a digest of each release: what the partition seam's
tests compare across backends, and against the digests the code before the seam published (``seam_digests.json``).

Only APIs that predate the seam are used here, so the digests can be made again with that code (commit b04e268):
``python -m tests.core.models.seam_streams`` writes them for the streams of ``SAVED``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from dagster_privrelease.core.models import registry
from dagster_privrelease.core.release import PreviousRelease, release_rng
from dagster_privrelease.core.spec import Spec, parse_spec, validate_snapshot
from dagster_privrelease.core.stream import split_base_pool, stream

#: Digests of every release of the streams of ``SAVED``, published by the code before the partition seam.
DIGESTS = Path(__file__).with_name("seam_digests.json")
DISEASES = [f"d{i}" for i in range(8)]
EDUCATION = {"any": {"school": {"primary": ["pre", "first", "second"], "secondary": ["lower", "upper"]},
             "higher": {"college": ["bachelor", "master"], "doctorate": ["phd"]}}}
LEAVES = ["pre", "first", "second", "lower", "upper", "bachelor", "master", "phd"]


def table(rows: int, seed: int) -> pd.DataFrame:
    """``rows`` people with zero-padded text ids: age, zip (numeric), sex, education (categorical), a disease."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "pid": [f"p{i:06d}" for i in rng.permutation(rows)],
        "age": rng.integers(18, 90, rows), "zip": rng.integers(10_000, 10_400, rows),
        "sex": rng.choice(["F", "M"], rows), "education": rng.choice(LEAVES, rows),
        "disease": rng.choice(DISEASES, rows),
    })


def spec(model: dict) -> Spec:
    """The streams' spec under ``model`` (a model mapping: name and parameters)."""
    return parse_spec({
        "name": "seam", "id": "pid", "sensitive": {"name": "disease", "values": DISEASES},
        "quasi_identifiers": {"age": {"type": "numeric"}, "zip": {"type": "numeric", "min_width": 3},
                              "sex": {"type": "categorical"},
                              "education": {"type": "categorical", "hierarchy": EDUCATION}},
        "model": model,
    })


#: The streams: a model, the people, T(1)'s size, the deletions and insertions per release, the releases.
STREAMS = {
    "m_invariance": ({"name": "m_invariance", "m": 3}, 900, 300, 40, 12),
    "m_invariance_mondrian_first": ({"name": "m_invariance", "m": 3, "first_release": "mondrian"},
                                    900, 300, 40, 12),
    "k_anonymity": ({"name": "k_anonymity", "k": 4}, 900, 300, 40, 12),
    "l_diversity": ({"name": "l_diversity", "l": 3}, 900, 300, 40, 12),
}
#: The streams whose releases the seam leaves as they were (Mondrian's leaves and ids); m-invariance's split now
#: breaks exact ties between QIs as §4.3's reference does, where float rounding broke them before.
SAVED = ("k_anonymity", "l_diversity")


def releases(name: str) -> list[str]:
    """The digest of every release of stream ``name``: published release after release, each reading the one
    before (Lemma 4), with the release's seeded generator."""
    model, rows, first_size, r, count = STREAMS[name]
    rng = np.random.default_rng(11)
    first, pool = split_base_pool(table(rows, 5), first_size, rng)
    bound, previous, out = spec(model), None, []
    publish = registry.descriptor(model["name"]).publish
    for j, raw in enumerate(stream(first, pool, r, count, rng), start=1):
        bound = bound.bind(raw)
        snapshot = validate_snapshot(raw, bound)
        release = publish(snapshot, bound, previous, release_rng(bound, j))
        out.append(digest(release.table, release.counterfeits, release.hosting))
        previous = PreviousRelease(j, snapshot, release.table, release.counterfeits, release.hosting, release.state)
    return out


def digest(*frames: pd.DataFrame) -> str:
    """SHA-256 of the frames' CSV text, rows and columns in their order (the published order is part of a
    release: rows are shuffled with the release's generator)."""
    h = hashlib.sha256()
    for frame in frames:
        h.update(frame.to_csv(index=False).encode())
    return h.hexdigest()


if __name__ == "__main__":
    DIGESTS.write_text(json.dumps({name: releases(name) for name in SAVED}, indent=1) + "\n")
