"""The one code path from a snapshot to a published release.

Four steps, each a function a Dagster asset or check calls on a ``ReleaseStore`` (``release_next`` chains them
without Dagster):

1. ``stage``: validate the snapshot T(i) and store it (never overwriting an earlier capture of T(i));
2. ``make_candidate``: run the spec's model on T(i), the bound spec and what it may read of release i-1
   (Xiao-Tao Lemma 4), with the release's own random generator, and stage the candidate;
3. ``judge``: the independent verifiers (``core.verify``) and the attack suite (``core.attacks``) over the
   published history with the candidate appended, as the adversary would read it after publication;
4. ``publish``: refuse (``NotPublishable``) when a blocking report failed, else publish the candidate with
   its checks and utility (``core.utility.summarise``) in one transaction.

A guarantee the model promises always blocks. Attacks block only for models that claim protection across
releases (m-invariance and the later models); for the single-release baselines (k-anonymity, l-diversity) they
are reported, not blocking: showing that they disclose across releases is the point of running them.
Bad input fails in ``stage`` before anything is written, so nothing is ever half-published.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .core.history import Report
from .core import models
from .core.release import Release, release_rng
from .core.spec import Spec, validate_snapshot
from .core.stream import changes
from .core.utility import summarise
from .errors import NotPublishable, SnapshotError, SpecError, StoreError
from .storage import ReleaseStore, frame_digest

def read_snapshot(path: str | Path) -> pd.DataFrame:
    """A snapshot file as a frame: ``.csv`` (header row) or ``.parquet``/``.pq``. SnapshotError naming the file
    and the reason when it is missing, unreadable or of another format."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise SnapshotError(f"{path}: a snapshot is a .csv or .parquet file, got {suffix or 'no suffix'!r}")
    try:
        return pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    except FileNotFoundError as exc:
        raise SnapshotError(f"{path}: no such snapshot file") from exc
    except Exception as exc:  # pandas and pyarrow raise many types for a malformed file
        raise SnapshotError(f"{path}: cannot read the snapshot as {suffix[1:].upper()} ({exc})") from exc


def next_release_id(store: ReleaseStore) -> int:
    """The id the next release gets: one after the last published (1 for an empty store)."""
    ids = store.release_ids()
    return ids[-1] + 1 if ids else 1


def stage(store: ReleaseStore, release_id: int, df: pd.DataFrame) -> pd.DataFrame:
    """Validate ``df`` and store it as T(release_id); return the stored snapshot (an earlier capture of the same
    release is returned unchanged). SnapshotError for rows the spec refuses, StoreError for an id out of order."""
    store.ensure_schema()
    return store.stage_snapshot(release_id, df)


def model_spec(spec: Spec, attributes: Sequence[str] | None) -> Spec:
    """``spec`` restricted to the quasi-identifiers one release publishes (all of them when None), in spec order.

    SpecError for a name that is not a quasi-identifier of the spec.
    """
    if not attributes:
        return spec
    unknown = [a for a in attributes if a not in spec.quasi_identifiers]
    if unknown:
        raise SpecError(f"attributes {unknown} are not quasi-identifiers of spec {spec.name!r} "
                            f"(they are {list(spec.quasi_identifiers)})")
    kept = {n: q for n, q in spec.quasi_identifiers.items() if n in set(attributes)}
    return dataclasses.replace(spec, quasi_identifiers=kept)


def prepare(store: ReleaseStore, release_id: int, stage: str) -> dict[str, pd.DataFrame]:
    """Run the model's stage ``stage`` (``ModelDescriptor.stages``, e.g. the possible-world set) on the staged
    T(release_id) and keep its frames privately with the release (``store.stage_state``); return them.

    Reads what the model reads of the past and ``release_rng(spec, i)``, so a re-run is identical.
    """
    snapshot = _staged(store, release_id)
    spec = store.bound_spec(snapshot)
    model = models.descriptor(spec.model.name)
    step = next((s for s in model.stages if s.name == stage), None)
    if step is None:
        raise SpecError(f"model {model.name} has no stage {stage!r} (its stages: {[s.name for s in model.stages]})")
    frames = step.run(snapshot, spec, store.previous(release_id, model.reads), release_rng(spec, release_id))
    store.stage_state(release_id, frames)
    return frames


def make_candidate(store: ReleaseStore, release_id: int, attributes: Sequence[str] | None = None) -> Release:
    """Run the spec's model on the staged T(release_id) and stage the result as the release's candidate.

    The model reads T(i), the spec bound to the stored domains and T(i) (ranks never move), what its
    descriptor says it reads of the past (``ModelDescriptor.reads``; Xiao-Tao Lemma 4: release i-1), the frames
    its stages kept for release i (``prepare``), and ``release_rng(spec, i)``, so a re-run is identical.
    ``attributes`` restricts the published quasi-identifiers (a projection request); None publishes all.
    """
    snapshot = _staged(store, release_id)
    spec = model_spec(store.bound_spec(snapshot), attributes)
    model = models.descriptor(spec.model.name)
    prepared = store.staged_state(release_id) if model.stages else {}
    missing = [s.name for s in model.stages if s.name not in prepared]
    if missing:
        raise StoreError(f"release {release_id}: stage(s) {missing} of model {model.name} have not run; prepare "
                         "them first (the Dagster assets of the same names)")
    previous = store.previous(release_id, model.reads)
    release = model.publish(snapshot, spec, previous, release_rng(spec, release_id), **prepared)
    release.state = {**prepared, **release.state}
    store.stage_candidate(release_id, release)
    return release


def _staged(store: ReleaseStore, release_id: int) -> pd.DataFrame:
    snapshot = store.snapshot(release_id)
    if snapshot is None:
        raise StoreError(f"release {release_id}: no snapshot staged; stage the snapshot first")
    return snapshot


def judge(store: ReleaseStore, release_id: int) -> list[Report]:
    """The verifiers and attacks over releases 1..i-1 plus the candidate of release i.

    Each report's summary gets ``kind`` ("guarantee" or "attack") and ``blocking`` (a failed guarantee always
    blocks; a disclosing attack blocks unless the model is a single-release baseline). The candidate sets the
    attacks computed are kept in the store, so judging release i+1 computes only its own.
    """
    history = store.history(candidate=release_id)
    kept = dict(history.candidate_sets)  # read back from the store: only sets computed now are saved
    attacks_block = models.descriptor(history.spec.model.name).across_releases
    reports = []
    for kind, found, blocks in (
        ("guarantee", models.verify_history(history), True),
        ("attack", models.attack_history(history), attacks_block),
    ):
        for report in found:
            report.summary["kind"] = kind
            report.summary["blocking"] = blocks
            reports.append(report)
    store.save_candidate_sets({j: css for j, css in history.candidate_sets.items() if kept.get(j) is not css})
    return reports


def blocking_failures(reports: Sequence[Report]) -> list[Report]:
    """The failed reports that forbid publication (a report without a ``blocking`` flag blocks)."""
    return [r for r in reports if not r.ok and r.summary.get("blocking", True)]


def publish(store: ReleaseStore, release_id: int, reports: Sequence[Report]) -> dict:
    """Publish the staged candidate of ``release_id`` with its checks and utility; return its summary.

    Refuses (NotPublishable naming each failed report and its first violation) when a blocking report failed.
    The summary: release_id, model, rows, groups, counterfeits, inserts, deletes, updates (against T(i-1)),
    checks (name -> passed) and utility (``core.utility.summarise``).
    """
    failed = blocking_failures(reports)
    if failed:
        raise NotPublishable(f"release {release_id} is not published: " + "; ".join(map(_failure, failed)))
    release = store.candidate(release_id)
    snapshot = store.snapshot(release_id)
    spec = store.bound_spec(snapshot)
    utility = summarise(release.table, release.counterfeits, spec, snapshot=snapshot)
    checks = {r.name: bool(r.ok) for r in reports}
    store.publish(release_id, release, checks, utility)
    delta = release_changes(store, release_id, snapshot)
    return {
        "release_id": release_id,
        "model": release.model,
        "rows": len(release.table),
        "groups": release.groups,
        "counterfeits": release.counterfeit_count,
        **delta,
        "checks": checks,
        "utility": utility,
    }


def refuse_restaging(store: ReleaseStore, release_id: int, df: pd.DataFrame) -> None:
    """StoreError when ``release_id`` was staged earlier from rows other than ``df`` and never published: a
    staged snapshot is never overwritten, and silently publishing the old capture would surprise the caller."""
    staged = store.snapshot(release_id)
    if staged is not None and frame_digest(validate_snapshot(df, store.spec)) != frame_digest(staged):
        raise StoreError(
            f"{store.path}: release {release_id} was staged earlier from other rows and never published; a staged "
            f"snapshot is never overwritten. Publish it as it is (its partition in Dagster), or discard it first "
            f"(privrelease discard --release {release_id}, or ReleaseStore.discard({release_id}))"
        )


def release_changes(store: ReleaseStore, release_id: int, snapshot: pd.DataFrame | None = None) -> dict[str, int]:
    """Inserts, deletes and updates of T(release_id) (``snapshot``, read from the store when None) against
    T(release_id - 1); every row is an insert in the first release."""
    snapshot = store.snapshot(release_id) if snapshot is None else snapshot
    if release_id == 1:
        return {"inserts": len(snapshot), "deletes": 0, "updates": 0}
    return changes(store.snapshot(release_id - 1), snapshot, store.spec.id)


def release_next(
    store: ReleaseStore,
    df: pd.DataFrame,
    attributes: Sequence[str] | None = None,
) -> dict:
    """Stage, make the candidate, judge and publish ``df`` as the next release; return ``publish``'s summary.

    When the next release was staged earlier (a run that stopped before publishing) from other rows, refuses
    (StoreError) rather than silently publishing the old capture: ``ReleaseStore.discard`` drops it.
    """
    with store.session():
        release_id = next_release_id(store)
        refuse_restaging(store, release_id, df)
        stage(store, release_id, df)
        for step in models.descriptor(store.spec.model.name).stages:
            prepare(store, release_id, step.name)
        make_candidate(store, release_id, attributes)
        reports = judge(store, release_id)
        return publish(store, release_id, reports)


def _failure(report: Report) -> str:
    """``name failed (n violations, first: {...})`` for a NotPublishable message."""
    violations = report.violations
    if violations is None or len(violations) == 0:
        return f"{report.name} failed"
    first = {k: (v.item() if hasattr(v, "item") else v) for k, v in violations.iloc[0].items()}
    return f"{report.name} failed ({len(violations)} violation(s), first: {first})"
