"""The attack registry: the only list of attacks, with the same shape as the model registry
(``core.models.registry``). The judge (``run.attack_history``), the CLI's ``--attack`` and a model's
``skipped_attacks`` read it and nothing else.

The built-in attacks (``BUILTIN``, the modules of ``judge.attacks``) are loaded on the first lookup. An attack
outside the package registers itself the same way (``register``), before a model naming it is registered.

This module imports no attack and nothing that imports the spec: the model registry imports it at its top.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..registry import Registry

if TYPE_CHECKING:
    from .history import Bound, History, Report

__all__ = ["BUILTIN", "Attack", "attack", "find", "names", "register", "registered", "unregister"]


@dataclass(frozen=True)
class Attack:
    """An adversary the judge simulates over a release history.

    Attributes:
        name: how the judge, the CLI's ``--attack`` and a model's ``skipped_attacks`` name it.
        run: ``run(history, bound) -> Report``; reads only what a ``History`` holds, and fails (``Report.ok``
            False) for the individuals it pushes below ``bound``.
        shares: True when it reads a release's classes and a snapshot's ids through ``History.shared``: the
            attacks that do run together, inside one ``History.sharing`` block, so those are computed once.
    """

    name: str
    run: Callable[[History, Bound], Report]
    shares: bool = False


#: The built-in attacks, in the order the judge runs them: name, module of ``judge.attacks``, function, shares.
BUILTIN = (
    ("intersection", "intersection", "intersection_attack", True),
    ("critical", "intersection", "critical_attack", True),
    ("forward", "correspondence", "forward_attack", True),
    ("cross", "correspondence", "cross_attack", True),
    ("backward", "correspondence", "backward_attack", True),
    ("equivalence", "equivalence", "equivalence_attack", False),
    ("join", "vertical", "join_attack", False),
    ("possible_worlds", "vertical", "possible_world_attack", False),
    ("sug", "sug", "sug_attack", False),
)

def _builtin() -> Iterator[Attack]:
    for name, module, function, shares in BUILTIN:
        yield Attack(name, getattr(importlib.import_module(f"{__package__}.attacks.{module}"), function), shares)


_ATTACKS = Registry(_builtin, lambda attack: attack.name)


def register(attack: Attack) -> Attack:
    """Add an attack to the registry, replacing an attack of the same name; the judge runs it after the
    attacks registered before it.

    Args:
        attack: the attack.

    Returns:
        ``attack``.

    Example:
        >>> from dagster_privrelease.core.judge import attack_registry
        >>> from dagster_privrelease.core.judge.history import Report
        >>> quiet = attack_registry.Attack("quiet", lambda history, bound: Report("quiet", True))
        >>> attack_registry.register(quiet).name
        'quiet'
        >>> attack_registry.unregister("quiet")
    """
    return _ATTACKS.register(attack)


def unregister(name: str) -> None:
    """Remove the attack ``name`` (no error when it is not registered)."""
    _ATTACKS.unregister(name)


def registered(attack: Attack) -> contextlib.AbstractContextManager[Attack]:
    """``attack`` registered for the duration of the block (tests and notebooks)."""
    return _ATTACKS.registered(attack)


def names() -> list[str]:
    """The registered attack names, in the order the judge runs them."""
    return _ATTACKS.names()


def find(name: str) -> Attack | None:
    """The attack ``name``, or None when no such attack is registered."""
    return _ATTACKS.find(name)


def attack(name: str) -> Attack:
    """The attack ``name``.

    Raises:
        ValueError: no attack ``name`` is registered (the message names the known attacks).
    """
    found = find(name)
    if found is None:
        raise ValueError(f"unknown attack {name!r}; the attacks are {names()}")
    return found
