"""What the Dagster UI shows about a release: numeric metadata (plotted over partitions) and a small report.

Numbers are plain ints and floats so that Dagster plots them across partitions; the report is markdown with a
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
from ..core.models.base import HELD_BACK
from ..pipeline import public_violations

#: Significant digits of a float in the metadata the UI shows.
DIGITS = 4


def rounded(value: float | int) -> float | int:
    """``value`` as the UI shows it: ints as they are, floats to ``DIGITS`` significant digits."""
    return value if isinstance(value, int) else float(f"{value:.{DIGITS}g}")


def numeric(prefix: str, values: Mapping, skip: Iterable[str] = ()) -> dict[str, float | int]:
    """``values``' numeric entries (bools as 0/1, floats rounded) keyed ``prefix/name``, what Dagster plots,
    leaving out the names in ``skip`` (figures the caller shows under a key of its own)."""
    out = {}
    skipped = set(skip)
    for key, value in values.items():
        if key in skipped:
            continue
        if isinstance(value, bool):
            out[f"{prefix}/{key}"] = int(value)
        elif isinstance(value, int | float) and pd.notna(value):
            out[f"{prefix}/{key}"] = rounded(value.item() if isinstance(value, np.generic) else value)
    return out


def report_metadata(report: Report) -> dict[str, dg.MetadataValue | int | float | str]:
    """One judge report as check metadata: its numeric summary, its violation count and, when it has
    violations, where they are (``pipeline.public_violations``: per release and group, counted, never naming
    an individual: Dagster's event log is read outside the ``private`` schema)."""
    meta: dict = numeric("summary", report.summary)
    meta["violations"] = len(report.violations)
    if len(report.violations):
        where = public_violations(report).head(10)
        meta["violations by group"] = dg.MetadataValue.md(where.to_markdown(index=False))
    return meta


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
                      [int(c) for c in frame["counterfeits"]], loss)
    image = base64.b64encode(svg.encode()).decode()
    table = frame[["release_id", "rows", "groups", "counterfeits", loss]].tail(10).to_markdown(index=False)
    return dg.MetadataValue.md(f"![history](data:image/svg+xml;base64,{image})\n\n{table}\n")


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


def checks_passed(reports: Iterable[Report]) -> dict[str, int | str]:
    """``check/<name>``: 1 when the report holds, 0 when it broke; a skipped attack (``summary["skipped"]``) is
    not a pass: it is listed, with its reason, under ``checks skipped``."""
    out: dict[str, int | str] = {}
    skipped = []
    for r in reports:
        if r.summary.get("skipped"):
            skipped.append(f"{r.name} ({r.summary['skipped']})")
        else:
            out[f"check/{r.name}"] = int(bool(r.ok))
    if skipped:
        out["checks skipped"] = "; ".join(skipped)
    return out


def release_metadata(outcome: Mapping, reports: Iterable[Report], manifest: pd.DataFrame) -> dict:
    """The published release's metadata, in the order the UI lists it: the figures worth plotting over the
    partitions first (rows with and without counterfeits, counterfeits, LM, NCP, median query error), then the
    changes, the other utility figures, the history report, and the checks last. ``outcome`` is
    ``pipeline.publish``'s summary (with ``release_changes``'s counts)."""
    utility = outcome["utility"]
    rows, counterfeits = int(outcome["rows"]), int(outcome["counterfeits"])
    first = {"lm": "LM", "ncp": "NCP", "query_error": "median query error"}
    meta: dict = {
        "rows (incl. counterfeits)": rows,
        "genuine rows": rows - counterfeits,
        "counterfeits": counterfeits,
        **{label: rounded(utility[k]) for k, label in first.items() if k in utility and pd.notna(utility[k])},
        **{k: int(outcome[k]) for k in ("inserts", "deletes", "updates", HELD_BACK, "groups") if k in outcome},
        **numeric("utility", utility, skip=[*first, "rows", "groups", "counterfeits"]),
        "report": history_markdown(manifest, "ncp"),
    }
    return {**meta, **checks_passed(reports)}


def _mapping(value) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        return json.loads(value)
    return {}
