"""The model contract: what every registered model keeps on a changing table, run by ``run_contract``.

A model passes when, on a stream of releases published through ``pipeline.release_next`` on a real
``ReleaseStore``, for every kind of identifier (``ID_KINDS``: integers, text ``p00123x``, text that differs only
by zero padding, UUID strings):

- every release publishes, or is refused by the model itself (a ``NotPublishable`` raised before a candidate
  exists, never a failed judge check nor any other exception); a refusal leaves the published releases as they
  were and the next release publishes;
- the judge as ``pipeline.judge`` ran it at a release (through its window; the manifest's checks) agrees with
  the judge run from scratch on the complete history up to that release (every ``judge_every``-th release and
  the last), and the model's verifiers hold on that complete history;
- no identifier appears in a refusal message, a release summary, the manifest, the ``published`` schema, a
  report's summary or its public violations (``pipeline.public_violations``).

The stream (``Case``) holds inserts every release and, for a model that supports them, deletions, people who
come back after an absence (with their old rows), a whole group of the last release leaving (one that hosted a
newcomer of that release when there is one), sensitive-value updates within the model's candidate update sets,
attribute subsets for a vertical model, and once a table the model must refuse. A third-party model runs the
contract from its own tests::

    from dagster_privrelease.testing.contract import Case, run_contract

    def test_my_model_keeps_the_contract(tmp_path):
        run_contract(tmp_path / "store.duckdb", Case(model={"name": "my_model", "k": 3}), "text")

``Case.spec`` and ``Case.people`` replace the table when the default one (``CLINIC``) does not suit the model.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import pipeline
from ..core import models
from ..core.judge.history import Report
from ..core.judge.run import attack_history, verify_history
from ..core.spec import parse_spec
from ..errors import NotPublishable, StoreError
from ..storage import ReleaseStore


class ContractViolation(AssertionError):
    """A model broke the contract; the message names the model, the id kind, the release and the rule."""


# ------------------------------------------------------------------------------------------------ identifiers


def integer_ids(numbers: np.ndarray) -> np.ndarray:
    """Integers no other column of the table can hold by chance (7,100,000 + n)."""
    return 7_100_000 + numbers.astype(np.int64)


def text_ids(numbers: np.ndarray) -> np.ndarray:
    """Text ids ``p00123x``."""
    return np.array([f"p{n:05d}x" for n in numbers], dtype=object)


def padded_ids(numbers: np.ndarray) -> np.ndarray:
    """Digit strings that differ only by zero padding: persons 3k, 3k+1 and 3k+2 are ``5000k``, ``005000k`` and
    ``0005000k`` (e.g. ``5000007``, ``005000007``, ``0005000007``), three people."""
    return np.array(["0" * (0, 2, 3)[n % 3] + str(5_000_000 + n // 3) for n in numbers], dtype=object)


def uuid_ids(numbers: np.ndarray) -> np.ndarray:
    """UUID strings, one per person number (``uuid5``, deterministic)."""
    return np.array([str(uuid.uuid5(uuid.NAMESPACE_URL, f"privrelease-contract/{n}")) for n in numbers], dtype=object)


#: The kinds of identifier every model is run with: name -> person numbers to ids.
ID_KINDS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "integer": integer_ids, "text": text_ids, "padded": padded_ids, "uuid": uuid_ids,
}


# ---------------------------------------------------------------------------------------------- the table


DISEASES = ("flu", "hiv", "gastritis", "bronchitis", "asthma")

#: The default table: a clinic's patients (the spec without its ``model``).
CLINIC: Mapping[str, Any] = {
    "name": "contract",
    "id": "pid",
    "sensitive": "disease",
    "quasi_identifiers": {
        "age": {"type": "numeric", "min_width": 1},
        "sex": {"type": "categorical"},
        "region": {"type": "categorical", "hierarchy": {"Any": {"North": ["n1", "n2"], "South": ["s1", "s2"]}}},
    },
    "non_identifiers": ["visits"],
}


def clinic_people(count: int, rng: np.random.Generator) -> pd.DataFrame:
    """``count`` new rows of ``CLINIC`` (no id column), their diseases as even as ``count`` allows, so that any
    batch of newcomers is as diverse as it can be."""
    return pd.DataFrame({
        "age": rng.integers(20, 70, count), "sex": rng.choice(["F", "M"], count),
        "region": rng.choice(["n1", "n2", "s1", "s2"], count), "visits": rng.integers(0, 9, count),
        "disease": rng.permutation(np.resize(np.array(DISEASES, dtype=object), count)),
    })


@dataclass(frozen=True)
class Case:
    """One model's stream in the contract.

    model:      the spec's ``model`` mapping (name and parameters).
    spec:       the spec without ``model``; its id column is the one ``people`` leaves out.
    people:     ``(count, rng) -> rows`` of new people, every column of ``spec`` but the id.
    deletes:    the stream deletes people and lets whole groups leave (False: insertions only, for a model that
                refuses deletions by design).
    inserts:    newcomers arrive every release (False: the same people throughout, for a model of one table).
    returners:  with ``deletes``, people who left come back after an absence, with their old rows.
    updates:    people change their sensitive value, within ``model.update_sets`` (every value when absent).
    attributes: the attribute subsets of consecutive releases, cycled (None: every quasi-identifier).
    refused:    ``(last published rows, sensitive column) -> rows`` the model must refuse itself; submitted once,
                as release ``REFUSED_AT``, before that release's ordinary table.
    note:       what the stream holds and why, in words (documentation only).
    """

    model: Mapping[str, Any]
    spec: Mapping[str, Any] = field(default_factory=lambda: dict(CLINIC))
    people: Callable[[int, np.random.Generator], pd.DataFrame] = clinic_people
    deletes: bool = True
    inserts: bool = True
    returners: bool = True
    updates: bool = False
    attributes: tuple[tuple[str, ...] | None, ...] = (None,)
    refused: Callable[[pd.DataFrame, str], pd.DataFrame] | None = None
    note: str = ""


#: The release at which ``Case.refused`` is submitted.
REFUSED_AT = 4


def _few(rows: pd.DataFrame, sensitive: str) -> pd.DataFrame:
    """Two rows of the table: fewer than k = 3."""
    return rows.head(2)


def _one_value(rows: pd.DataFrame, sensitive: str) -> pd.DataFrame:
    """Everyone with the same sensitive value: no group is diverse."""
    return rows.assign(**{sensitive: rows[sensitive].iloc[0]})


def _outside_cus(rows: pd.DataFrame, sensitive: str) -> pd.DataFrame:
    """One person's flu becomes hiv, outside ``_CLUSTERS``' CUS(flu)."""
    changed = rows.copy()
    changed.loc[changed[sensitive].eq("flu").idxmax(), sensitive] = "hiv"
    return changed


def _inserted(rows: pd.DataFrame, sensitive: str) -> pd.DataFrame:
    """One more person: a copy of the first row under an id no one has (the largest id, doubled: text or number)."""
    ident = rows.columns[0]
    extra = rows.iloc[[0]].assign(**{ident: [rows[ident].max() * 2]})
    return pd.concat([rows, extra], ignore_index=True)


def _deleted(rows: pd.DataFrame, sensitive: str) -> pd.DataFrame:
    """Three people deleted."""
    return rows.iloc[3:]


#: Candidate update sets (Li-Zhou Def. 12, closed): a disease changes within its cluster only.
_CLUSTERS = {d: list(c) for c in (("flu", "bronchitis", "asthma"), ("hiv", "gastritis")) for d in c}
_SUBSETS = (("sex", "region"), ("age", "sex"), ("age", "region"), None)

#: The contract's stream for each builtin model. A model registered without an entry here runs with a ``Case``
#: of its own (``case_for`` refuses to guess its parameters).
CASES: dict[str, Case] = {
    "k_anonymity": Case({"name": "k_anonymity", "k": 3}, refused=_few,
                        note="inserts, deletes, returners, groups leaving; refuses a table of 2 rows"),
    "l_diversity": Case({"name": "l_diversity", "l": 2}, refused=_one_value,
                        note="inserts, deletes, returners, groups leaving; refuses a table of one disease"),
    "m_invariance": Case({"name": "m_invariance", "m": 2}, refused=_one_value,
                         note="inserts, deletes, returners, groups leaving; refuses a table of one disease"),
    "m_distinct": Case({"name": "m_distinct", "m": 2, "update_sets": _CLUSTERS}, updates=True,
                       refused=_outside_cus, note="inserts, deletes, returners, groups leaving, disease updates "
                                                  "within the CUS; refuses an update outside the CUS"),
    "sequential_l_diversity": Case(
        {"name": "sequential_l_diversity", "l": 2}, deletes=False, attributes=_SUBSETS, refused=_deleted,
        note="insertions only, a different attribute subset each release; refuses a deletion (the model supports "
             "insertions only by design, Shmueli-Tassa §5.3)"),
    "xy_privacy": Case(
        {"name": "xy_privacy", "X": ["age", "sex", "region"], "Y": [], "k": 2}, deletes=False, inserts=False,
        attributes=(None, *_SUBSETS[:3]), refused=_inserted,
        note="one table, a different attribute subset each release; the join k-anonymous on X (Y: [], Wang-Fung "
             "§5.4 Case 4, Example 1's requirement); refuses a table with a newcomer (Wang-Fung release projections "
             "of one table, §1.2)"),
}


def case_for(name: str) -> Case:
    """The contract's stream for the registered model ``name``; ContractViolation for a model without one."""
    models.descriptor(name)
    if name not in CASES:
        raise ContractViolation(f"model {name}: no contract case; run it with a Case naming its parameters")
    return CASES[name]


# ------------------------------------------------------------------------------------------------ the run


@dataclass
class Outcome:
    """What a contract run saw: the published release ids, the model's refusals (release id, message), and how
    many people came back after an absence, whole groups left (and how many of them hosted a newcomer), and
    people changed their sensitive value, in releases that published."""

    published: list[int] = field(default_factory=list)
    refusals: list[tuple[int, str]] = field(default_factory=list)
    returners: int = 0
    groups_left: int = 0
    newcomer_groups_left: int = 0
    updates: int = 0


@dataclass
class _Table:
    """The stream's state: the people in the table, those away (their rows kept), the next person number."""

    rows: pd.DataFrame
    away: pd.DataFrame
    next_number: int


def run_contract(path: str | Path, case: Case, id_kind: str = "text", releases: int = 12, rows: int = 120,
                 seed: int = 0, judge_every: int = 1) -> Outcome:
    """Run ``case``'s model through the contract (module docstring) on a new store at ``path``.

    Args:
        path: where the DuckDB store is created (must not exist).
        case: the model and its stream.
        id_kind: a key of ``ID_KINDS``.
        releases: how many releases must publish.
        rows: the size of the first release; each later one inserts about rows/12 people and, with
            ``case.deletes``, deletes about rows/15, brings back up to rows/20 and, every third release, lets a
            whole group leave.
        seed: the stream's random seed (the model's own randomness is the spec's ``seed``).
        judge_every: the judge is run again from scratch on the complete history up to every
            ``judge_every``-th release and the last (each costs a judge of the whole history so far).

    Returns:
        What the run saw (``Outcome``), for tests that want more than the contract.

    Raises:
        ContractViolation: naming the model, the id kind, the release and the broken rule.
    """
    spec = parse_spec({**case.spec, "model": dict(case.model), "seed": seed})
    name = f"{spec.model.name} ({id_kind} ids)"
    store = ReleaseStore(path, spec)
    rng = np.random.default_rng(seed)
    ids = ID_KINDS[id_kind]
    people = _people(case, ids, spec.id, rng)
    state = _Table(people(np.arange(rows)), people(np.arange(0)), rows)
    outcome, said, seen, probed = Outcome(), [], [], False
    with store.session():
        for _ in range(2 * releases):
            if len(outcome.published) == releases:
                break
            release_id = len(seen) + 1
            attributes = case.attributes[(release_id - 1) % len(case.attributes)]
            if case.refused is not None and release_id == REFUSED_AT and not probed:
                probed = True
                published, message = _attempt(store, name, release_id, case.refused(state.rows, spec.sensitive),
                                              attributes)
                if published:
                    raise ContractViolation(f"{name}, release {release_id}: published a table Case.refused says "
                                            "the model refuses")
                _no_ids(name, [message], ids(np.arange(state.next_number)))
                outcome.refusals.append((release_id, message))
                continue
            step = state if release_id == 1 else _step(store, case, state, people, rng, rows, seen)
            published, message = _attempt(store, name, release_id, step.rows, attributes)
            said.append(message)
            if not published:
                _no_ids(name, [message], ids(np.arange(step.next_number)))
                outcome.refusals.append((release_id, message))
                continue
            _count(store, spec.sensitive, state.rows, step.rows, seen, outcome)
            seen.append(pd.Index(step.rows[spec.id]))
            outcome.published.append(release_id)
            state = step
        if len(outcome.published) < releases:
            raise ContractViolation(f"{name}: {len(outcome.published)} of {releases} releases published in "
                                    f"{2 * releases} attempts; refusals: {[m for _, m in outcome.refusals]}")
        said += _judged_again(store, name, judge_every)
        said.append(store.manifest().to_csv())
        said += _published_text(store)
    _no_ids(name, said, ids(np.arange(state.next_number)))
    return outcome


def _attempt(store: ReleaseStore, name: str, release_id: int, rows: pd.DataFrame,
             attributes: Sequence[str] | None) -> tuple[bool, str]:
    """Publish ``rows`` as release ``release_id``: (True, the summary as text) when it published, (False, the
    model's message) when the model refused. ContractViolation for any other outcome: another exception, a refusal by the judge, a refusal that changed
    the published schema, a changed table found unchanged."""
    before = _fingerprint(store)
    try:
        summary = pipeline.release_next(store, rows, attributes)
    except NotPublishable as exc:
        _check_refusal(store, name, release_id, exc, before)
        return False, str(exc)
    except Exception as exc:
        raise ContractViolation(f"{name}, release {release_id}: {type(exc).__name__}: {exc}") from exc
    if summary["outcome"] != "published" or summary["release_id"] != release_id:
        raise ContractViolation(f"{name}, release {release_id}: a changed table was {summary['outcome']} as "
                                f"release {summary['release_id']}")
    return True, repr(summary)


def _people(case: Case, ids: Callable[[np.ndarray], np.ndarray], id_column: str,
            rng: np.random.Generator) -> Callable[[np.ndarray], pd.DataFrame]:
    """Rows of new people numbered ``numbers``: ``case.people`` with the id column first."""
    def make(numbers: np.ndarray) -> pd.DataFrame:
        frame = case.people(len(numbers), rng).reset_index(drop=True)
        frame.insert(0, id_column, ids(numbers))
        return frame
    return make


def _step(store: ReleaseStore, case: Case, state: _Table, people: Callable[[np.ndarray], pd.DataFrame],
          rng: np.random.Generator, size: int, seen: list[pd.Index]) -> _Table:
    """The next table from ``state`` (the last published one, ``seen[-1]``): some leave (every third release, a
    whole group of the last release too), some of those away come back with their rows, newcomers arrive, some
    change their sensitive value."""
    spec = store.spec
    rows, away = state.rows, state.away
    if case.deletes:
        leaving = rng.choice(len(rows), size // 15, replace=False)
        if (len(seen) + 1) % 3 == 0:
            leaving = np.union1d(leaving, np.flatnonzero(rows[spec.id].isin(_group_to_leave(store, seen, rng))))
        back = np.zeros(len(away), dtype=bool)
        if case.returners:
            back[rng.choice(len(away), min(size // 20, len(away)), replace=False)] = True
        kept = np.ones(len(rows), dtype=bool)
        kept[leaving] = False
        rows, away = (pd.concat([rows[kept], away[back]], ignore_index=True),
                      pd.concat([away[~back], rows[~kept]], ignore_index=True))
    newcomers = max(size // 12, 2) if case.inserts else 0
    rows = pd.concat([rows, people(np.arange(state.next_number, state.next_number + newcomers))], ignore_index=True)
    if case.updates:
        rows = _updated(rows, spec.sensitive, case.model.get("update_sets") or {}, rng, size // 20)
    return _Table(rows, away, state.next_number + newcomers)


def _hosting(store: ReleaseStore, release_id: int) -> pd.DataFrame:
    """``private.hosting`` of release ``release_id``: the id and the group of each tuple a group hosts."""
    with store.connect(read_only=True) as con:
        frame = con.execute("SELECT * FROM private.hosting WHERE release_id = ? AND group_id IS NOT NULL",
                            [release_id]).df()
    return frame[[store.spec.id, "group_id"]]


def _group_to_leave(store: ReleaseStore, seen: list[pd.Index], rng: np.random.Generator) -> np.ndarray:
    """The ids of one group of the last published release: one hosting a newcomer of that release when there is
    one, else any (none for a model that publishes no groups)."""
    hosting = _hosting(store, len(seen))
    if hosting.empty:
        return np.zeros(0, dtype=object)
    ids = hosting[store.spec.id]
    new = ~ids.isin(seen[-2]) if len(seen) > 1 else pd.Series(False, index=hosting.index)
    groups = np.unique(hosting.loc[new, "group_id"] if new.any() else hosting["group_id"])
    return ids[hosting["group_id"] == rng.choice(groups)].to_numpy()


def _updated(rows: pd.DataFrame, sensitive: str, update_sets: Mapping[str, Sequence[str]],
             rng: np.random.Generator, count: int) -> pd.DataFrame:
    """``rows`` with ``count`` people's sensitive value changed to another value of its update set (every value
    of the column when ``update_sets`` has none for it)."""
    rows = rows.copy()
    every = sorted(rows[sensitive].astype(str).unique())
    for row in rng.choice(len(rows), count, replace=False):
        old = str(rows.at[row, sensitive])
        choices = [v for v in update_sets.get(old, every) if v != old]
        if choices:
            rows.at[row, sensitive] = rng.choice(choices)
    return rows


def _published_names(store: ReleaseStore) -> list[str]:
    """The tables and views of the ``published`` schema."""
    with store.connect(read_only=True) as con:
        return [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                                          "'published' ORDER BY table_name").fetchall()]


def _fingerprint(store: ReleaseStore) -> list[tuple]:
    """Each table of the ``published`` schema with its row count and the sum of its rows' hashes."""
    names = _published_names(store)
    with store.connect(read_only=True) as con:
        return [(n, *con.execute(f'SELECT count(*), sum(hash(t)) FROM published."{n}" t').fetchall()[0])
                for n in names]


def _published_text(store: ReleaseStore) -> list[str]:
    """Every table and view of the ``published`` schema as CSV text."""
    names = _published_names(store)
    with store.connect(read_only=True) as con:
        return [con.execute(f'SELECT * FROM published."{n}"').df().to_csv() for n in names]


def _check_refusal(store: ReleaseStore, name: str, release_id: int, exc: NotPublishable, before: list[tuple]) -> None:
    """A refusal must be the model's own (no candidate was made, so no judge ran) and leave the published
    releases as they were."""
    try:
        store.candidate(release_id)
    except StoreError:
        pass
    else:
        raise ContractViolation(f"{name}, release {release_id}: the judge refused the model's candidate: {exc}")
    if _fingerprint(store) != before:
        raise ContractViolation(f"{name}, release {release_id}: a refusal changed the published schema")


def _count(store: ReleaseStore, sensitive: str, last: pd.DataFrame, now: pd.DataFrame, seen: list[pd.Index],
           outcome: Outcome) -> None:
    """Add to ``outcome`` what release ``len(seen) + 1`` (``now``, after ``last``) did: people back after an
    absence, people who changed their sensitive value, whole groups of the last release that left (and those of
    them that hosted a newcomer)."""
    if not seen:
        return
    id_column = store.spec.id
    ids = now[id_column]
    earlier = seen[:-1]
    outcome.returners += int((~ids.isin(seen[-1]) & ids.isin(earlier[0].append(earlier[1:]) if earlier else [])).sum())
    both = now.merge(last, on=id_column, suffixes=("", "_before"))
    outcome.updates += int((both[sensitive].astype(str) != both[f"{sensitive}_before"].astype(str)).sum())
    hosting = _hosting(store, len(seen))
    if hosting.empty:
        return
    gone = (~hosting[id_column].isin(ids)).groupby(hosting["group_id"]).all()
    outcome.groups_left += int(gone.sum())
    if len(seen) > 1:
        hosted = (~hosting[id_column].isin(seen[-2])).groupby(hosting["group_id"]).any()
        outcome.newcomer_groups_left += int((gone & hosted).sum())


def _judged_again(store: ReleaseStore, name: str, every: int) -> list[str]:
    """Judge every ``every``-th published release and the last from scratch on the complete history up to it.

    Returns:
        The text of every report's summary and public violations, for the scan for ids.

    Raises:
        ContractViolation: unless each report passed as the manifest's checks say (the judge through its window)
            and the model's verifiers hold on the complete history.
    """
    checks = store.manifest().set_index("release_id")["checks"]
    text = []
    ids = store.release_ids()
    for release_id in [j for j in ids if j % every == 0 or j == ids[-1]]:
        history = dataclasses.replace(store.history(upto=release_id), memo={}, candidate_sets={})
        guarantees = verify_history(history)
        reports: list[Report] = [*guarantees, *attack_history(history)]
        complete = {r.name: bool(r.ok) for r in reports}
        if complete != dict(checks[release_id]):
            raise ContractViolation(f"{name}, release {release_id}: the judge through its window said "
                                    f"{dict(checks[release_id])}, on the complete history {complete}")
        failed = [r.name for r in guarantees if not r.ok]
        if failed:
            raise ContractViolation(f"{name}, release {release_id}: verifier(s) {failed} fail on the complete history")
        text += [repr(r.summary) + pipeline.public_violations(r).to_csv() for r in reports]
    return text


def _no_ids(name: str, texts: Iterable[str], ids: np.ndarray) -> None:
    """ContractViolation when one of ``ids`` occurs as a word (letters, digits and dashes) in one of ``texts``."""
    words = set()
    for text in texts:
        words.update(re.findall(r"[0-9A-Za-z][0-9A-Za-z-]*", text))
    leaked = [str(i) for i in ids if str(i) in words]
    if leaked:
        raise ContractViolation(f"{name}: {len(leaked)} id(s) appear outside the private schema, e.g. {leaked[0]!r}")
