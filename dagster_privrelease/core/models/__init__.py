"""The model registry: the only list of models. Each model is a module of this package with one ``ModelDescriptor``
(``base.py``) registered here; the spec, the pipeline, the judge's entry points, the Dagster layer and the CLI
ask the registry and nothing else.

``register(descriptor)`` adds a model (a model outside the package registers itself the same way, before its
spec is loaded); ``descriptor(name)`` finds one; ``verify_history`` and ``attack_history`` run the judge over a
history as the history's model asks (its ``judged`` view, its verifiers, its bound).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ...errors import SpecError
from ..judge.history import History, Report
from .base import ModelDescriptor, Param, PreviousPart, Publisher, Reads, Stage

__all__ = [
    "ModelDescriptor", "Param", "PreviousPart", "Publisher", "Reads", "Stage", "attack_history", "descriptor", "find", "judged",
    "names", "register", "registered", "unregister", "verify_history",
]

_REGISTRY: dict[str, ModelDescriptor] = {}


def register(model: ModelDescriptor) -> ModelDescriptor:
    """Add ``model`` to the registry (replacing a model of the same name); returns it."""
    _REGISTRY[model.name] = model
    return model


def unregister(name: str) -> None:
    """Remove the model ``name`` (no error when it is not registered)."""
    _REGISTRY.pop(name, None)


@contextmanager
def registered(model: ModelDescriptor) -> Iterator[ModelDescriptor]:
    """``model`` registered for the duration of the block (tests and notebooks)."""
    register(model)
    try:
        yield model
    finally:
        unregister(model.name)


def names() -> list[str]:
    """The registered model names, sorted."""
    return sorted(_REGISTRY)


def find(name: str) -> ModelDescriptor | None:
    """The descriptor of model ``name``, or None when no such model is registered."""
    return _REGISTRY.get(name)


def descriptor(name: str) -> ModelDescriptor:
    """The descriptor of model ``name``; SpecError naming the known models otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise SpecError(f"model.name: unknown model {name!r}; the models are {names()}") from None


def judged(history: History) -> History:
    """``history`` as the judge must read it: the model's ``judged`` view of its private state (identity for a
    model without one)."""
    view = descriptor(history.spec.model.name).judged
    return history if view is None else view(history)


def verify_history(history: History) -> list[Report]:
    """Every verifier of the guarantee ``history.spec.model`` promises, over the whole (judged) history."""
    return descriptor(history.spec.model.name).verify(judged(history))


def attack_history(history: History, attacks: Sequence[str] | None = None) -> list[Report]:
    """The named attacks (default: all) over the (judged) history, against the bound the model promises; an
    attack the model declares inapplicable (``ModelDescriptor.skipped_attacks``) is reported as skipped, with
    the reason, in its place. After releases recorded as published before the tool (``recorded``), an attack
    fails only for what the later releases add (``recorded.discount_recorded``)."""
    from ..judge.attacks import ATTACKS
    from ..judge.attacks import attack_history as run_attacks
    from ..judge.report import skipped
    from .recorded import discount_recorded

    model = descriptor(history.spec.model.name)
    names = list(ATTACKS) if attacks is None else list(attacks)
    bound = model.bound(history.spec.model.params)
    run = [a for a in names if a not in model.skipped_attacks]
    every = [a for a in ATTACKS if a not in model.skipped_attacks]  # what the recorded releases disclose, by any
    ran = iter(discount_recorded(history, run_attacks(judged(history), bound, run),
                                 lambda before: run_attacks(judged(before), bound, every)))
    return [skipped(a, model.skipped_attacks[a]) if a in model.skipped_attacks else next(ran) for a in names]


def _register_builtin() -> None:
    from . import m_distinct, m_invariance, mondrian, sequential_l_diversity, xy_privacy

    for model in (*mondrian.MODELS, m_invariance.MODEL, m_distinct.MODEL, sequential_l_diversity.MODEL,
                  xy_privacy.MODEL):
        register(model)


_register_builtin()
