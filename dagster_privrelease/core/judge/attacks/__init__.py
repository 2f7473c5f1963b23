"""The attack suite: adversaries simulated over a release history (Tobar Nicolau et al., taxonomy §IV-B), one
module per family.

Each attack is ``f(history, bound, ...) -> Report``. It reads only the published releases and R(j), plus the
background knowledge its adversary is assumed to hold, taken from the private side of the ``History``: each
individual's QI values and lifespan (``history.snapshots``, Xiao-Tao Def. 6 B(n)), and, where a definition reasons
about the class a user's tuple is in (the correspondence attacks, taxonomy Defs. 24-31), the hosting groups.
``Report.violations`` has one row per individual (or class, or pair of classes) the attack pushed below the
model's bound (``history.Bound``: m, l or k); ``Report.summary`` counts the individuals attacked, disclosed (a
single candidate left) and below the bound; ``Report.ok`` is True when nobody fell below the bound.

- ``intersection``: the candidate sets, ``intersection_attack`` (§IV-B1, Def. 13; Xiao-Tao Lemmas 1-2) and
  ``critical_attack`` (critical absence / addition, Def. 17);
- ``correspondence``: ``forward_attack``, ``cross_attack``, ``backward_attack`` (Defs. 24-31, Theorems 2, 3, 5);
- ``equivalence``: ``equivalence_attack`` (Defs. 18-20, pairwise instances ``W = e_a - e_b``);
- ``vertical``: ``join_attack`` (Wang-Fung Example 1) and ``possible_world_attack`` (Shmueli-Tassa Def. 3.1);
- ``sug``: ``sug_attack`` (Li-Zhou §III).

``attack_history`` runs the applicable ones (``ATTACKS``). Point-in-box and box-overlap joins are
``intervals``'s, never a Python loop over individuals x groups.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..history import Bound, History, Report
from .correspondence import backward_attack, cross_attack, forward_attack
from .equivalence import equivalence_attack
from .intersection import NO_DISCLOSURE, candidate_sets, critical_attack, intersection_attack
from .sug import sug_attack, sug_risks
from .vertical import join_attack, join_groups, possible_world_attack

__all__ = [
    "ATTACKS", "NO_DISCLOSURE", "attack_history", "backward_attack", "candidate_sets", "critical_attack",
    "cross_attack", "equivalence_attack", "forward_attack", "intersection_attack", "join_attack", "join_groups",
    "possible_world_attack", "sug_attack", "sug_risks",
]

#: Every attack by name, in the order ``attack_history`` runs them.
ATTACKS: dict[str, Callable[[History, Bound], Report]] = {
    "intersection": intersection_attack,
    "critical": critical_attack,
    "forward": forward_attack,
    "cross": cross_attack,
    "backward": backward_attack,
    "equivalence": equivalence_attack,
    "join": join_attack,
    "possible_worlds": possible_world_attack,
    "sug": sug_attack,
}


#: The attacks that read a release's classes and a snapshot's ids (``History.shared``), run together.
SHARING = frozenset({"intersection", "critical", "forward", "cross", "backward"})


def attack_history(
    history: History, bound: Bound = NO_DISCLOSURE, attacks: Sequence[str] | None = None
) -> list[Report]:
    """Run the named attacks (default: all of ``ATTACKS``) over ``history``. An attack whose preconditions the
    history lacks (no snapshots, not incremental, not vertical, no CUS) returns an ok report whose summary says
    ``skipped`` and why. Unknown names raise ``ValueError`` naming them. The cost is the sum of the attacks',
    less what they share: those of ``SHARING`` run first, inside one ``History.sharing`` block, so a release's
    classes and codes and a snapshot's ids (``intersection.release_classes``, ``snapshot_ids``) are computed once
    for all of them and dropped before the others run (at 1M rows they are 0.13 GB, which would otherwise add to
    the equivalence attack's peak). The attacks are independent: the order they run in changes no report."""
    names = list(ATTACKS) if attacks is None else list(attacks)
    unknown = [a for a in names if a not in ATTACKS]
    if unknown:
        raise ValueError(f"unknown attack(s) {unknown}; the attacks are {list(ATTACKS)}")
    with history.sharing():
        reports = {a: ATTACKS[a](history, bound) for a in names if a in SHARING}
    reports.update({a: ATTACKS[a](history, bound) for a in names if a not in SHARING})
    return [reports[a] for a in names]
