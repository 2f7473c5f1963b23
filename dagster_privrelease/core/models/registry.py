"""The model registry: the only list of models. Each model is one ``ModelDescriptor`` (``base.py``); the spec,
the pipeline, the judge, the Dagster layer and the CLI ask the registry and nothing else.

The built-in models (``BUILTIN``) are loaded on the first lookup, not when the package is imported, so reading
the registry costs nothing until a model is needed. A model outside the package registers itself the same way
(``register``), before a spec naming it is loaded.

This module imports no model and no part of the judge but its attack registry: the spec imports it at its top.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator

from ...errors import SpecError
from ..judge import attack_registry
from ..registry import Registry
from .base import ModelDescriptor

__all__ = ["BUILTIN", "descriptor", "find", "names", "register", "registered", "unregister"]

#: The modules of ``core.models`` that hold the built-in models, each exposing ``MODELS`` (its descriptors),
#: in the order they are registered.
BUILTIN = ("mondrian", "m_invariance", "m_distinct", "sequential_l_diversity", "xy_privacy")


def _builtin() -> Iterator[ModelDescriptor]:
    for module in BUILTIN:
        yield from importlib.import_module(f"{__package__}.{module}").MODELS


def _check(model: ModelDescriptor) -> None:
    unknown = sorted(set(model.skipped_attacks) - set(attack_registry.names()))
    if unknown:
        raise ValueError(f"model {model.name!r}: skipped_attacks names unknown attack(s) {unknown}; the attacks "
                         f"are {attack_registry.names()}")


_MODELS = Registry(_builtin, lambda model: model.name, _check)


def register(model: ModelDescriptor) -> ModelDescriptor:
    """Add a model to the registry, replacing a model of the same name.

    Args:
        model: the model's descriptor; every attack it names in ``skipped_attacks`` must be registered.

    Returns:
        ``model``, so that a module may write ``MODEL = register(ModelDescriptor(...))``.

    Raises:
        ValueError: ``model.skipped_attacks`` names an attack that is not registered.

    Example:
        >>> import dataclasses
        >>> from dagster_privrelease.core.models import registry
        >>> leaky = dataclasses.replace(registry.descriptor("k_anonymity"), name="leaky")
        >>> registry.register(leaky).name
        'leaky'
        >>> registry.unregister("leaky")
    """
    return _MODELS.register(model)


def unregister(name: str) -> None:
    """Remove the model ``name`` (no error when it is not registered)."""
    _MODELS.unregister(name)


def registered(model: ModelDescriptor) -> contextlib.AbstractContextManager[ModelDescriptor]:
    """``model`` registered for the duration of the block (tests and notebooks)."""
    return _MODELS.registered(model)


def names() -> list[str]:
    """The registered model names, sorted."""
    return sorted(_MODELS.names())


def find(name: str) -> ModelDescriptor | None:
    """The descriptor of model ``name``, or None when no such model is registered."""
    return _MODELS.find(name)


def descriptor(name: str) -> ModelDescriptor:
    """The descriptor of model ``name``.

    Raises:
        SpecError: no model ``name`` is registered (the message names the known models).
    """
    model = find(name)
    if model is None:
        raise SpecError(f"model.name: unknown model {name!r}; the models are {names()}")
    return model
