"""Great Expectations 1.x suites for a release candidate: schema and values, never the guarantee itself.

GE checks what a pandas batch can express: the published columns are exactly those of the
DuckDB contract (so no identifier column leaks), every generalised bound is ordered (``A__lo <= A__hi``) and
inside its attribute's domain, and every sensitive value is in the sensitive domain. The guarantees across
releases are the core verifiers' job. ``dagster-ge`` needs great-expectations < 1, so GE is called directly with
an ephemeral context (no files written).

Two suites say the same (``release_rules``): ``release_suite``, one expectation per rule, whose results are the
report (which column broke which rule, how many rows, which values), and ``screen_suite``, whose success implies
``release_suite``'s and which GE evaluates with aggregates (a column's min or max) instead of row maps where it
can. A candidate is screened first, with GE's ``BOOLEAN_ONLY`` result format; only when the screen fails is
``release_suite`` validated, on the same table with GE's default format, so a report is exactly the one
``release_suite`` alone would give. GE is imported on first use and its context made and the suites built once
per process (``_candidates``, ``_suites``): the import costs 2.7-3.7 s of CPU in a fresh process (2.1 s once
Dagster's instance has loaded SQLAlchemy; scipy.stats and altair, which GE imports, are most of the rest), each
release then only the screen. Loading the code location, or a CLI command that validates nothing, never pays
for it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import pandas as pd

from ..core.judge.history import Report
from ..core.progress import step
from ..core.spec import BoundSpec

if TYPE_CHECKING:
    import great_expectations as gx
    from great_expectations.core.batch_definition import BatchDefinition
    from great_expectations.core.expectation_validation_result import ExpectationSuiteValidationResult as SuiteResult
    from great_expectations.core.result_format import ResultFormatUnion

    from ..storage import ReleaseStore

NAME = "great_expectations"

#: One validation at a time through the process's one context (GE's context is not documented as thread-safe).
_LOCK = threading.Lock()


def published_columns(spec: BoundSpec, attributes: tuple[str, ...]) -> list[str]:
    """The columns of a release table (without ``release_id``) per the DuckDB contract."""
    columns = ["group_id"]
    for name in attributes:
        columns += [name, f"{name}__lo", f"{name}__hi"]
    return [*columns, *spec.non_identifiers, spec.sensitive]


class Domain(NamedTuple):
    """The published domain of one generalised attribute: ``A__lo`` in ``[low, high]``, ``A__hi`` in
    ``[low, top]``, ``A__lo <= A__hi`` and the label ``A`` never null. A bound given as text is the name of a
    suite parameter (GE's ``$PARAMETER``) whose value the validation is given (``_parametrised``)."""

    name: str
    low: float | str
    high: float | str
    top: float | str


class Rules(NamedTuple):
    """Everything the suites of a release depend on (hashable: the key of ``_suites``)."""

    name: str
    columns: tuple[str, ...]
    domains: tuple[Domain, ...]
    sensitive: str
    values: tuple[str, ...]


def rule_columns(spec: BoundSpec, attributes: Sequence[str]) -> list[str]:
    """The columns of the snapshot ``release_rules`` reads for a release of ``attributes``: the numeric
    quasi-identifiers among them (read those alone: the whole snapshot of a 10M-row table is gigabytes of text).
    O(attributes)."""
    return [name for name in attributes if spec.quasi_identifiers[name].numeric]


def release_rules(spec: BoundSpec, snapshot: pd.DataFrame, attributes: tuple[str, ...]) -> Rules:
    """The rules a release of ``snapshot`` (at least its ``rule_columns``) under the bound ``spec`` must meet.
    Cost: a min and a max per numeric attribute of ``snapshot``.

    Domain of a numeric attribute: ``[min, max]`` of the snapshot for ``A__lo`` and ``[min, max + min_width]``
    for ``A__hi`` (intervals widen upward, Xiao-Tao §4.1); of a categorical one: leaf ranks ``0 .. leaves-1``.
    """
    domains = []
    for name in attributes:
        qi = spec.quasi_identifiers[name]
        if qi.numeric:
            low, high = float(snapshot[name].min()), float(snapshot[name].max())
            domains.append(Domain(name, low, high, high + qi.min_width))
        else:
            top = len(spec.taxonomy(name).leaves) - 1
            domains.append(Domain(name, 0, top, top))
    columns = tuple(published_columns(spec, attributes))
    return Rules(spec.name, columns, tuple(domains), spec.sensitive, tuple(spec.sensitive_values))


def _parametrised(rules: Rules) -> tuple[Rules, dict[str, float]]:
    """``rules`` with every domain bound replaced by the name of a suite parameter, and the parameters' values: the
    suites of the parametrised rules depend on the spec and the released attributes only, not on the snapshot's
    min and max, so ``_suites`` builds them once per process and table, not once per release (GE builds an
    expectation in about 10 ms: 0.3 s a suite on Census-KDD). A top equal to its high bound stays the same
    parameter, so that ``_screen_suite`` leaves out the same expectations. O(attributes)."""
    domains, values = [], {}
    for i, d in enumerate(rules.domains):
        low, high = f"low_{i}", f"high_{i}"
        top = high if d.top == d.high else f"top_{i}"
        values.update({low: float(d.low), high: float(d.high), top: float(d.top)})
        domains.append(Domain(d.name, low, high, top))
    return rules._replace(domains=tuple(domains)), values


def _bound(value: float | str) -> Any:
    """A domain bound as an expectation takes it: a number, or a reference to the suite parameter it names."""
    return {"$PARAMETER": value} if isinstance(value, str) else value


def release_suite(spec: BoundSpec, snapshot: pd.DataFrame, attributes: tuple[str, ...]) -> gx.ExpectationSuite:
    """The expectations a release of ``snapshot`` under the bound ``spec`` must meet, one per rule of
    ``release_rules`` (a new suite; GE needs an active context to build one: ``_candidates`` makes it)."""
    with _LOCK:
        _candidates()
    return _release_suite(release_rules(spec, snapshot, attributes))


def _release_suite(rules: Rules) -> gx.ExpectationSuite:
    """One expectation per rule, each a map over the rows (its result counts and lists the rows that break it):
    2 + 4 per attribute (30 on Census-KDD's 7)."""
    import great_expectations as gx

    ex = gx.expectations
    suite = gx.ExpectationSuite(name=f"{rules.name}_release")
    suite.add_expectation(ex.ExpectTableColumnsToMatchSet(column_set=list(rules.columns), exact_match=True))
    for d in rules.domains:
        lo, hi = f"{d.name}__lo", f"{d.name}__hi"
        suite.add_expectation(ex.ExpectColumnPairValuesAToBeGreaterThanB(column_A=hi, column_B=lo, or_equal=True))
        suite.add_expectation(ex.ExpectColumnValuesToBeBetween(column=lo, min_value=_bound(d.low),
                                                               max_value=_bound(d.high)))
        suite.add_expectation(ex.ExpectColumnValuesToBeBetween(column=hi, min_value=_bound(d.low),
                                                               max_value=_bound(d.top)))
        suite.add_expectation(ex.ExpectColumnValuesToNotBeNull(column=d.name))
    suite.add_expectation(ex.ExpectColumnValuesToBeInSet(column=rules.sensitive, value_set=list(rules.values)))
    return suite


def screen_suite(spec: BoundSpec, snapshot: pd.DataFrame, attributes: tuple[str, ...]) -> gx.ExpectationSuite:
    """A suite whose success implies ``release_suite``'s on any table (a new suite; see ``_screen_suite``)."""
    with _LOCK:
        _candidates()
    return _screen_suite(release_rules(spec, snapshot, attributes))


def _screen_suite(rules: Rules) -> gx.ExpectationSuite:
    """The rules of ``release_suite`` with GE's aggregates in place of row maps where they say the same.

    Per attribute: ``A__hi >= A__lo`` on every row, nulls included (``ignore_row_if="neither"``: a null bound
    fails the comparison); ``min(A__lo) >= low``, ``max(A__lo) <= high`` (numeric only: for a categorical one
    ``high == top``), ``max(A__hi) <= top``; ``A`` not null. With the order on every row these imply each
    non-null bound in its range of ``release_suite``: ``A__hi >= A__lo >= low`` and ``A__lo <= A__hi <= top``.
    Stricter only where it does not matter to a release (a null bound, an empty or all-null column, whose min is
    NaN): the screen then fails and ``release_suite`` decides. Cost: GE's fixed cost per expectation (about
    2 ms for an aggregate, 4-7 for a row map on 120k rows) and one pass over each column it reads.
    """
    import great_expectations as gx

    ex = gx.expectations
    suite = gx.ExpectationSuite(name=f"{rules.name}_release_screen")
    suite.add_expectation(ex.ExpectTableColumnsToMatchSet(column_set=list(rules.columns), exact_match=True))
    for d in rules.domains:
        lo, hi = f"{d.name}__lo", f"{d.name}__hi"
        suite.add_expectation(
            ex.ExpectColumnPairValuesAToBeGreaterThanB(column_A=hi, column_B=lo, or_equal=True, ignore_row_if="neither")
        )
        suite.add_expectation(ex.ExpectColumnMinToBeBetween(column=lo, min_value=_bound(d.low)))
        if d.high != d.top:
            suite.add_expectation(ex.ExpectColumnMaxToBeBetween(column=lo, max_value=_bound(d.high)))
        suite.add_expectation(ex.ExpectColumnMaxToBeBetween(column=hi, max_value=_bound(d.top)))
        suite.add_expectation(ex.ExpectColumnValuesToNotBeNull(column=d.name))
    suite.add_expectation(ex.ExpectColumnValuesToBeInSet(column=rules.sensitive, value_set=list(rules.values)))
    return suite


@functools.cache
def _candidates() -> BatchDefinition:
    """The process's one ephemeral GE context (no progress bars), as the batch definition of a whole pandas
    frame: made on first use (GE's import, 2-4 s of CPU) and reused by every later validation."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return (
        context.data_sources.add_pandas("release")
        .add_dataframe_asset("release_candidate")
        .add_batch_definition_whole_dataframe("candidate")
    )


@functools.lru_cache(maxsize=16)
def _suites(rules: Rules) -> tuple[gx.ExpectationSuite, gx.ExpectationSuite]:
    """``(release suite, screen suite)`` of ``rules`` (parametrised: ``_parametrised``), built once per process
    and rules (0.1-0.3 s each); GE's validation reads a suite and never changes it."""
    _candidates()
    return _release_suite(rules), _screen_suite(rules)


def _validate(suite: gx.ExpectationSuite, table: pd.DataFrame, result_format: ResultFormatUnion,
              parameters: dict[str, float] | None = None) -> SuiteResult:
    """GE's validation of ``suite`` on ``table`` in ``result_format``, its suite parameters set to ``parameters``
    (``_parametrised``): what ``Batch.validate`` does, without the
    batch it would load first (GE loads the batch again inside, fingerprinting the whole frame each time: 50 ms
    on 120k rows of Census-KDD, strings mostly); ``table`` is released from GE's batch cache afterwards."""
    from great_expectations.validator.v1_validator import Validator

    candidates = _candidates()
    validator = Validator(candidates, result_format=result_format, batch_parameters={"dataframe": table})
    try:
        return validator.validate_expectation_suite(suite, expectation_parameters=parameters)
    finally:  # GE's batch cache would keep ``table`` alive until the next validation (1.9 GB at 10M rows)
        batches = candidates.data_asset.datasource.get_execution_engine().batch_manager
        batches.reset_batch_cache()
        batches.batch_data_cache.clear()


def validate_release(table: pd.DataFrame, spec: BoundSpec, snapshot: pd.DataFrame, attributes: tuple[str, ...]) -> Report:
    """Validate a release table against ``release_suite``; one violation row per failed expectation.
    ``snapshot`` needs only its ``rule_columns``.

    The table is screened first (``screen_suite``, ``BOOLEAN_ONLY``); a pass is ``release_suite``'s pass (its
    expectations counted, none failed), a failure validates ``release_suite`` with GE's default format for the
    report. Cost: GE's import, context and suites once per process and table (the
    snapshot's bounds are suite parameters: ``_parametrised``), then the screen (about 0.2 s on 120k rows
    of Census-KDD, 0.1 s on 20k, GE's fixed cost per expectation most of it), and ``release_suite`` (1-2 s on
    120k rows: a copy of the whole frame per row map) only when the screen fails. Reported as the step
    ``expectations`` (``core.progress``).
    """
    with step("expectations"), _LOCK:
        rules, parameters = _parametrised(release_rules(spec, snapshot, attributes))
        full, screen = _suites(rules)
        if _validate(screen, table, "BOOLEAN_ONLY", parameters).success:
            return Report(NAME, True, _violations([]), {"expectations": len(full.expectations), "failed": 0})
        result = _validate(full, table, "SUMMARY", parameters)
    failed = [r for r in result.results if not r.success]
    # a result of ``validate`` always carries the expectation it checked
    checked = [(r.expectation_config, r.result) for r in failed if r.expectation_config is not None]
    summary = {"expectations": len(result.results), "failed": len(failed)}
    return Report(NAME, bool(result.success), _violations(checked), summary)


def validate_candidate(store: ReleaseStore, release_id: int) -> Report:
    """``validate_release`` of the candidate staged for ``release_id`` in ``store``, against the staged spec
    (``staged_bound_spec``) and the snapshot's ``rule_columns`` alone. Cost: the candidate's read, a scan of those
    columns, the validation."""
    candidate = store.candidate(release_id)
    spec = store.staged_bound_spec(release_id)
    snapshot = store.snapshot(release_id, rule_columns(spec, candidate.attributes))
    assert snapshot is not None, "a staged candidate has a staged snapshot"
    return validate_release(candidate.table, spec, snapshot, candidate.attributes)


def _violations(checked: list) -> pd.DataFrame:
    """One row per failed expectation: its type, its column(s), how many rows broke it and what was seen."""
    return pd.DataFrame(
        {
            "expectation": [config.type for config, _ in checked],
            "column": [_columns(config.kwargs) for config, _ in checked],
            "unexpected": [int(outcome.get("unexpected_count", 0) or 0) for _, outcome in checked],
            "observed": [_observed(outcome) for _, outcome in checked],
        }
    )


def _columns(kwargs: dict) -> str:
    names = [kwargs[k] for k in ("column", "column_A", "column_B") if kwargs.get(k)]
    return ", ".join(names) if names else "(table)"


def _observed(result: dict) -> str:
    if "partial_unexpected_list" in result:
        return repr([_plain(v) for v in result["partial_unexpected_list"][:5]])
    return repr(result.get("observed_value"))


def _plain(value):
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value.item() if hasattr(value, "item") else value
