"""What the Dagster UI shows about a release: the figures worth plotting, verdict tables, and a small report.

Figures are plain ints and floats so that Dagster plots them across partitions, each utility figure under one
name (``FIGURES``, defined in ``glossary``) wherever it is shown; a pass or a failure is words in a verdict table
(``verdict_table``: one row per verifier or attack, counts only, never an individual or a group), never a number
to plot. The report is markdown with a
small chart of information loss and counterfeits over the published history, drawn as SVG by ``history_svg``
(no plotting library: importing matplotlib cost about 0.5 s of CPU per release process for one chart) and
embedded as a base64 data URI, which Dagster's markdown renderer shows as an image.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from html import escape

import dagster as dg
import numpy as np
import pandas as pd

from ..core.judge.history import Report
from ..core.judge.report import rounded
from ..core.models.base import HELD_BACK

#: The utility figures the UI shows, one name each wherever they are shown (candidate, published release, report):
#: the key of ``core.judge.utility.summarise`` -> (label, definition).
FIGURES = {
    "lm": ("LM", "information loss (Iyengar's loss metric): mean over rows and quasi-identifiers of the share of "
           "the attribute's domain a published value covers; 0 = exact, 1 = fully suppressed"),
    "ncp": ("NCP", "normalised certainty penalty: like LM, a categorical leaf costing 0 and a node its share of "
            "the leaves; 0 = exact, 1 = fully suppressed"),
    "query_error": ("median query error", "median relative error |exact - estimate| / exact of random range-count "
                    "queries answered from the published release (Xiao-Tao §5.2); 0.1 = off by 10%"),
    "discernibility": ("DM", "discernibility: sum over published groups of the group's size squared; lower is "
                       "finer"),
}


def utility_metadata(utility: Mapping) -> dict[str, float]:
    """The utility figures of ``utility`` (``summarise``'s keys) under their ``FIGURES`` labels, rounded
    (``rounded``), in ``FIGURES`` order; a missing or NaN figure is left out."""
    out = {}
    for key, (label, _) in FIGURES.items():
        value = utility.get(key)
        if value is not None and pd.notna(value):
            out[label] = rounded(float(value))
    return out


def glossary(keys: Iterable[str] = tuple(FIGURES)) -> str:
    """The definitions of the figures ``keys`` as a markdown list (asset descriptions, the report)."""
    return "\n".join(f"- **{FIGURES[k][0]}**: {FIGURES[k][1]}." for k in keys)


#: The columns of the verdict table of a check (``verdict_table``).
VERDICT_COLUMNS = (
    ("report", "string", "the verifier or attack"),
    ("kind", "string", "verifier (the model's guarantee) or attack (an adversary's inference)"),
    ("outcome", "string", "holds, broken or not run"),
    ("blocking", "bool", "whether a broken outcome stops publication"),
    ("reading", "string", "the outcome in words: what was checked and how it compares with the bound"),
    ("checked", "int", "how many people, groups, tuples or linked pairs the report examined"),
    ("broken", "int", "how many of them broke the guarantee or were disclosed beyond the bound"),
    ("bound", "string", "what the model promises (e.g. at least m values, risk at most 1/m)"),
)

#: The summary figure a report counts its examined items by, first found first.
_CHECKED = ("attacked", "linked_pairs_checked", "groups", "tuples", "republished", "expectations")


def verdict(report: Report) -> dict[str, str | int | bool | None]:
    """One row of a check's verdict table for ``report``: counts and words, never an individual or a group
    (``VERDICT_COLUMNS``). A reading that could be misread is spelled out: an attack that attacked nobody, a risk
    under the bound, a report that did not run and why."""
    summary = report.summary
    attack = summary.get("kind") == "attack"
    skipped = summary.get("skipped")
    checked = next((int(summary[k]) for k in _CHECKED if k in summary), None)
    if report.ok:
        broken = 0
    elif "disclosed" in summary or "failed" in summary:
        broken = int(summary.get("disclosed", summary.get("failed", 0)))
    else:
        broken = len(report.violations)
    bound = _bound_text(summary)
    if skipped:
        outcome, reading = "not run", f"not run: {skipped}"
    elif report.ok:
        outcome, reading = "holds", _holds_text(summary, attack, checked)
    else:
        outcome = "broken"
        blocks = "blocks publication" if summary.get("blocking", True) else \
            "reported, does not block (a single-release baseline promises nothing across releases)"
        what = "people disclosed beyond the bound" if attack else "violation(s)"
        reading = f"broken: {broken} {what}{_rules_broken(report.violations)}; {blocks}"
    return {"report": report.name, "kind": "attack" if attack else "verifier", "outcome": outcome,
            "blocking": bool(summary.get("blocking", True)), "reading": reading,
            "checked": None if skipped else checked, "broken": None if skipped else broken, "bound": bound}


def _rules_broken(violations: pd.DataFrame) -> str:
    """The rules a schema report broke, by name and column with their row counts (Great Expectations' report:
    names and counts, never a value), as `` (rule on column: n rows, ...)``; empty for any other report."""
    if not {"expectation", "column", "unexpected"} <= set(violations.columns):
        return ""
    rules = [f"{r.expectation} on {r.column}: {r.unexpected} row(s)" for r in violations.itertuples()]
    return f" ({'; '.join(rules)})"


def _bound_text(summary: Mapping) -> str | None:
    """What the report compares with, in words (``None`` when it has no bound)."""
    if "max_risk" in summary and summary.get("bound"):
        return f"risk at most 1/{summary['bound']}"
    for key, text in (("bound", "at least {} candidate values"), ("m", "at least {} distinct values per group"),
                      ("k", "at least {} rows per group"), ("l", "at least {} values per group")):
        if summary.get(key) is not None:
            return text.format(summary[key])
    return None


def _holds_text(summary: Mapping, attack: bool, checked: int | None) -> str:
    """The words of a report that holds, naming the readings that look like failures but are not."""
    if not attack:
        return f"holds on all {checked} examined" if checked is not None else "holds"
    if summary.get("attacked") == 0 or summary.get("linked_pairs_checked") == 0:
        return "holds: nobody was exposed to this attack in this history (no one it applies to), so nothing to disclose"
    if "max_risk" in summary and summary.get("bound"):
        return (f"holds: the highest risk found, {rounded(float(summary['max_risk']))}, is within the bound "
                f"1/{summary['bound']}")
    if "min_candidates" in summary:
        return (f"holds: every one of the {checked} people attacked keeps at least {summary['min_candidates']} "
                f"candidate values (bound {summary.get('bound')})")
    return "holds: nobody disclosed beyond the bound"


def verdict_table(reports: Sequence[Report]) -> dg.TableMetadataValue:
    """The verdict table of ``reports`` (one ``verdict`` row each), with its column schema (``VERDICT_COLUMNS``)."""
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind, description) for name, kind, description in
                                     VERDICT_COLUMNS])
    return dg.MetadataValue.table([dg.TableRecord(verdict(r)) for r in reports], schema=schema)


def history_markdown(manifest: pd.DataFrame, loss: str) -> dg.MetadataValue:
    """A per-release report: a chart of ``loss`` (line) and counterfeits (bars) by release (``history_svg``) and
    the manifest's last rows.

    ``manifest`` is ``ReleaseStore.manifest()``; its ``utility`` column holds each release's utility figures
    (a mapping or its JSON text), of which ``loss`` is plotted. Cost: O(releases).
    """
    frame = manifest.sort_values("release_id")
    utility = [_mapping(u) for u in frame["utility"]]
    frame = frame.assign(**{loss: [u.get(loss) for u in utility]})
    svg = history_svg([int(r) for r in frame["release_id"]], [_number(v) for v in frame[loss]],
                      [int(c) for c in frame["counterfeits"]], FIGURES[loss][0])
    image = base64.b64encode(svg.encode()).decode()
    label = FIGURES[loss][0]
    shown = frame[["release_id", "rows", "groups", "counterfeits", loss]].tail(10).rename(columns={loss: label})
    shown[label] = [None if v is None or pd.isna(v) else rounded(float(v)) for v in shown[label]]
    table = shown.to_markdown(index=False)
    return dg.MetadataValue.md(f"![history](data:image/svg+xml;base64,{image})\n\n{table}\n\n{glossary([loss])}\n")


#: Size and margins of the history chart, in pixels.
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 540, 234, 56, 56, 12, 36


def history_svg(releases: Sequence[int], loss: Sequence[float | None], counterfeits: Sequence[int], name: str) -> str:
    """An SVG chart over ``releases`` (ascending ids): ``loss`` as a blue line with points on the left axis (a None
    or non-finite value leaves a gap), ``counterfeits`` as light red bars on the right axis; each axis labelled
    with its name and its range (0 to the largest value). Plain SVG 1.1, no script. Cost: O(len(releases))."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    n = len(releases)
    step = plot_w / max(n, 1)

    def x(i: int) -> float:
        return LEFT + step * (i + 0.5)

    finite = [v for v in loss if v is not None and np.isfinite(v)]
    top_loss = max(finite, default=0.0) or 1.0
    top_count = max(counterfeits, default=0) or 1

    def y(value: float, top: float) -> float:
        return TOP + plot_h * (1 - value / top)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
             f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="white" stroke="#999"/>']
    for i, count in enumerate(counterfeits):
        top = y(count, top_count)
        parts.append(f'<rect x="{x(i) - step * 0.35:.1f}" y="{top:.1f}" width="{step * 0.7:.1f}" '
                     f'height="{TOP + plot_h - top:.1f}" fill="#d62728" opacity="0.3"/>')
    points = [(x(i), y(v, top_loss)) for i, v in enumerate(loss) if v is not None and np.isfinite(v)]
    if points:
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>')
        parts += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="#1f77b4"/>' for px, py in points]
    every = max(1, int(np.ceil(n / 12)))  # at most a dozen release labels
    parts += [f'<text x="{x(i):.1f}" y="{TOP + plot_h + 14}" text-anchor="middle">{r}</text>'
              for i, r in enumerate(releases) if i % every == 0 or i == n - 1]
    parts += [
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 4}" text-anchor="middle">release</text>',
        f'<text x="{LEFT - 4}" y="{TOP + 10}" text-anchor="end" fill="#1f77b4">{top_loss:.3g}</text>',
        f'<text x="{LEFT - 4}" y="{TOP + plot_h}" text-anchor="end" fill="#1f77b4">0</text>',
        f'<text x="14" y="{TOP + plot_h / 2}" fill="#1f77b4" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + plot_h / 2})">{escape(name)}</text>',
        f'<text x="{WIDTH - RIGHT + 4}" y="{TOP + 10}" fill="#d62728">{top_count}</text>',
        f'<text x="{WIDTH - RIGHT + 4}" y="{TOP + plot_h}" fill="#d62728">0</text>',
        f'<text x="{WIDTH - 10}" y="{TOP + plot_h / 2}" fill="#d62728" text-anchor="middle" '
        f'transform="rotate(90 {WIDTH - 10} {TOP + plot_h / 2})">counterfeits</text>',
        "</svg>",
    ]
    return "\n".join(parts)


def _number(value) -> float | None:
    """A utility figure as a float, or None when it is missing."""
    return None if value is None or pd.isna(value) else float(value)


def release_metadata(outcome: Mapping, reports: Sequence[Report], manifest: pd.DataFrame,
                     table: Mapping[str, dg.MetadataValue]) -> dict:
    """The published release's metadata, in the order the UI lists it: the figures worth plotting over the
    partitions first (genuine rows, counterfeits, the ``FIGURES``), then the changes, the history report, the
    verdict table of every report that gated it (``verdict_table``) and the standard table metadata ``table``
    (``table_metadata``). ``outcome`` is
    ``pipeline.publish``'s summary (with ``release_changes``'s counts). No pass/fail flag is a number."""
    rows, counterfeits = int(outcome["rows"]), int(outcome["counterfeits"])
    return {
        "genuine rows": rows - counterfeits,
        "counterfeits": counterfeits,
        **utility_metadata(outcome["utility"]),
        **{k: int(outcome[k]) for k in ("groups", "inserts", "deletes", "updates", HELD_BACK) if k in outcome},
        "report": history_markdown(manifest, "ncp"),
        "checks": verdict_table(reports),
        **table,
    }


def table_metadata(row_count: int, table_name: str | None = None,
                   column_schema: dg.TableSchema | None = None) -> dict[str, dg.MetadataValue]:
    """Dagster's standard table metadata, as dagster-duckdb and dagster-dbt set it: ``dagster/row_count``, and
    ``dagster/table_name`` and ``dagster/column_schema`` when given (the UI shows them in the asset's overview)."""
    out: dict[str, dg.MetadataValue] = {"dagster/row_count": dg.MetadataValue.int(row_count)}
    if table_name is not None:
        out["dagster/table_name"] = dg.MetadataValue.text(table_name)
    if column_schema is not None:
        out["dagster/column_schema"] = dg.MetadataValue.table_schema(column_schema)
    return out


def column_schema(columns: Sequence[tuple[str, str]], attributes: Iterable[str], sensitive: str) -> dg.TableSchema:
    """The schema of ``published.release`` from its ``(name, type)`` columns, each described by its role in the
    DuckDB contract: release id, group, a quasi-identifier's label and bounds, the sensitive value, or a
    non-identifier published as is."""
    qis = set(attributes)

    def role(name: str) -> str:
        base, _, part = name.rpartition("__")
        if name == "release_id":
            return "the release the row belongs to"
        if name == "group_id":
            return "the published QI group (null where each row is generalised on its own)"
        if base in qis and part in ("lo", "hi"):
            return f"{'lower' if part == 'lo' else 'upper'} bound of the generalised {base}"
        if name in qis:
            return "quasi-identifier, generalised: the label of its interval or taxonomy node"
        if name == sensitive:
            return "the sensitive value, published as is"
        return "non-identifier, published as is"

    return dg.TableSchema(columns=[dg.TableColumn(name, kind.lower(), role(name)) for name, kind in columns])


def _mapping(value) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        return json.loads(value)
    return {}
