"""m-Distinct's public background knowledge: the candidate update sets (Li-Zhou Def. 12, spec parameter
``update_sets``), their closure check, the spec check against the sensitive domain, the CUS matrix the three phases
read, and the classes by which new records are grouped (§V-B, §V-D).

CUS(v) always holds v (Def. 12 calls CUS(a) the values a "has non-zero update probability to", and the paper treats
"stay the same" as an update, e.g. Occupation "may stay the same" in §VI-A); a value without an entry in
``update_sets`` can only stay itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from ....errors import SpecError
from ...spec import BoundSpec, Spec


def check_update_sets(key: str, value: Any) -> None:
    """``model.update_sets``: a mapping value -> list of values (CUS, Def. 12) that is closed: b ∈ CUS(a) implies
    CUS(b) ⊆ CUS(a) (the note under Def. 12), each CUS holding its own value. SpecError naming the value."""
    for source, targets in value.items():
        if not isinstance(targets, list | tuple):
            raise SpecError(f"model.{key}.{source}: expected a list of sensitive values (CUS({source})), "
                            f"got {targets!r}")
    cus = closed_sets(value)
    for a in sorted(cus):
        for b in sorted(cus[a] - {a}):
            missing = sorted(cus.get(b, {b}) - cus[a])
            if missing:
                raise SpecError(
                    f"model.{key}.{a}: CUS({a!r}) holds {b!r} but not all of CUS({b!r}) (missing {missing}); "
                    f"Li-Zhou Def. 12: a value that can become {b!r} can become whatever {b!r} can, so add them to "
                    f"CUS({a!r}) or remove them from CUS({b!r})"
                )


def closed_sets(update_sets: Mapping[Any, Any]) -> dict[str, set[str]]:
    """CUS(v) of every value named as a key, as sets of strings, each holding v itself (Def. 12)."""
    return {str(a): {str(a), *(str(b) for b in targets)} for a, targets in update_sets.items()}


def check_spec(spec: Spec) -> None:
    """With a sensitive domain written in the spec, ``update_sets`` names values of that domain only."""
    domain = spec.sensitive_values
    if not spec.sensitive_written or domain is None:
        return
    named = {v for a, targets in closed_sets(spec.model.params["update_sets"]).items() for v in {a, *targets}}
    unknown = sorted(named - set(domain))
    if unknown:
        raise SpecError(f"model.update_sets: value(s) {unknown} are not in the sensitive domain of "
                        f"{spec.sensitive!r} ({list(domain)})")


def cus_matrix(spec: BoundSpec) -> np.ndarray:
    """(V, V) bool: ``C[a, b]`` is b ∈ CUS(a) over ``spec.sensitive_values`` (bound spec); a value without an entry
    can only stay itself. O(V² + size of update_sets)."""
    values = pd.Index(spec.sensitive_values)
    C = np.eye(len(values), dtype=bool)
    for a, targets in closed_sets(spec.model.params["update_sets"]).items():
        if a in values:
            at = values.get_indexer(sorted(targets))
            C[values.get_loc(a), at[at >= 0]] = True
    return C


def classes_of(C: np.ndarray, strict: bool) -> np.ndarray:
    """The key by which new records are grouped (§V-B, §V-D): the value itself; under ``strict`` the connected
    component of the value in the "CUSs overlap" graph, so that a group of distinct components has pairwise
    disjoint CUSs (m-Distinct' condition 2). O(V³) for the overlap matrix."""
    if not strict:
        return np.arange(len(C))
    overlap = (C.astype(np.int64) @ C.T.astype(np.int64)) > 0
    return connected_components(csr_matrix(overlap), directed=False)[1]
