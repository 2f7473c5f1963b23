"""Sequential ℓ-diversity by possible worlds (Shmueli & Tassa, "Privacy by diversity in sequential releases of
databases", Information Sciences 2015): releases that each publish their own subset of the quasi-identifiers,
insertions between releases, and attributes revealed for the first time.

The adversary knows every individual's quasi-identifiers (V0, eq. (3)) and reads every release. The model makes
ℓ - 1 fake possible worlds once (Algorithm 1, ``possible_worlds``; the Dagster asset and pipeline stage
``possible_worlds``), each one tying every individual to the non-identifiers and sensitive value of a tuple of
its low-cost ℓ-diverse bucket, such that with the true world every individual is linked to ℓ different values
(Theorem 4.2). Every release is then generalised, per tuple, until it admits all ℓ worlds (Algorithm 2,
``sequential_release``; Theorem 4.3), so that even a computationally unbounded adversary who knows the
algorithm links no individual to a value with probability above 1/ℓ (Theorem 4.1). A release depends only on
its attributes and the worlds, not on its position or the releases before it (Theorem 4.4).

Parameters: ``l`` (>= 2, at most the number of sensitive values), ``p`` (the largest sub-component of §4.4's
split, used only on components too large for the exact transportation step (``TRANSPORT_CELLS``) and on the rows
an early-stopped exact step leaves; default 100), ``loss`` (``LM`` or ``EM``, §2.2; default LM) and ``partition``
(how such a component is split: ``joint``, the default, or §4.4's ``paper`` rule; ``sequential_release``). Step 5's
matching is otherwise exact: a minimum-cost transportation plan between a component's distinct boxes and distinct
tuples (``sequential_release.transport_match``). Each release names its quasi-identifiers (``vertical``); the
others have no columns in it (nulls in the store). Insertions are supported when the inserted batch is ℓ-diverse
(§5.2); deletions and updates are refused (§5.3) in favour of ``m_invariance`` and ``m_distinct``.

The private state is the compact possible-world set ``possible_worlds`` (``(world, <id>, source_<id>)``, fake
worlds 1..ℓ-1, the true world 0 implied; eq. (5)), kept with every release, and readable in the store as the
view ``private.possible_world(world, <id>, <sensitive>)`` (a ``PermutationView``, built by the store). The judge's
checks of the model are ``judge.verifiers.shmueli_tassa.verify_sequential_l_diversity``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ...judge.history import Bound
from ...judge.verifiers.shmueli_tassa import source_column, verify_sequential_l_diversity
from ...release import PreviousRelease, Release
from ...spec import BoundSpec, Spec
from ..base import ModelDescriptor, Param, PermutationView, Stage
from .information_loss import LOSSES
from .possible_worlds import extend_worlds
from .sequential_release import non_sequential, release

__all__ = ["MODEL", "non_sequential", "publish", "run_possible_worlds"]


def run_possible_worlds(
    snapshot: pd.DataFrame, spec: BoundSpec, previous: PreviousRelease | None, rng: np.random.Generator
) -> dict[str, pd.DataFrame]:
    """The ``possible_worlds`` stage: ``{"possible_worlds": <compact worlds of T(n)>}``, release n-1's worlds
    unioned with Algorithm 1 on the tuples inserted since (``possible_worlds.extend_worlds``; all of T for the
    first release). Draws from a child of ``rng`` (``Generator.spawn``), so Algorithm 1's random choices are
    independent of Algorithm 2's, which draw from the same release generator. Cost: Algorithm 1 on the batch."""
    (child,) = rng.spawn(1)
    return {"possible_worlds": extend_worlds(snapshot, spec, previous, child)}


def publish(
    snapshot: pd.DataFrame, spec: BoundSpec, previous: PreviousRelease | None, rng: np.random.Generator, /,
    **prepared: pd.DataFrame,
) -> Release:
    """Model ``sequential_l_diversity``: Algorithm 2 on T(n) (``snapshot``) for the quasi-identifiers of ``spec``
    (restricted to the release's attributes) with the stage's frame ``prepared["possible_worlds"]``. ``previous``
    is not read (Theorem 4.4). Deterministic given ``rng``; cost in ``sequential_release``."""
    return release(snapshot, spec, prepared["possible_worlds"], rng)


def _bound(params: Mapping[str, Any]) -> Bound:
    return Bound(values=int(params["l"]), tuples=int(params["l"]))


def guarantee(spec: Spec) -> str:
    """What sequential ℓ-diversity protects (Shmueli-Tassa Def. 3.3, Theorem 4.4), in one sentence, for the UI."""
    l = spec.model.params["l"]  # noqa: E741
    return (f"sequential l-diversity (Shmueli & Tassa), l = {l}: every person is linked to {l} different values of "
            f"{spec.sensitive}, each in 1/{l} of the possible worlds, whichever releases an adversary combines; "
            "insertions only")


MODEL = ModelDescriptor(
    name="sequential_l_diversity",
    paper="Shmueli & Tassa, Privacy by diversity in sequential releases of databases, Inf. Sci. 2015 "
          "(Alg. 1: possible worlds, Alg. 2: sequential release, §5.2: insertions)",
    params={
        "l": Param(int, minimum=2, help="every individual is linked to l different sensitive values, each in 1/l of the "
                                "possible worlds"),
        "p": Param(int, minimum=1, default=100, help="the largest sub-component of §4.4's split, used only on components too "
                                              "large for the exact transportation step (TRANSPORT_CELLS)"),
        "loss": Param(str, default="LM", choices=LOSSES, help="information loss minimised: LM or EM (§2.2)"),
        "partition": Param(str, default="joint", choices=("joint", "paper"),
                           help="how a component larger than p is split: joint k-d halving of rows and tuples, or "
                                "§4.4's greedy nearest-to-closure partition"),
    },
    publish=publish,
    verify=verify_sequential_l_diversity,
    bound=_bound,
    vertical=True,
    reads="previous",
    diversity_param="l",
    guarantee=guarantee,
    stages=(Stage("possible_worlds", "the l - 1 fake possible worlds of Shmueli-Tassa Alg. 1, extended by every "
                  "inserted batch (§5.2); private", run=run_possible_worlds,
                  views={"possible_world": PermutationView(source_column)}),),
)

#: What this module registers (``registry.BUILTIN``).
MODELS = (MODEL,)
