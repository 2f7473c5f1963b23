"""Shmueli-Tassa (sequential l-diversity over possible worlds): Defs. 3.1-3.2, §3-5.

- ``admits_world``: Def. 3.1, one release admits one world (a bijection of generalising pairs), as a maximum
  flow;
- ``world_diversity``: Def. 3.2, the set E of worlds links no individual to one value in more than |E|/l worlds;
- ``sequential_l_diversity``: both over a history (Thm. 4.1), with tuples that come and go (§5);
- ``worlds_from_permutations``: the stored fake worlds (Eq. (5), (8)) as full tables;
- ``verify_sequential_l_diversity``: the model's checks of a candidate release, through the judge's window.

Releases may be non-homogeneous (``group_id`` null: per-tuple generalisation, Eq. (2)).

The joins by id run on the table's backend (``partitioned.lookup``): the compact worlds' individuals and their
sources found in T (``worlds_from_permutations``: Eqs. (5) and (8) build world tuples from two tuples of T), a
world restricted to a release's individuals (§5: a release speaks of the tuples present then), and T(n-1)'s
tuples found in T(n) (``_extends``: §5.2's insertions only); so do Def. 3.2's links per (individual, value)
(``world_diversity``, a ``count_per_key``). The flows of Def. 3.1 and the codes of the ids run on the driver.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_flow

from ...encoding import qi_values, value_codes
from ...grouping import released_attributes
from ...intervals import contained_pairs
from ...partitioned import aggregations, lookup
from ...spec import BoundSpec
from ...stream import changes_at
from ..attacks.vertical import sweep_pairs, unique_rows_by_key
from ..history import History, Report
from ..report import verifier_report

#: The column of the compact worlds naming the tuple whose values an individual takes is ``source_<id>``.
SOURCE_PREFIX = "source_"


def source_column(spec: BoundSpec) -> str:
    """``source_<id>``: the column of the compact worlds naming the tuple whose suffix an individual takes."""
    return f"{SOURCE_PREFIX}{spec.id}"


def worlds_from_permutations(truth: pd.DataFrame, permutations: pd.DataFrame, spec: BoundSpec) -> dict[str, pd.DataFrame]:
    """Full tables of the fake worlds stored as ``private.possible_world(world, <id>, source_<id>)``.

    World tuple of ``<id>`` = the identifier and QIs of ``<id>`` with the non-identifiers and sensitive value of
    ``source_<id>`` (Shmueli-Tassa Eq. (5) and (8)), in the order of ``permutations`` (a row whose ``<id>`` or
    ``source_<id>`` is not in ``truth`` has no world tuple), the columns of ``truth`` that the spec names: the
    inner merges on ``<id>`` then ``source_<id>`` this stands for. Both columns of every world are looked up
    among the ids of ``truth`` at once (``partitioned.lookup`` on the table's backend, step ``world tuples by
    individual``), then each world is one gather of rows: O(n + worlds x n).
    """
    source = source_column(spec)
    columns = truth.columns.intersection(spec.columns)
    own = [c for c in columns if c not in (spec.id, *spec.non_identifiers, spec.sensitive)]
    carried = [c for c in columns if c in (*spec.non_identifiers, spec.sensitive)]
    n = len(permutations)
    found = lookup(np.concatenate([permutations[spec.id].to_numpy(), permutations[source].to_numpy()]),
                   truth[spec.id].to_numpy(), "world tuples by individual")
    worlds = {}
    for name, rows in sorted(permutations.groupby("world", sort=True).indices.items()):
        who, whose = found[rows], found[n + rows]
        keep = (who >= 0) & (whose >= 0)
        who, whose = who[keep], whose[keep]
        world = pd.concat([permutations[[spec.id]].iloc[rows[keep]].reset_index(drop=True),
                           truth[own].take(who).reset_index(drop=True),
                           truth[carried].take(whose).reset_index(drop=True)], axis=1)
        worlds[str(name)] = world[columns]
    return worlds


def _exact_attributes(release: pd.DataFrame, spec: BoundSpec) -> list[str]:
    """The exact attributes a release publishes: non-identifiers and sensitive value not null in every row (an
    attribute null in some rows only is matched as released, so its nulls match nothing: strict)."""
    return [c for c in (*spec.non_identifiers, spec.sensitive) if c in release.columns and release[c].notna().any()]


#: Blocks of equal exact attributes are flowed in chunks of at least this many edges (``_admitted``).
_CHUNK_EDGES = 200_000


def _admitted(boxes: np.ndarray, box_count: np.ndarray, points: np.ndarray, point_count: np.ndarray,
              d: int) -> bool:
    """Def. 3.1's bijection exists: the maximum flow source -> box types (row counts) -> point types they cover ->
    sink (tuple counts) saturates every tuple (Hall's condition). The flow is unique in value, so this decides
    as ``admits_world``'s own flow does. Boxes and points of different blocks (exact attributes) share no edge,
    so the network is a disjoint union: it is flowed in chunks of whole blocks of at least ``_CHUNK_EDGES``
    edges (at most 16 chunks), each built in CSR order from ``sweep_pairs`` (no candidate filtering, no sort),
    stopping at the first chunk left unsaturated (smaller networks take Dinic fewer passes; 100k rows over
    {age, sex, education, marital}, 2.3M edges in 14 blocks: about 0.6 s per world). ``boxes``: (b, 1 + 2d)
    block, lo, hi; ``points``: (n, 1 + d) block, point. O(``sweep_pairs`` + the flows)."""
    lo = boxes[:, : 1 + d]
    hi = np.column_stack([boxes[:, :1], boxes[:, 1 + d:]])
    order, box, point_rank = sweep_pairs(points, lo, hi)
    blocks, box_block = np.unique(boxes[:, 0], return_inverse=True)
    point_block = np.searchsorted(blocks, points[order, 0])  # a block without boxes: beyond, or a wrong match
    point_block[(point_block >= len(blocks)) | (blocks[point_block.clip(max=len(blocks) - 1)] != points[order, 0])] = -1
    if (point_block < 0).any():
        return False  # tuples of a block no released row carries
    per_block = np.cumsum(np.bincount(box_block[box], minlength=len(blocks)))
    chunk = (np.concatenate(([0], per_block[:-1])) // max(_CHUNK_EDGES, -(-int(per_block[-1]) // 16))).astype(np.int64)
    pc = point_count[order]
    edge_chunk = chunk[box_block[box]]
    local_box, local_point = np.empty(len(boxes), np.int64), np.empty(len(points), np.int64)
    for c in np.unique(chunk):
        bs, ps = np.flatnonzero(chunk[box_block] == c), np.flatnonzero(chunk[point_block] == c)
        local_box[bs], local_point[ps] = np.arange(len(bs)), np.arange(len(ps))
        sel = np.flatnonzero(edge_chunk == c)
        b, p = local_box[box[sel]], local_point[point_rank[sel]]  # monotone relabelling keeps the CSR order
        nb, npt = len(bs), len(ps)
        sink = nb + npt + 1
        counts = np.concatenate([[nb], np.bincount(b, minlength=nb), np.ones(npt, np.int64), [0]])
        indices = np.concatenate([1 + np.arange(nb), 1 + nb + p, np.full(npt, sink)]).astype(np.int32)
        cap = np.concatenate([box_count[bs], np.minimum(box_count[bs][b], pc[ps][p]), pc[ps]]).astype(np.int32)
        graph = csr_array((cap, indices, np.concatenate(([0], np.cumsum(counts))).astype(np.int32)),
                          shape=(sink + 1, sink + 1))
        graph.has_sorted_indices = True
        if maximum_flow(graph, 0, sink).flow_value < int(pc[ps].sum()):
            return False
    return True


def admits_world(release: pd.DataFrame, world: pd.DataFrame, spec: BoundSpec) -> tuple[bool, pd.DataFrame]:
    """Does one release admit the world (Shmueli-Tassa Def. 3.1)? A bijection must pair every world tuple with a
    released row that generalises it: the tuple's QI values lie in the row's intervals (leaf ranks for
    categoricals; a suppressed attribute, null bounds in a row, §2.1, covers everything) and its released
    non-identifiers and sensitive value equal the row's.

    Identical boxes and identical world points are merged into types, so the question is a transportation
    problem: a maximum flow source -> box types (row counts) -> point types they cover -> sink (tuple counts),
    admitted iff the flow saturates every tuple (Hall's condition; scipy ``maximum_flow``, Dinic). Returns
    ``(admitted, unmatched)`` where ``unmatched`` lists the world tuples (by id) of point types left unsaturated.
    The verdict is decided by ``_admitted`` (edges from ``sweep_pairs``, the block of equal exact attributes as
    one more column, flowed block by block; about 0.8 s of CPU per world for 100k rows over {age, sex, education,
    marital}); a world it does not admit is flowed again on the edges of ``intervals.contained_pairs`` in their
    order, so that the unsaturated tuples reported are those of that flow whichever way the verdict was reached.
    O(n log n + edges) plus the flow.
    """
    qis, exact = released_attributes(release, spec), _exact_attributes(release, spec)
    if len(release) != len(world):
        unmatched = world[[spec.id]].assign(detail=f"{len(world)} world tuples, {len(release)} released rows")
        return False, unmatched
    block = _blocks(release, world, exact)
    rb, wb = block[: len(release)], block[len(release):]
    lo = release[[f"{q}__lo" for q in qis]].to_numpy(dtype=np.float64).reshape(len(release), len(qis))
    hi = release[[f"{q}__hi" for q in qis]].to_numpy(dtype=np.float64).reshape(len(release), len(qis))
    point = np.stack([qi_values(world[q], spec, q) for q in qis], axis=1) if qis else np.zeros((len(world), 0))
    if qis and len(point):  # a suppressed cell covers the whole domain: bounds just outside every value
        lo = np.where(np.isnan(lo), point.min(axis=0) - 1, lo)
        hi = np.where(np.isnan(hi), point.max(axis=0) + 1, hi)
    boxes, _, box_count = unique_rows_by_key(np.column_stack([rb, lo, hi]))
    points, point_of, point_count = unique_rows_by_key(np.column_stack([wb, point]))
    d = len(qis)
    if d and _admitted(boxes, box_count, points, point_count, d):
        return True, world[[spec.id]].iloc[:0].assign(detail=pd.Series(dtype=str))
    p_idx, b_idx = contained_pairs(points, boxes[:, : 1 + d], np.column_stack([boxes[:, :1], boxes[:, 1 + d:]]))
    nb, npt = len(boxes), len(points)
    sink = nb + npt + 1
    tail = np.concatenate([np.zeros(nb, int), 1 + b_idx, 1 + nb + np.arange(npt)])
    head = np.concatenate([1 + np.arange(nb), 1 + nb + p_idx, np.full(npt, sink)])
    cap = np.concatenate([box_count, np.minimum(box_count[b_idx], point_count[p_idx]), point_count])
    graph = csr_array((cap.astype(np.int32), (tail, head)), shape=(sink + 1, sink + 1))
    flow = maximum_flow(graph, 0, sink)
    if flow.flow_value == len(world):
        return True, world[[spec.id]].iloc[:0].assign(detail=pd.Series(dtype=str))
    edges = flow.flow.tocoo()
    to_sink = edges.col == sink
    into_sink = np.zeros(npt, dtype=np.int64)
    np.add.at(into_sink, edges.row[to_sink] - (1 + nb), edges.data[to_sink])
    short = np.flatnonzero(into_sink < point_count)
    bad = np.isin(point_of, short)
    missing = (point_count - into_sink)[point_of[bad]]
    unmatched = world.loc[bad, [spec.id]].assign(
        detail=[f"{k} tuple(s) of this QI point and {', '.join(exact)} have no released row left" for k in missing])
    return False, unmatched.reset_index(drop=True)


def _blocks(release: pd.DataFrame, world: pd.DataFrame, exact: list[str]) -> np.ndarray:
    """The block of each released row, then of each world tuple: the rows with equal ``exact`` attributes
    compared as text, numbered in order of first appearance (a groupby over the text, ``sort=False``), by the
    columns' value codes (``encoding.value_codes``) and one hash pass over their rows (``unique_rows_by_key``;
    past 2^62 combinations of codes it numbers them in sorted order, which changes only the order the blocks are
    flowed in). O(n x exact)."""
    if not exact:
        return np.zeros(len(release) + len(world), dtype=np.int64)
    codes = [value_codes(pd.concat([release[c], world[c]], ignore_index=True))[0] for c in exact]
    return unique_rows_by_key(np.column_stack(codes))[1]


def _missing_rows(before: pd.DataFrame, after: pd.DataFrame, columns: list[str]) -> int:
    """How many rows of ``before`` have no row of ``after`` with the same ``columns`` (a left merge on them with
    ``after``'s duplicates dropped, counting the rows left unmatched; a null matches a null, as in a merge): each
    column's values hashed once over both frames, the rows numbered by ``unique_rows_by_key``, one ``np.isin``.
    O((before + after) x columns); none hashed when ``before`` is row for row the start of ``after`` (as
    ``possible_worlds.extend_worlds`` makes the worlds: release n-1's, then the new tuples'), O(before)."""
    if len(before) <= len(after) and all(
            np.array_equal(before[c].to_numpy(), after[c].to_numpy()[: len(before)]) for c in columns):
        return 0
    codes = [pd.factorize(pd.concat([before[c], after[c]], ignore_index=True), use_na_sentinel=False)[0]
             for c in columns]
    row = unique_rows_by_key(np.column_stack(codes))[1] if codes else np.zeros(len(before) + len(after), np.int64)
    return int((~np.isin(row[: len(before)], row[len(before):])).sum())


def world_diversity(worlds: Mapping[str, pd.DataFrame], spec: BoundSpec, l: float) -> Report:  # noqa: E741
    """Shmueli-Tassa Def. 3.2: the set E of worlds (the true one included) is l-diverse when no individual is
    linked to one sensitive value in more than |E|/l of the worlds. One violation per (individual, value), in
    order of id then value. The ids and values are coded by one hash pass each (sorted codes, on the driver) and
    the links per (id, value) counted on the table's backend (``count_per_key``, step ``world links by
    individual``): O(worlds x n log(worlds x n))."""
    ids = pd.concat([w[spec.id] for w in worlds.values()], ignore_index=True)
    values = pd.concat([w[spec.sensitive] for w in worlds.values()], ignore_index=True)
    person, people = pd.factorize(ids, sort=True)  # the (id, value) pairs in sorted order, as a groupby gives them
    value, domain = pd.factorize(values, sort=True)
    known = (person >= 0) & (value >= 0)  # a null key is no link, as a groupby drops it
    links = aggregations().count_per_key({"person": person[known], "value": value[known]},
                                         "world links by individual")
    over = links["count"] * l > len(worlds)
    bad = pd.DataFrame({spec.id: np.asarray(people)[links["person"][over]],
                        spec.sensitive: np.asarray(domain)[links["value"][over]],
                        "worlds": links["count"][over]})
    bad["rule"] = f"Shmueli-Tassa Def. 3.2: |E[v, s]| / |E| <= 1/l = {1 / l:.3g}"
    bad["detail"] = [f"linked to {s!r} in {k} of {len(worlds)} worlds" for s, k in zip(bad[spec.sensitive],
                                                                                        bad["worlds"], strict=True)]
    return verifier_report("world_diversity", bad, worlds=len(worlds), l=l)


def sequential_l_diversity(
    releases: pd.DataFrame, worlds: Mapping[str, pd.DataFrame], spec: BoundSpec, l: float,  # noqa: E741
    snapshots: pd.DataFrame | None = None,
) -> list[Report]:
    """Shmueli-Tassa §3-4: every release admits every world of E (Def. 3.1; the true world among them), and E is
    l-diverse (Def. 3.2), so that no individual is linked to a value with probability above 1/l (Thm. 4.1).

    ``releases``: published rows with ``release_id`` (``group_id`` may be null). ``worlds``: name -> full table.
    ``snapshots``: when tuples come and go (§5), each release is matched against the world restricted to the ids
    of its snapshot (a look-up of the world's individuals among the snapshot's, ``partitioned.lookup`` on the
    table's backend). Returns ``[worlds_admitted, world_diversity]`` (named apart from the ``possible_worlds``
    attack and stage, since the pipeline keys its checks by report name). O(releases x worlds) ``admits_world``
    calls.
    """
    parts, checked = [], 0
    for release_id, release in releases.groupby("release_id", sort=True):
        present = None if snapshots is None else snapshots.loc[snapshots["release_id"] == release_id, spec.id]
        for name, world in worlds.items():
            table = world if present is None else world[
                lookup(world[spec.id], present, "world individuals by release") >= 0]
            ok, unmatched = admits_world(release.reset_index(drop=True), table.reset_index(drop=True), spec)
            checked += 1
            if not ok:
                parts.append(unmatched.assign(release_id=release_id, world=name,
                                              rule="Shmueli-Tassa Def. 3.1: the release admits the possible world"))
    violations = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["release_id", "world", spec.id, "rule", "detail"])
    admitted = verifier_report("worlds_admitted", violations, checks=checked, worlds=len(worlds))
    return [admitted, world_diversity(worlds, spec, l)]


def verify_sequential_l_diversity(history: History) -> list[Report]:
    """Model ``sequential_l_diversity``: the Shmueli-Tassa checks of the last release R of ``history`` (the candidate, before publication):
    R admits the true world and every fake world rebuilt from ``history.states["possible_worlds"]`` (Def. 3.1,
    Theorem 4.3; ``worlds_admitted``), the ℓ worlds are ℓ-diverse (Def. 3.2; ``world_diversity``), and the worlds
    of R extend those of R - 1 with T unchanged on its tuples (``possible_worlds_extend``).

    Why R alone suffices: every earlier release was checked against its own worlds when it was published, and
    the extension between consecutive releases (no deletion, no update, R - 1's world rows all among R's, each
    individual once per world) makes R's worlds restricted to the individuals of any earlier release equal that
    release's worlds, by induction; so every earlier release admits R's worlds on the individuals it published
    (§5.2), and the whole history admits all ℓ worlds. Cost O(ℓ |R| log |R|), independent of the number
    of earlier releases (only the states and snapshots of R and R - 1 are read): the judge's window
    (``History.first == R - 1``) holds exactly that, and gives the same reports as the complete history
    (``tests/core/judge/test_vertical_incremental.py``). No memo.
    """
    spec = history.spec
    l = int(spec.model.params["l"])  # noqa: E741
    ids = history.release_ids
    last = ids[-1]
    before = ids[-2] if len(ids) > 1 else None
    worlds_of = _worlds_by_release(history, [last] if before is None else [before, last])
    if last not in worlds_of:
        missing = pd.DataFrame({"release_id": [last], "rule": ["Shmueli-Tassa Alg. 1: a release has its worlds"],
                                "detail": ["the history holds no possible-world set for this release"]})
        return [verifier_report("worlds_admitted", missing)]
    truth = _coded(history.snapshot(last).drop(columns="release_id"), spec)
    worlds = {"0": truth, **worlds_from_permutations(truth, worlds_of[last], spec)}
    reports = sequential_l_diversity(history.release(last), worlds, spec, l)
    return [*reports, _extends(history, worlds_of, last, before)]


def _coded(truth: pd.DataFrame, spec: BoundSpec) -> pd.DataFrame:
    """``truth`` with its text categorical QIs and sensitive column as pandas categoricals (never null in a
    validated snapshot), so that the worlds gathered from it carry them too and each world's leaf ranks and value
    codes are read by counting (``encoding.codes_in``), not hashed again per world: the same values, the same
    reports. O(n) per column, once."""
    text = [q for q, qi in spec.quasi_identifiers.items() if not qi.numeric and q in truth.columns]
    text = [c for c in (*text, spec.sensitive) if c in truth.columns and truth[c].dtype == object]
    return truth.astype(dict.fromkeys(text, "category")) if text else truth


def _worlds_by_release(history: History, releases: list[int]) -> dict[int, pd.DataFrame]:
    """The compact worlds of ``releases`` in ``history.states`` (release id -> frame without ``release_id``)."""
    state = history.states.get("possible_worlds")
    if state is None:
        return {}
    state = state[state["release_id"].isin(releases)]
    return {int(r): frame.drop(columns="release_id") for r, frame in state.groupby("release_id", sort=True)}


def _extends(history: History, worlds_of: dict[int, pd.DataFrame], last: int, before: int | None) -> Report:
    """``possible_worlds_extend``: release ``before``'s worlds are a subset of release ``last``'s, and T(before)
    is T(last) restricted to its individuals (no deletion, no update; §5.2), T(last)'s tuples looked up among
    T(before)'s on the table's backend (``partitioned.lookup``). O(|R|)."""
    spec = history.spec
    parts = []
    if before is not None:
        was, now = (history.snapshot(j).drop(columns="release_id") for j in (before, last))
        where = lookup(now[spec.id], was[spec.id], "extension by individual")
        delta = changes_at(was, now, spec.id, where)
        if delta["deletes"] or delta["updates"]:
            parts.append(f"T({before}) -> T({last}): {delta['deletes']} deletion(s), {delta['updates']} update(s)")
        if before not in worlds_of:
            parts.append(f"release {before} holds no possible-world set")
        else:
            lost = _missing_rows(worlds_of[before], worlds_of[last], ["world", spec.id, source_column(spec)])
            if lost:
                parts.append(f"{lost} world tuple(s) of release {before} are not in release {last}'s worlds")
    violations = pd.DataFrame({
        "release_id": [last] * len(parts),
        "rule": ["Shmueli-Tassa §5.2: the worlds of a release extend the previous release's"] * len(parts),
        "detail": parts,
    })
    return verifier_report("possible_worlds_extend", violations)
