"""Single-release verifiers: k-anonymity, l-diversity, m-uniqueness.

Each reads any table with the published columns; a ``release_id`` column, when present, keeps releases apart so
that one call checks a whole history. QI groups are ``grouping.qi_groups``: rows sharing ``(release_id,
group_id)``, or the same generalised box where ``group_id`` is null (Shmueli-Tassa Eq. (2)). Violations: one row
per group that breaks the rule, naming the group, the rule and the figures.

Over a history the verifiers are folded one release at a time (``fold_releases``): a verifier's report on
releases 1..n is its report on 1..n-1, kept in the judge's memo, with release n's added. Judging release n then
reads release n (and what its own step keeps of the past, e.g. m-invariance's last signature of every
individual) and never the releases before: the window of ``History.first``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ....errors import SpecError
from ...encoding import value_codes
from ...grouping import bitsets, popcount, qi_groups
from ..history import History, Report, taken
from ..report import group_violations, verifier_report

L_DIVERSITY_FORMS = ("distinct", "entropy", "recursive", "frequency")


def k_anonymity(table: pd.DataFrame, k: int) -> Report:
    """Every QI group has at least ``k`` rows (Sweeney; Xiao-Tao Def. 4's example). One violation per group.
    O(n log n)."""
    _, groups = qi_groups(table)
    bad = groups["size"].to_numpy() < k
    detail = (f"{s} row(s) < k={k}" for s in groups["size"][bad])
    violations = group_violations(groups, bad, f"k-anonymity: every QI group has at least k={k} rows", detail)
    return verifier_report("k_anonymity", violations, k=k, groups=len(groups), smallest=int(groups["size"].min()))


def _value_counts(table: pd.DataFrame, sensitive: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """QI groups and the per-group sensitive-value counts ``(group, count)`` sorted by group then count desc."""
    index, groups = qi_groups(table)
    codes, _ = value_codes(table[sensitive])
    counts = pd.DataFrame({"group": index, "code": codes}).value_counts().rename("count").reset_index()
    counts = counts.sort_values(["group", "count"], ascending=[True, False], kind="stable").reset_index(drop=True)
    return groups, counts


def l_diversity(table: pd.DataFrame, sensitive: str, l: float,  # noqa: E741 (the paper's ℓ)
                form: str = "frequency", c: float = 1.0) -> Report:
    """Every QI group is l-diverse in the given form. O(n log n).

    - ``distinct``: at least l distinct sensitive values.
    - ``entropy``: ``-sum p log p >= log l`` over the group's value frequencies (Machanavajjhala et al.).
    - ``recursive``: recursive (c, l)-diversity: with value counts ``r_1 >= r_2 >= ... >= r_q``,
      ``r_1 < c * (r_l + ... + r_q)`` (Machanavajjhala et al.; Xiao-Tao §4.1 uses recursive (1/(m-1), 2)).
    - ``frequency``: no value in more than 1/l of the group, i.e. ``div(B) >= l`` (Shmueli-Tassa Def. 2.3; the
      "popular interpretation" of Xiao-Tao §1).
    """
    if form not in L_DIVERSITY_FORMS:
        raise SpecError(f"l_diversity.form: must be one of {list(L_DIVERSITY_FORMS)}, got {form!r}")
    groups, counts = _value_counts(table, sensitive)
    g = counts["group"].to_numpy()
    n = counts["count"].to_numpy().astype(np.float64)
    size = groups["size"].to_numpy().astype(np.float64)
    distinct = np.bincount(g, minlength=len(groups))
    top = counts.groupby("group")["count"].first().reindex(range(len(groups))).to_numpy()
    if form == "distinct":
        measure, bad = distinct.astype(np.float64), distinct < l
        rule = f"distinct l-diversity: at least l={l:g} distinct sensitive values per group"
    elif form == "entropy":
        p = n / size[g]
        measure = np.exp(np.bincount(g, weights=-p * np.log(p), minlength=len(groups)))
        bad = measure < l * (1 - 1e-12)
        rule = f"entropy l-diversity: exp(entropy) >= l={l:g} in every group"
    elif form == "recursive":
        rank = counts.groupby("group").cumcount().to_numpy()
        measure = np.bincount(g, weights=np.where(rank >= l - 1, n, 0.0), minlength=len(groups))
        bad = ~(top < c * measure)
        rule = f"recursive (c={c:g}, l={l:g})-diversity: r_1 < c (r_l + ... + r_q) in every group"
    else:
        measure = size / top
        bad = measure < l * (1 - 1e-12)
        rule = f"frequency l-diversity (Shmueli-Tassa Def. 2.3): no value in more than 1/l={1 / l:.3g} of a group"
    detail = (
        f"size {int(s)}, {int(d)} distinct, most frequent value {int(t)} times, measure {m:.4g}"
        for s, d, t, m in zip(size[bad], distinct[bad], top[bad], measure[bad], strict=True)
    )
    violations = group_violations(groups, bad, rule, detail)
    return verifier_report("l_diversity", violations, l=l, form=form, groups=len(groups),
                           violating_groups=int(bad.sum()))


def m_uniqueness(table: pd.DataFrame, sensitive: str, m: int) -> Report:
    """Every QI group has at least ``m`` rows, all with different sensitive values (Xiao-Tao Def. 17).
    Counterfeit rows count like any published row: the adversary cannot tell them apart (Def. 2 (3)).
    O(n log n)."""
    index, groups = qi_groups(table)
    codes, vocabulary = value_codes(table[sensitive])
    return m_uniqueness_of(groups, bitsets(index, codes, len(groups), len(vocabulary)), m)


def m_uniqueness_of(groups: pd.DataFrame, values: np.ndarray, m: int) -> Report:
    """m-uniqueness (Xiao-Tao Def. 17) from the ``qi_groups`` frame and the bitsets of the groups' values (the
    verifiers over a history have both already). O(groups)."""
    distinct = popcount(values)
    size = groups["size"].to_numpy()
    bad = (size < m) | (distinct < size)
    detail = (f"{s} row(s), {d} distinct sensitive value(s)" for s, d in zip(size[bad], distinct[bad], strict=True))
    violations = group_violations(
        groups, bad, f"m-uniqueness (Xiao-Tao Def. 17): at least m={m} rows, all sensitive values different", detail
    )
    return verifier_report("m_uniqueness", violations, m=m, groups=len(groups), violating_groups=int(bad.sum()))


# ------------------------------------------------------------------------------- a history, one release at a time

#: How a figure of a verifier's per-release summary adds up over the releases of a history (``fold_releases``):
#: summed, the least, or the last release's (a figure that is already a function of every release so far, e.g.
#: the individuals seen). Any other figure is a parameter of the verifier, taken from the last release's report.
TOTALS: dict[str, str] = {
    "groups": "sum", "violating_groups": "sum", "smallest": "min", "counterfeits": "sum",
    "groups_with_counterfeits": "sum", "tuples": "sum", "republished": "sum", "changed": "sum",
    "individuals": "last",
}

#: What a verifier's step keeps of releases 1..j for release j+1 (e.g. m-invariance's last appearance of every
#: individual), by name; plain frames, stored in the judge's memo (``storage.write.memo_blob``).
State = dict[str, pd.DataFrame]

#: One release's step: ``(release j alone as a History, the state after release j-1) -> (the verifier's reports
#: on release j alone, the state after release j)``. The state is empty before release 1.
Step = Callable[[History, State], tuple[list[Report], State]]

MEMO = "verifier"


def fold_releases(history: History, family: str, params: Mapping[str, Any], step: Step) -> list[Report]:
    """The reports of the verifiers of ``family`` on the whole of ``history``, one release at a time.

    Each report on releases 1..n is the report on 1..n-1 with release n's added: its violations stacked after
    the earlier releases' (so the rows are in release order), its summary figures added up as ``TOTALS`` says,
    ok iff it has no violation. A report that some release lacks is left out (e.g. the publisher-side checks
    after a release that is not homogeneous, as over the whole history). ``step`` computes one release's reports
    from that release alone and the ``State`` its predecessor left.

    The judge's memo (``History.memo``) keeps, under release n, the reports on 1..n (``verifier.<family>.report.
    <name>``: the violations; ``verifier.<family>.summary``: one row per report, its summary, ``params`` and the
    state's names as JSON) and the step's state (``verifier.<family>.state.<key>``): judging release n+1
    then folds release n+1 only (``History.previous_memo``). A window without that memo, or with one made
    under other ``params``, raises ``IncompleteHistory`` (the caller reads the complete history); a complete
    history without it folds every release from the first. Either way the reports are the same: what the memo
    holds is what folding from the first release computes, Parquet round trip included.

    Cost: the steps of the releases folded (release n alone through a window) plus O(the memo): independent of
    the number of releases before n.
    """
    prefix = f"{MEMO}.{family}"
    last = history.release_ids[-1] if history.release_ids else 0
    past, state = _previous(history, prefix, params)
    held = _held_release_ids(history)
    todo = held if past is None else [j for j in held if j >= last]
    reports: list[Report] = []
    for _, part in release_parts(history, todo):
        now, state = step(part, state)
        reports = now if past is None else [_added(past[r.name], r) for r in now if r.name in past]
        reports = [Report(r.name, r.ok, r.violations, _plain_summary(r.summary)) for r in reports]
        past = {r.name: Report(r.name, r.ok, _plain_frame(r.violations), r.summary) for r in reports}
    if past is None:  # no release: the reports of an empty history, nothing to keep
        return [Report(r.name, r.ok, r.violations, _plain_summary(r.summary)) for r in step(history, {})[0]]
    memo = {f"{prefix}.report.{name}": r.violations for name, r in past.items()}
    memo[f"{prefix}.summary"] = pd.DataFrame({
        "report": list(past), "summary": [json.dumps(r.summary) for r in past.values()],
        "params": _params_text(params), "state": json.dumps(sorted(state)),
    })
    memo.update({f"{prefix}.state.{key}": frame for key, frame in state.items()})
    for key, frame in memo.items():
        history.memo[(key, last)] = frame
    return reports or [past[name] for name in past]


def _previous(history: History, prefix: str, params: Mapping[str, Any]) -> tuple[dict[str, Report] | None, State]:
    """The reports on releases 1..n-1 and the step's state from the memo of release n-1; ``(None, {})`` when a
    complete history has no usable memo; ``IncompleteHistory`` when a window has none."""
    summary = history.previous_memo(f"{prefix}.summary")
    if summary is None or not len(summary) or summary["params"].iloc[0] != _params_text(params):
        history.require_complete(prefix)
        return None, {}
    before = history.release_ids[-1] - 1
    names, keys = list(summary["report"]), json.loads(summary["state"].iloc[0])
    frames = {key: history.memo[(key, before)] for key in [*(f"{prefix}.report.{n}" for n in names),
                                                            *(f"{prefix}.state.{k}" for k in keys)]
              if (key, before) in history.memo}
    if len(frames) < len(names) + len(keys):
        history.require_complete(prefix)
        return None, {}
    violations = [frames[f"{prefix}.report.{name}"] for name in names]
    past = {name: Report(name, not len(v), v, json.loads(text))
            for name, v, text in zip(names, violations, summary["summary"], strict=True)}
    return past, {key: frames[f"{prefix}.state.{key}"] for key in keys}


def _added(past: Report, now: Report) -> Report:
    """``past`` (releases 1..j-1) with ``now`` (release j alone) added (``fold_releases``). O(violations)."""
    if not len(past.violations):
        violations = now.violations
    elif not len(now.violations):
        violations = past.violations
    else:
        violations = pd.concat([past.violations, now.violations], ignore_index=True)
    summary = {key: _total(TOTALS.get(key), past.summary.get(key), value) for key, value in now.summary.items()}
    return verifier_report(now.name, violations, **summary)


def _total(rule: str | None, before: Any, now: Any) -> Any:
    """A summary figure of releases 1..j from that of 1..j-1 (``before``; None: none) and release j's (``TOTALS``)."""
    if before is None:
        return now
    if rule == "sum":
        return before + now
    if rule == "min":
        return min(before, now)
    return now


def _plain_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as the store gives it back (a Parquet round trip, ``StoreWriter.save_judge_memo``), so that
    folding from the first release and folding through the window stack the same rows. An empty frame is kept
    as it is (the fold never stacks one). O(rows)."""
    if not len(frame):
        return frame
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return pd.read_parquet(io.BytesIO(buffer.getvalue()))


def _plain_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A summary with numpy scalars as Python ones (the memo keeps summaries as JSON)."""
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in summary.items()}


def _params_text(params: Mapping[str, Any]) -> str:
    """The parameters a memo was made under, as canonical JSON (a memo made under others is not used)."""
    return json.dumps(params, sort_keys=True, default=str)


def _held_release_ids(history: History) -> list[int]:
    """Every release id in any frame of ``history`` (published rows, R(j), hosting, snapshots), ascending: a
    broken history may host or snapshot a release that published nothing, and the checks must still see it.
    O(rows)."""
    ids: set[int] = set(history.release_ids)
    for frame in (history.counterfeits, history.hosting, history.snapshots):
        if frame is not None and "release_id" in frame.columns and len(frame):
            ids.update(int(r) for r in np.unique(frame["release_id"].to_numpy(np.int64)))
    return sorted(ids)


def release_parts(history: History, release_ids: list[int]) -> Iterator[tuple[int, History]]:
    """Each of ``release_ids`` as a History of that release alone (its published rows, R(j), snapshot and hosting
    rows, in their order in ``history``), in the order given. A frame already in release order (as the store
    reads them) gives each release as a slice of its rows, without a copy (at 1M rows a copy of the published
    rows and of the snapshot would add 0.3 GB to the verifiers' peak); a part is read, never changed,
    by the steps. Any other frame is sorted by release once: O(rows log rows) for the whole history, then
    O(rows of release j) per release, a copy."""
    parts: dict[str, tuple[pd.DataFrame, np.ndarray | None, np.ndarray]] = {}
    for name in ("releases", "counterfeits", "snapshots", "hosting"):
        frame = getattr(history, name)
        if frame is not None:
            rid = frame["release_id"].to_numpy(np.int64) if len(frame) else np.zeros(0, dtype=np.int64)
            if bool((rid[1:] >= rid[:-1]).all()):
                parts[name] = (frame, None, rid)
            else:
                order = np.argsort(rid, kind="stable")
                parts[name] = (frame, order, rid[order])

    def rows(name: str, j: int) -> pd.DataFrame | None:
        if name not in parts:
            return None
        frame, order, ordered = parts[name]
        a, b = np.searchsorted(ordered, [j, j + 1])
        return sliced(frame, int(a), int(b)) if order is None else taken(frame, order[a:b])

    for j in release_ids:
        releases, counterfeits = rows("releases", j), rows("counterfeits", j)
        assert releases is not None and counterfeits is not None
        yield j, History(history.spec, releases, counterfeits, snapshots=rows("snapshots", j),
                         hosting=rows("hosting", j), first=j)


def sliced(frame: pd.DataFrame, start: int, stop: int) -> pd.DataFrame:
    """Rows ``start:stop`` of ``frame`` indexed 0..n-1, sharing ``frame``'s data (read it, never change it).
    O(columns)."""
    out = frame.iloc[start:stop]
    out.index = pd.RangeIndex(stop - start)
    return out
