"""Blocking asset checks on a release candidate; each reads only its own partition.

- ``guarantee``: the model's guarantee verified over the whole history with the candidate appended (the core
  verifiers, e.g. m-invariance Def. 4 of Xiao-Tao);
- ``attacks``: the attack suite (Tobar-Nicolau's taxonomy). It blocks for models that protect across
  releases; for the single-release baselines a disclosure is reported as a warning, since those models make
  no promise across releases (that is what the baselines demonstrate);
- ``expectations``: Great Expectations 1.x, schema and values (``expectations.py``).

A failing check has severity ERROR, so ``published_release`` (downstream) does not run and ``published``
stays as it was. Each check's description says what it proves; its result reads as a verdict: a one-sentence
description, a ``verdict`` table (one row per verifier or attack: the outcome in words, counts, the bound) and
the few figures worth plotting (``figures``); counts only, never an individual or a group.
"""

import warnings
from collections.abc import Sequence

import dagster as dg
from dagster import AssetCheckExecutionContext

from .. import pipeline
from ..core.judge import attack_registry
from ..core.judge.history import Report
from ..core.partitioned import using
from .expectations import validate_candidate
from .partitions import step
from .report import verdict, verdict_table
from .resources import PrivreleaseBackend
from .translator import ReleaseTable

#: The blocking checks of a candidate.
CHECKS = ("guarantee", "attacks", "expectations")


def candidate_checks(table: ReleaseTable, candidate: dg.AssetKey, guarantee: str) -> list[dg.AssetChecksDefinition]:
    """The three blocking checks of ``table``'s release candidate (key ``candidate``), partitioned like it;
    ``guarantee`` is the model's sentence (``ModelDescriptor.describe``), quoted by the guarantee check.

    Partitioned checks are a preview feature of the pinned Dagster; they are what lets each check read only its
    own release, so its PreviewWarning is silenced here, where it is known and accepted, and nowhere else.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return _candidate_checks(table, candidate, guarantee)


def descriptions(guarantee: str) -> dict[str, str]:
    """What each check proves, in words (the check's description in the UI)."""
    return {
        "guarantee": f"Proves that publishing this candidate keeps the promise of {guarantee}. The model's verifiers "
        "re-check it on the whole published history with the candidate appended, independently of the algorithm "
        "that made it, together with the generalisation (every published value covers its row) and the "
        "counterfeit accounting; any violation blocks publication.",
        "attacks": "Proves that the known attacks on sequential releases ("
        + ", ".join(attack_registry.names()) + ") infer nobody's sensitive value beyond the model's bound once "
        "this candidate joins the history; an attack that does not apply says why it did not run. A disclosure "
        "blocks a model that protects across releases; for a single-release baseline it is reported as a warning.",
        "expectations": "Proves the candidate's shape with Great Expectations: exactly the published columns of "
        "the DuckDB contract (so no identifier column leaks), every generalised bound ordered and inside its "
        "domain, every sensitive value in the sensitive domain.",
    }


def _candidate_checks(table: ReleaseTable, candidate: dg.AssetKey, guarantee: str) -> list[dg.AssetChecksDefinition]:
    partitions = table.partitions
    text = descriptions(guarantee)
    specs = [
        dg.AssetCheckSpec(name, asset=candidate, blocking=True, partitions_def=partitions, description=text[name])
        for name in ("guarantee", "attacks")
    ]

    @dg.multi_asset_check(
        specs=specs, name=f"{table.name}_judge", required_resource_keys={table.store, table.backend},
        pool=table.pool,
    )
    def judge_candidate(context: AssetCheckExecutionContext):
        backend: PrivreleaseBackend = getattr(context.resources, table.backend)
        with step(context, table) as part, using(backend.backend()):  # the judge's joins run where the model ran
            context.log.info(f"{table.name} release {part.key}: the judge's joins by individual run on "
                             f"{backend.where()}")
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
        description=text["expectations"],
    )
    def expectations(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
        with step(context, table) as part:
            outcome = validate_candidate(part.store, part.release_id)
        return result("expectations", candidate, [outcome])

    return [judge_candidate, expectations]


def result(name: str, asset: dg.AssetKey, reports: list[Report]) -> dg.AssetCheckResult:
    """One check result over ``reports``: ERROR when a blocking report broke (``pipeline.blocking_failures``),
    WARN when only reports that do not block (attacks on a single-release baseline) broke.

    Metadata: ``verdict``, one row per report (``report.verdict_table``: the verdict in words, counts, the
    bound), then the figures worth plotting over partitions (``figures``). The description is the verdict in one
    sentence: the broken reports with their counts, or how many held and how many did not run."""
    broken = [r for r in reports if not r.ok]
    blocked = pipeline.blocking_failures(reports)
    severity = dg.AssetCheckSeverity.ERROR if blocked else dg.AssetCheckSeverity.WARN
    rows = [verdict(r) for r in reports]
    if broken:
        description = "Broken: " + "; ".join(f"{row['report']} {str(row['reading']).removeprefix('broken: ')}"
                                             for row in rows if row["outcome"] == "broken")
    else:
        held = [str(row["report"]) for row in rows if row["outcome"] == "holds"]
        description = f"Holds: {', '.join(held) or 'nothing ran'}" + (
            f"; {len(rows) - len(held)} did not run (why: the verdict table)" if len(held) < len(rows) else "")
    return dg.AssetCheckResult(
        check_name=name,
        asset_key=asset,
        passed=not broken,
        severity=severity,
        metadata={"verdict": verdict_table(reports), **figures(name, reports)},
        description=description,
    )


def figures(name: str, reports: Sequence[Report]) -> dict[str, int]:
    """The few figures of check ``name`` worth plotting over partitions (ints, counts of people or items, never
    a pass/fail flag): the verifiers' violations; the attacks' disclosures (people disclosed beyond the bound,
    summed over the attacks), the people attacked (by the attack that examined the most) and the fewest candidate
    values anyone attacked kept (left out when nobody was attacked); the failed expectations."""
    ran = [r for r in reports if not r.summary.get("skipped")]
    if name == "attacks":
        attacked = [r.summary for r in ran if r.summary.get("attacked")]
        out = {"disclosures": sum(int(r.summary.get("disclosed", 0)) for r in ran),
               "people attacked": max((int(s["attacked"]) for s in attacked), default=0)}
        fewest = [int(s["min_candidates"]) for s in attacked if "min_candidates" in s]
        return {**out, "fewest candidate values": min(fewest)} if fewest else out
    if name == "expectations":
        return {"failed expectations": sum(int(r.summary.get("failed", 0)) for r in ran)}
    return {"violations": sum(len(r.violations) for r in ran if not r.ok)}
