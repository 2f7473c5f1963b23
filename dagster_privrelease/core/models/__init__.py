"""The models: one module (or package) per paper's algorithm, each declaring one ``ModelDescriptor``
(``base.py``), and the registry that lists them (``registry.py``: ``register``, ``find``, ``descriptor``,
``names``; the built-in models are loaded on the first lookup).

- ``mondrian``: k-anonymity and l-diversity, the single-release baselines (LeFevre et al. 2006);
- ``m_invariance``: Xiao-Tao 2007;
- ``m_distinct``: Li-Zhou 2008;
- ``sequential_l_diversity``: Shmueli-Tassa 2015;
- ``xy_privacy``: Wang-Fung 2006.

The judge's entry point over a model's history is ``core.judge.run``.
"""

from __future__ import annotations

from .base import ModelDescriptor, Param, PreviousPart, Publisher, Reads, Stage
from .registry import descriptor, find, names, register, registered, unregister

__all__ = [
    "ModelDescriptor", "Param", "PreviousPart", "Publisher", "Reads", "Stage", "descriptor", "find", "names",
    "register", "registered", "unregister",
]
