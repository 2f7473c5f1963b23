"""The single-release baselines, k-anonymity and ℓ-diversity, each one Mondrian partition of the release
(``kernels.partition``, LeFevre et al., ICDE 2006, as the papers use it: Xiao-Tao §5's ℓ-diverse baseline).
``publish_k_anonymity`` and ``publish_l_diversity`` ignore the previous release: they protect one release only, and
are the baselines the attack suite breaks across releases.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..encoding import encode
from ..judge import verifiers as verify
from ..judge.history import Bound
from ..release import PreviousRelease, Release, build_release
from ..spec import BoundSpec, Spec
from .base import ModelDescriptor, Param
from .kernels.partition import FORMS, domain_widths, partition


def _publish(snapshot: pd.DataFrame, spec: BoundSpec, rng: np.random.Generator, **constraint) -> Release:
    X = encode(snapshot, spec)
    groups = partition(X, snapshot[spec.sensitive].to_numpy(), scale=domain_widths(X, spec), **constraint)
    return build_release(snapshot, groups, spec, rng)


def publish_k_anonymity(
    snapshot: pd.DataFrame, spec: BoundSpec, previous: PreviousRelease | None, rng: np.random.Generator
) -> Release:
    """Model ``k_anonymity``: Mondrian groups of at least ``k`` tuples (LeFevre et al. 2006).

    ``previous`` is ignored: no protection across releases (the baseline the attacks break).
    """
    return _publish(snapshot, spec, rng, k=spec.model.params["k"])


def publish_l_diversity(
    snapshot: pd.DataFrame, spec: BoundSpec, previous: PreviousRelease | None, rng: np.random.Generator
) -> Release:
    """Model ``l_diversity``: Mondrian groups that are ℓ-diverse in ``form`` ("frequency": Shmueli-Tassa
    Def. 2.3, "distinct": ℓ distinct values). ``previous`` is ignored (single-release baseline)."""
    params = spec.model.params
    return _publish(snapshot, spec, rng, l=params["l"], form=params["form"])


def _bound_k(params) -> Bound:
    return Bound(values=2, tuples=int(params["k"]))


def _bound_l(params) -> Bound:
    return Bound(values=int(params["l"]), tuples=int(params["l"]))


def _guarantee_k(spec: Spec) -> str:
    k = spec.model.params["k"]
    return (f"k-anonymity (Mondrian, LeFevre et al.), k = {k}: every published group holds at least {k} people, "
            "so a person's quasi-identifiers match at least k rows; within one release only, nothing is promised "
            "across releases")


def _guarantee_l(spec: Spec) -> str:
    l, form = spec.model.params["l"], spec.model.params["form"]  # noqa: E741
    rule = (f"no value of {spec.sensitive} holds more than 1/{l} of a group" if form == "frequency"
            else f"every group holds at least {l} distinct values of {spec.sensitive}")
    return (f"l-diversity ({form} form, Mondrian), l = {l}: every published group links its people to at least "
            f"{l} values of {spec.sensitive} ({rule}); within one release only, nothing is promised across releases")


#: The single-release baselines: their attacks are reported, never blocking (``across_releases=False``).
MODELS = (
    ModelDescriptor(
        name="k_anonymity",
        paper="Mondrian (LeFevre et al. 2006), as used in all the papers",
        params={"k": Param(int, minimum=2, help="the fewest rows of a QI group")},
        publish=publish_k_anonymity,
        verify=verify.verify_k_anonymity,
        bound=_bound_k,
        across_releases=False,
        reads="nothing",
        guarantee=_guarantee_k,
    ),
    ModelDescriptor(
        name="l_diversity",
        paper="Mondrian with l-diverse groups; frequency form of Shmueli-Tassa Def. 2.3",
        params={
            "l": Param(int, minimum=2, help="the fewest distinct sensitive values a group is linked to"),
            "form": Param(str, default="frequency", choices=FORMS),
        },
        publish=publish_l_diversity,
        verify=verify.verify_l_diversity,
        bound=_bound_l,
        across_releases=False,
        reads="nothing",
        diversity_param="l",
        guarantee=_guarantee_l,
    ),
)
