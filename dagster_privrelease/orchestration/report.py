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
import pandas as pd

from ..core.history import Report


def numeric(prefix: str, values: Mapping) -> dict[str, float | int]:
    """``values``' numeric entries (bools as 0/1) keyed ``prefix/name``: what Dagster plots."""
    out = {}
    for key, value in values.items():
        if isinstance(value, bool):
            out[f"{prefix}/{key}"] = int(value)
        elif isinstance(value, int | float) and pd.notna(value):
            out[f"{prefix}/{key}"] = value.item() if hasattr(value, "item") else value
    return out


def report_metadata(report: Report) -> dict[str, dg.MetadataValue | int | float | str]:
    """One judge report as check metadata: its numeric summary and the first violations as a table."""
    meta: dict = numeric("summary", report.summary)
    meta["violations"] = len(report.violations)
    if len(report.violations):
        meta["first violations"] = dg.MetadataValue.md(report.violations.head(10).to_markdown(index=False))
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


def checks_passed(reports: Iterable[Report]) -> dict[str, int]:
    """``check/<name>``: 1 when the report holds, 0 when it broke."""
    return {f"check/{r.name}": int(bool(r.ok)) for r in reports}


def _mapping(value) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        return json.loads(value)
    return {}
