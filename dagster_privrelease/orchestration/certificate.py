"""The release certificate: one self-contained HTML page per published release, to hand to a reviewer.

``certificate_html(published, title)`` renders what ``storage.read_published`` reads of a release, from the
``published`` schema only: the guarantee in plain words (the model's paper and parameters), the parameters, each
verifier and attack with its verdict and counts (``published.verdict``, kept by ``pipeline.publish`` from the
judge's reports: nothing is judged again), the utility over the history as charts (``report.history_svg``, the
chart the Dagster UI shows), the counterfeits (R(j), Xiao-Tao Def. 3) and a histogram of
the group sizes. Inline SVG and CSS, no script, nothing fetched: the page reads offline. It counts people and
groups; it names nobody (the published schema holds no id).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd

from ..core import models
from ..core.judge.report import figure_text
from ..core.models.recorded import RECORDED
from ..core.spec import Spec
from ..errors import SpecError, StoreError
from ..storage import PublishedRelease, read_published
from .report import history_svg

#: What the certificate says of a release ``privrelease record`` stored: no model protects it.
RECORDED_GUARANTEE = ("This release was published before this tool was used, and is recorded here as it was: no "
                      "model protects it. The releases after it are judged with it.")


def write_certificate(db: str | Path, release_id: int, path: str | Path, spec: Spec) -> Path:
    """Render release ``release_id`` of the store at ``db`` (``read_published``), protected under ``spec``, to the
    HTML file ``path``
    (replaced when it exists; its folder created); return ``path``. StoreError for a store or release that is
    not there, or a ``path`` that cannot be written. Cost: the manifest and one aggregate of the release's rows; the page is a few tens of kB."""
    published = read_published(db, release_id)
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(certificate_html(published, Path(db).stem, spec), encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"{target}: cannot write the certificate there ({type(exc).__name__}: a folder, no "
                         "permission or no space left)") from exc
    return target


def certificate_html(published: PublishedRelease, title: str, spec: Spec) -> str:
    """The certificate of ``published`` (a page titled after ``title``, the protected table, under ``spec``) as one
    HTML document: inline CSS and SVG, no script, no link to fetch. O(releases + verdicts + distinct group
    sizes)."""
    manifest = published.manifest.set_index("release_id")
    row = manifest.loc[published.release_id]
    counterfeits = int(row["counterfeits"])
    sections = [
        _section("The guarantee", f"<p>{escape(guarantee(row['model'], row['params'], spec))}</p>"
                 + _verdict_line(published.verdicts, row["checks"])),
        _section("Parameters", _parameters(row)),
        _section("What the release holds", _table(
            ["rows (counterfeits included)", "genuine rows", "groups", "counterfeits", "attributes published"],
            [[int(row["rows"]), int(row["rows"]) - counterfeits, int(row["groups"]), counterfeits,
              ", ".join(row["attributes"]) or "none"]])),
        _section("Verifiers and attacks", _verdicts(published.verdicts, row["checks"])),
        _section("Utility over the history", _utility(published.manifest)),
        _section("Counterfeits", _counterfeits(published.counterfeits)),
        _section("Group sizes", _group_sizes(published.group_sizes)),
    ]
    created = pd.Timestamp(row["created_at"]).strftime("%Y-%m-%d %H:%M")
    heading = f"{title}: release {published.release_id}"
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>Release certificate: {escape(heading)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<h1>Release certificate</h1>\n<p class=\"sub\">{escape(heading)}, {escape(str(row['model']))}, "
        f"published {created} UTC; its history: releases 1 to {published.release_id}</p>\n" + "\n".join(sections)
        + "\n<footer>Generated from the published tables of the release store alone. It counts rows, groups and "
        "individuals; it names nobody.</footer>\n</body>\n</html>\n"
    )


def guarantee(model: str, params: Mapping, spec: Spec) -> str:
    """The guarantee of a release of ``model`` with ``params`` in plain words: the model's own sentence
    (``ModelDescriptor.describe``, the one the Dagster UI shows) when ``model`` is ``spec``'s, the recorded
    sentence for a release ``privrelease record`` stored, else the model's paper and parameters."""
    if model == RECORDED:
        return RECORDED_GUARANTEE
    try:
        descriptor = models.descriptor(model)
    except SpecError:
        return f"Model {model} (a model not registered in this installation) with {_values(params)}."
    if model == spec.model.name:
        return descriptor.describe(spec) + "."
    return f"Model {model} ({descriptor.paper}) with {_values(params)}."


def _values(params: Mapping) -> str:
    return ", ".join(f"{k} = {v}" for k, v in params.items()) or "no parameter"


def histogram_svg(sizes: Sequence[int], groups: Sequence[int], width: int = 540, height: int = 220) -> str:
    """An SVG bar chart of ``groups`` (how many groups) over ``sizes`` (rows per group), one bar per size in
    ascending order, each labelled with its size below and its count above. Plain SVG 1.1. O(len(sizes))."""
    left, right, top, bottom = 48, 12, 18, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    step = plot_w / max(len(sizes), 1)
    most = max(groups, default=0) or 1
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" role="img">',
             f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="white" stroke="#999"/>']
    every = max(1, int(np.ceil(len(sizes) / 20)))
    for i, (size, count) in enumerate(zip(sizes, groups, strict=True)):
        bar = plot_h * count / most
        x = left + step * i
        parts.append(f'<rect class="bar" x="{x + step * 0.1:.1f}" y="{top + plot_h - bar:.1f}" '
                     f'width="{step * 0.8:.1f}" height="{bar:.1f}" fill="#1f77b4"><title>{count} group(s) of '
                     f"{size} rows</title></rect>")
        if i % every == 0:
            parts.append(f'<text x="{x + step / 2:.1f}" y="{top + plot_h + 14}" text-anchor="middle">{size}</text>')
            parts.append(f'<text x="{x + step / 2:.1f}" y="{top + plot_h - bar - 3:.1f}" text-anchor="middle">'
                         f"{count}</text>")
    parts += [f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle">rows per group</text>',
              f'<text x="12" y="{top + plot_h / 2}" text-anchor="middle" '
              f'transform="rotate(-90 12 {top + plot_h / 2})">groups</text>', "</svg>"]
    return "\n".join(parts)


# ------------------------------------------------------------------------------------------------- the sections

_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}"
    "h1{margin-bottom:.2rem}.sub{color:#555;margin-top:0}section{margin:1.5rem 0}"
    "table{border-collapse:collapse;margin:.5rem 0}th,td{border:1px solid #ccc;padding:.25rem .5rem;"
    "text-align:left;vertical-align:top}th{background:#f3f3f3}.ok{color:#1a7f37;font-weight:600}"
    ".broken{color:#c62828;font-weight:600}.skipped{color:#9a6700}.charts{display:flex;flex-wrap:wrap;gap:1rem}"
    "figure{margin:0}figcaption{font-size:.9rem;color:#555}footer{margin-top:2rem;color:#555;font-size:.9rem}"
)


def _section(title: str, body: str) -> str:
    """A section of the page, its anchor the title in lower case with dashes (``#group-sizes``)."""
    return f'<section id="{title.lower().replace(" ", "-")}">\n<h2>{escape(title)}</h2>\n{body}\n</section>'


def _table(header: Sequence[str], rows: Iterable[Sequence[object]], raw: bool = False) -> str:
    """An HTML table; cells escaped unless ``raw`` (cells already HTML)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _parameters(row: pd.Series) -> str:
    """The model's parameters with the meaning its descriptor gives them."""
    try:
        described = models.descriptor(row["model"]).params
    except SpecError:
        described = {}
    rows = [[name, value, getattr(described.get(name), "help", "") or ""] for name, value in row["params"].items()]
    return (f"<p>Model <strong>{escape(str(row['model']))}</strong>.</p>"
            + (_table(["parameter", "value", "meaning"], rows) if rows else "<p>No parameter.</p>"))


def _verdict_line(verdicts: pd.DataFrame, checks: Mapping[str, bool]) -> str:
    """One sentence: did every check that blocks publication hold."""
    skipped = 0
    if len(verdicts):
        blocking = verdicts[verdicts["blocking"].astype(bool)]
        held, total = int(blocking["passed"].sum()), len(blocking)
        skipped = sum(bool(s.get("skipped")) for s in blocking["summary"])
    else:
        held, total = sum(bool(v) for v in checks.values()), len(checks)
    if not total:
        return "<p>No check ran on this release.</p>"
    word = "ok" if held == total else "broken"
    ran = f" ({skipped} of them skipped: their adversary does not apply, see why below)" if skipped else ""
    return (f'<p class="{word}">{held} of {total} checks that block publication held when the release was '
            f"published{ran}.</p>")


def _verdicts(verdicts: pd.DataFrame, checks: Mapping[str, bool]) -> str:
    """The table of verifiers and attacks: kind, whether it blocks, its verdict, its violations and counts."""
    if not len(verdicts):  # a release published before the verdicts were kept: the manifest's pass/fail only
        rows = [[escape(n), _verdict_cell(bool(ok), {})] for n, ok in checks.items()]
        return ("<p>The judge's counts were not kept for this release; the manifest records each check's "
                "outcome.</p>" + _table(["check", "verdict"], rows, raw=True))
    rows = []
    for v in verdicts.itertuples(index=False):
        summary = dict(v.summary)
        counts = ", ".join(f"{k} = {figure_text(x)}" for k, x in summary.items() if k != "skipped")
        rows.append([escape(v.name), escape(v.kind), "yes" if v.blocking else "no (reported)",
                     _verdict_cell(bool(v.passed), summary), str(int(v.violations)),
                     escape(str(summary["skipped"])) if summary.get("skipped") else escape(counts)])
    return _table(["check", "kind", "blocks publication", "verdict", "violations", "counts"], rows, raw=True)


def _verdict_cell(passed: bool, summary: Mapping) -> str:
    if summary.get("skipped"):
        return '<span class="skipped">skipped</span>'
    return '<span class="ok">holds</span>' if passed else '<span class="broken">broken</span>'


def _utility(manifest: pd.DataFrame) -> str:
    """Charts of LM, NCP and the median query error over the releases so far, with the counterfeits as bars
    (``history_svg``), and the figures as a table."""
    releases = [int(r) for r in manifest["release_id"]]
    counterfeits = [int(c) for c in manifest["counterfeits"]]
    figures = {"lm": "LM (loss metric)", "ncp": "NCP", "query_error": "median query error"}
    charts = []
    for key, label in figures.items():
        values = [_finite(u.get(key)) for u in manifest["utility"]]
        if any(v is not None for v in values):
            charts.append(f"<figure>{history_svg(releases, values, counterfeits, key)}"
                          f"<figcaption>{escape(label)} by release (line) and counterfeits (bars)</figcaption>"
                          "</figure>")
    rows = [[r, *(figure_text(u.get(k)) for k in figures)] for r, u in zip(releases, manifest["utility"], strict=True)]
    return ('<div class="charts">' + "".join(charts) + "</div>" if charts else "<p>No utility figure recorded.</p>"
            ) + _table(["release", *figures.values()], rows)


def _counterfeits(counterfeits: pd.DataFrame) -> str:
    """R(j): how many counterfeits, in how many groups, and the count per group."""
    if not len(counterfeits):
        return "<p>No counterfeit row: every published row is a genuine one.</p>"
    total = int(counterfeits["count"].sum())
    rows = counterfeits.sort_values("group_id")[["group_id", "count"]].astype(int).to_numpy().tolist()
    return (f"<p>{total} counterfeit row(s) in {len(counterfeits)} group(s), published so that every person's "
            "group keeps its set of sensitive values (Xiao & Tao Def. 3: R(j) publishes the count per group; a "
            "reader cannot tell which rows they are).</p>" + _table(["group", "counterfeits"], rows))


def _group_sizes(sizes: pd.DataFrame) -> str:
    """The histogram of published rows per group."""
    if not len(sizes):
        return "<p>The release has no row.</p>"
    size, groups = [int(s) for s in sizes["size"]], [int(g) for g in sizes["groups"]]
    return (f"<figure>{histogram_svg(size, groups)}<figcaption>How many groups have each number of published rows "
            f"(counterfeits included); the smallest group has {size[0]} rows.</figcaption></figure>")


def _finite(value) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


