"""The model registry: model name -> ``publish(snapshot, spec, previous, rng) -> Release``.

Each model lives in the module named after its paper's algorithm; this module only dispatches.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from .release import PreviousRelease, Release
from .spec import Spec

Publisher = Callable[[pd.DataFrame, Spec, PreviousRelease | None, np.random.Generator], Release]


def publisher(name: str) -> Publisher:
    """The publish function of model ``name`` (a name ``spec.MODELS`` accepted)."""
    from . import m_invariance, mondrian

    return {
        "k_anonymity": mondrian.publish_k_anonymity,
        "l_diversity": mondrian.publish_l_diversity,
        "m_invariance": m_invariance.publish,
    }[name]
