"""The SUG attack on data with internal updates (Li-Zhou §III: Defs. 10-12, eqs. 1-2, Lemma 2): the sensitive
attribute update graph of each individual, its feasible sub-SUG and the risk of the true value in each layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from ...encoding import codes_in
from ...spec import BoundSpec
from ..history import Bound, History, Report
from ..report import attack_report, skipped
from .intersection import NO_DISCLOSURE, candidate_sets


def _update_matrix(update_sets: Mapping[str, Iterable[str]], spec: BoundSpec) -> np.ndarray:
    """E[s, s'] = s' is in CUS(s) (Li-Zhou Def. 12); a value is always in its own CUS."""
    values = pd.Index(spec.sensitive_values)
    E = np.eye(len(values), dtype=bool)
    for source, targets in update_sets.items():
        if source in values:
            idx = values.get_indexer([t for t in targets if t in values])
            E[values.get_loc(source), idx] = True
    return E


def sug_attack(
    history: History, bound: Bound = NO_DISCLOSURE, update_sets: Mapping[str, Iterable[str]] | None = None
) -> Report:
    """The SUG attack on data with internal updates (Li-Zhou §III: Defs. 10-11, eqs. 1-2, Lemma 2).

    For each individual the sensitive attribute update graph has one layer per release it appears in, the
    nodes of layer i being its candidate sensitive set C_i (``candidate_sets``; the up-to-date adversary knows
    its QI values in each release), and an edge s -> s' between consecutive layers when s' is in CUS(s)
    (``update_sets``, default the spec's ``model.update_sets``). Node weights are 1/|C_i| and edge weights
    1/out-degree (random world assumption, Example 3). The feasible sub-SUG keeps the nodes on a path from the first layer
    to the last (Def. 11); the risk of the true value at layer i is the weight of the feasible paths through it
    over the weight of all feasible paths (eqs. 1-2), computed by a forward-backward recursion over all
    individuals at once instead of enumerating paths. By Lemma 2 the risk is 1 iff the layer keeps one node.
    Violations: ``id, release_id, size`` (feasible nodes of that layer), ``risk``, ``candidates``, for
    layers with fewer than the bound. O(releases x n x values^2) (``sug_risks``) plus the candidate sets.
    """
    spec = history.spec
    sets = update_sets if update_sets is not None else spec.model.params.get("update_sets")
    if sets is None:
        return skipped("sug", "no candidate update sets (CUS): pass update_sets= or set the spec's model.update_sets")
    if history.snapshots is None:
        return skipped("sug", "no snapshots: the adversary's QI values and lifespans are unknown")
    frame, feasible = sug_risks(history, sets)
    return attack_report("sug", frame, frame["size"].to_numpy(), bound.values, spec.sensitive_values, feasible,
                         {"max_risk": float(frame["risk"].max()) if len(frame) else 0.0})


def sug_risks(history: History, update_sets: Mapping[str, Iterable[str]]) -> tuple[pd.DataFrame, np.ndarray]:
    """Every layer of every individual's feasible sub-SUG (see ``sug_attack``): ``id, release_id, size, risk``
    and the boolean matrix of its feasible nodes over ``spec.sensitive_values``. O(releases * n * S^2)."""
    spec = history.spec
    E = _update_matrix(update_sets, spec).astype(np.float64)
    if history.snapshots is None:
        raise ValueError("sug_risks: no snapshots (the adversary's QI values and lifespans)")
    people = pd.Index(history.snapshots[spec.id].drop_duplicates())
    n, S = len(people), len(spec.sensitive_values)
    layers = []
    forward = np.zeros((n, S))
    seen = np.zeros(n, dtype=bool)
    for j in history.release_ids:
        individuals, css = candidate_sets(history, j)
        who = people.get_indexer(individuals[spec.id])
        weight = css / np.maximum(css.sum(axis=1, keepdims=True), 1)
        prev = forward[who]
        out_degree = css.astype(np.float64) @ E.T  # per previous value: its successors in C_i
        step = np.where(out_degree > 0, prev / np.where(out_degree > 0, out_degree, 1), 0) @ E
        f = np.where(seen[who, None], step * weight, weight)
        f /= np.maximum(f.sum(axis=1, keepdims=True), 1e-300)
        forward[who] = f
        seen[who] = True
        layers.append((j, who, css, weight, f, individuals[spec.sensitive]))
    backward = np.ones((n, S))
    frames, sets = [], []
    for j, who, css, weight, f, truth_values in reversed(layers):
        b = backward[who]
        through = f * b
        total = through.sum(axis=1)
        feasible = through > 0
        truth = codes_in(truth_values, spec.sensitive_values)
        risk = through[np.arange(len(who)), truth] / np.maximum(total, 1e-300)
        frames.append(pd.DataFrame({spec.id: people[who], "release_id": j, "size": feasible.sum(axis=1),
                                    "risk": risk}))
        sets.append(feasible)
        out_degree = css.astype(np.float64) @ E.T
        nxt = (b * weight) @ E.T
        back = np.where(out_degree > 0, nxt / np.where(out_degree > 0, out_degree, 1), 0)
        back /= np.maximum(back.max(axis=1, keepdims=True), 1e-300)
        backward[who] = back
    return pd.concat(frames[::-1], ignore_index=True), np.concatenate(sets[::-1])
