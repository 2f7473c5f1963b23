"""What the Dagster UI shows about a release: numeric metadata (plotted over partitions) and a small report.

Numbers are plain ints and floats so that Dagster plots them across partitions; the report is markdown with a
matplotlib figure of information loss and counterfeits over the published history, embedded as a base64 PNG.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterable, Mapping

import dagster as dg
import numpy as np
import pandas as pd

from ..core.judge.history import Report
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
    """A per-release report: the manifest's last rows and a plot of ``loss`` and counterfeits by release.

    ``manifest`` is ``ReleaseStore.manifest()``; its ``utility`` column holds each release's utility figures
    (a mapping or its JSON text), of which ``loss`` is plotted.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = manifest.sort_values("release_id")
    utility = [_mapping(u) for u in frame["utility"]]
    frame = frame.assign(**{loss: [u.get(loss) for u in utility]})
    fig, left = plt.subplots(figsize=(6, 2.6), dpi=90)
    left.plot(frame["release_id"], frame[loss], marker="o", color="tab:blue")
    left.set_xlabel("release")
    left.set_ylabel(loss, color="tab:blue")
    right = left.twinx()
    right.bar(frame["release_id"], frame["counterfeits"], alpha=0.3, color="tab:red")
    right.set_ylabel("counterfeits", color="tab:red")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    png = base64.b64encode(buffer.getvalue()).decode()
    table = frame[["release_id", "rows", "groups", "counterfeits", loss]].tail(10).to_markdown(index=False)
    return dg.MetadataValue.md(f"![history](data:image/png;base64,{png})\n\n{table}\n")


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
        **{k: int(outcome[k]) for k in ("inserts", "deletes", "updates", "held_back", "groups") if k in outcome},
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
