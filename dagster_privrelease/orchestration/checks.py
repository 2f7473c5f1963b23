"""Blocking asset checks on a release candidate; each reads only its own partition.

- ``guarantee``: the model's guarantee verified over the whole history with the candidate appended (the core
  verifiers, e.g. m-invariance Def. 4 of Xiao-Tao);
- ``attacks``: the attack suite (Tobar-Nicolau's taxonomy). It blocks for models that protect across
  releases; for the single-release baselines a disclosure is reported as a warning, since those models make
  no promise across releases (that is what the baselines demonstrate);
- ``expectations``: Great Expectations 1.x, schema and values (``expectations.py``).

A failing check has severity ERROR, so ``published_release`` (downstream) does not run and ``published``
stays as it was; the check's metadata says why.
"""

import warnings

import dagster as dg
from dagster import AssetCheckExecutionContext

from .. import pipeline
from ..core.judge.history import Report
from .expectations import validate_release
from .partitions import step
from .report import report_metadata
from .translator import ReleaseTable

#: The blocking checks of a candidate.
CHECKS = ("guarantee", "attacks", "expectations")


def candidate_checks(table: ReleaseTable, candidate: dg.AssetKey) -> list[dg.AssetChecksDefinition]:
    """The three blocking checks of ``table``'s release candidate (key ``candidate``), partitioned like it.

    Partitioned checks are a preview feature of the pinned Dagster; they are what lets each check read only its
    own release, so its PreviewWarning is silenced here, where it is known and accepted, and nowhere else.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return _candidate_checks(table, candidate)


def _candidate_checks(table: ReleaseTable, candidate: dg.AssetKey) -> list[dg.AssetChecksDefinition]:
    partitions = table.partitions
    specs = [
        dg.AssetCheckSpec(
            "guarantee", asset=candidate, blocking=True, partitions_def=partitions,
            description="The model's guarantee holds over the whole release history with this candidate.",
        ),
        dg.AssetCheckSpec(
            "attacks", asset=candidate, blocking=True, partitions_def=partitions,
            description="The attack suite discloses nobody beyond the model's bound.",
        ),
    ]

    @dg.multi_asset_check(
        specs=specs, name=f"{table.name}_judge", required_resource_keys={table.store}, pool=table.pool
    )
    def judge_candidate(context: AssetCheckExecutionContext):
        with step(context, table) as part:
            reports = pipeline.judge(part.store, part.release_id)
        guarantees = [r for r in reports if r.summary.get("kind") != "attack"]
        attacks = [r for r in reports if r.summary.get("kind") == "attack"]
        yield result("guarantee", candidate, guarantees)
        yield result("attacks", candidate, attacks)

    @dg.asset_check(
        asset=candidate,
        name="expectations",
        blocking=True,
        partitions_def=partitions,
        required_resource_keys={table.store},
        pool=table.pool,
        description="Great Expectations: no identifier column, ordered bounds inside the domain, sensitive "
        "values in the domain.",
    )
    def expectations(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
        with step(context, table) as part:
            candidate_release = part.store.candidate(part.release_id)
            snapshot = part.store.snapshot(part.release_id)
            spec = part.store.bound_spec(snapshot)
            outcome = validate_release(candidate_release.table, spec, snapshot, candidate_release.attributes)
        return result("expectations", candidate, [outcome])

    return [judge_candidate, expectations]


def result(name: str, asset: dg.AssetKey, reports: list[Report]) -> dg.AssetCheckResult:
    """One check result over ``reports``: ERROR when a blocking report broke (``pipeline.blocking_failures``),
    WARN when only reports that do not block (attacks on a single-release baseline) broke. Metadata per report:
    ``<name>/ok`` (1 or 0) and its summary and violations (``report.report_metadata``: counts, and where, by
    release and group, never an individual), or ``<name>/skipped`` with the reason an attack did not run."""
    broken = [r for r in reports if not r.ok]
    blocked = pipeline.blocking_failures(reports)
    severity = dg.AssetCheckSeverity.ERROR if blocked else dg.AssetCheckSeverity.WARN
    metadata: dict = {"broken": ", ".join(r.name for r in broken) or "none"}
    for r in reports:
        if r.summary.get("skipped"):  # not a pass: the attack did not run, and why
            metadata[f"{r.name}/skipped"] = str(r.summary["skipped"])
            continue
        metadata.update({f"{r.name}/{k}": v for k, v in report_metadata(r).items()})
        metadata[f"{r.name}/ok"] = int(bool(r.ok))
    return dg.AssetCheckResult(
        check_name=name,
        asset_key=asset,
        passed=not broken,
        severity=severity,
        metadata=metadata,
        description="; ".join(f"{r.name}: {len(r.violations)} violation(s)" for r in broken) or None,
    )
