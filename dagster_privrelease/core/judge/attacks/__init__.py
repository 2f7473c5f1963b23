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

The judge names them in ``attack_registry`` and runs them with ``run.run_attacks``. Point-in-box and box-overlap joins are
``intervals``'s, never a Python loop over individuals x groups.
"""

from __future__ import annotations

from .correspondence import backward_attack, cross_attack, forward_attack
from .equivalence import equivalence_attack
from .intersection import NO_DISCLOSURE, candidate_sets, critical_attack, intersection_attack
from .sug import sug_attack, sug_risks
from .vertical import join_attack, join_groups, possible_world_attack

__all__ = [
    "NO_DISCLOSURE", "backward_attack", "candidate_sets", "critical_attack",
    "cross_attack", "equivalence_attack", "forward_attack", "intersection_attack", "join_attack", "join_groups",
    "possible_world_attack", "sug_attack", "sug_risks",
]
