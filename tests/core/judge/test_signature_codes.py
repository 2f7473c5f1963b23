"""The equivalence attack's signature codes (``attacks.equivalence._signature_codes``) against the definition: each
class's value-count row is coded by its position among the signatures known, a row not known yet getting the
next code in order of first appearance."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_privrelease.core.judge.attacks import equivalence
from tests.budget import examples


def _naive(known: list[tuple[int, ...]], counts: list[tuple[int, ...]]) -> tuple[list[int], list[tuple[int, ...]]]:
    known = list(known)
    codes = []
    for row in counts:
        if row not in known:
            known.append(row)
        codes.append(known.index(row))
    return codes, known


rows = st.lists(st.tuples(*[st.integers(0, 2)] * 3), max_size=40)


@settings(max_examples=examples(100), deadline=None)
@given(rows, rows)
def test_signature_codes_follow_the_definition(known, counts):
    known = list(dict.fromkeys(known))  # the known signatures are distinct
    width = 3
    as_matrix = lambda r: np.array(r, dtype=np.int64).reshape(len(r), width)  # noqa: E731
    codes, grown = equivalence._signature_codes(as_matrix(known), as_matrix(counts))
    expected_codes, expected_known = _naive(known, counts)
    assert codes.tolist() == expected_codes
    assert [tuple(r) for r in grown.tolist()] == expected_known


def test_a_hash_collision_falls_back_and_keeps_the_order_of_first_appearance(monkeypatch):
    """With every row hashed alike (``_row_labels`` then sorts the rows), the codes are still those of the
    definition."""
    monkeypatch.setattr(equivalence, "_MULTIPLIERS", np.zeros_like(equivalence._MULTIPLIERS))
    known = [(1, 1, 0)]
    counts = [(2, 0, 1), (0, 1, 1), (1, 1, 0), (2, 0, 1), (0, 0, 3)]
    codes, grown = equivalence._signature_codes(np.array(known), np.array(counts))
    expected_codes, expected_known = _naive(known, counts)
    assert codes.tolist() == expected_codes and [tuple(r) for r in grown.tolist()] == expected_known
