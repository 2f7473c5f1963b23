"""Single-release verifiers: k-anonymity, l-diversity, m-uniqueness.

Each reads any table with the published columns; a ``release_id`` column, when present, keeps releases apart so
that one call checks a whole history. QI groups are ``grouping.qi_groups``: rows sharing ``(release_id,
group_id)``, or the same generalised box where ``group_id`` is null (Shmueli-Tassa Eq. (2)). Violations: one row
per group that breaks the rule, naming the group, the rule and the figures.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ....errors import SpecError
from ...encoding import value_codes
from ...grouping import bitsets, popcount, qi_groups
from ..history import Report
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
