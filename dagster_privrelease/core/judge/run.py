"""The judge's entry point: a history judged as its model asks (the model's ``judged`` view, its verifiers, the
registered attacks against its bound).

- ``verify_history``: every verifier of the guarantee the history's model promises;
- ``attack_history``: the registered attacks, against the bound the model promises (the model's
  ``skipped_attacks`` reported as skipped);
- ``run_attacks``: the named attacks against a given bound, whatever the model.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..models.recorded import discount_recorded
from ..models.registry import descriptor
from ..progress import step
from . import attack_registry
from .attacks.intersection import NO_DISCLOSURE
from .history import Bound, History, Report
from .report import skipped

__all__ = ["attack_history", "judged", "run_attacks", "verify_history"]


def judged(history: History) -> History:
    """``history`` as the judge must read it.

    Args:
        history: a release history of a registered model.

    Returns:
        The model's ``judged`` view of its private state (e.g. m-invariance's held-back tuples), or ``history``
        itself for a model without one.
    """
    view = descriptor(history.spec.model.name).judged
    return history if view is None else view(history)


def verify_history(history: History) -> list[Report]:
    """Every verifier of the guarantee ``history.spec.model`` promises, over the whole (judged) history.

    Args:
        history: a release history of a registered model.

    Returns:
        One report per check of the model's ``verify``, reported as the step ``verifiers`` (``core.progress``).
    """
    with step("verifiers"):
        return descriptor(history.spec.model.name).verify(judged(history))


def run_attacks(history: History, bound: Bound = NO_DISCLOSURE, attacks: Sequence[str] | None = None) -> list[Report]:
    """Run the named attacks (default: every registered one) over ``history`` against ``bound``.

    An attack whose preconditions the history lacks (no snapshots, not incremental, not vertical, no CUS) returns
    an ok report whose summary says ``skipped`` and why. The cost is the sum of the attacks', less what they
    share: those that read ``History.shared`` (``Attack.shares``) run first, inside one ``History.sharing``
    block, so a release's classes and codes and a snapshot's ids are computed once for all of them and dropped
    before the others run. The attacks are independent: the order they run in changes no report. Each attack is
    reported as the step ``attack <name>`` (``core.progress``).

    Args:
        history: the history, as the judge reads it.
        bound: what the attacks judge against.
        attacks: attack names; None for every registered attack.

    Returns:
        One report per attack, in the order named.

    Raises:
        ValueError: a name is not a registered attack (the message names them).
    """
    names = attack_registry.names() if attacks is None else list(attacks)
    unknown = [a for a in names if attack_registry.find(a) is None]
    if unknown:
        raise ValueError(f"unknown attack(s) {unknown}; the attacks are {attack_registry.names()}")
    chosen = [attack_registry.attack(a) for a in names]
    with history.sharing():
        reports = {a.name: _run(a, history, bound) for a in chosen if a.shares}
    reports.update({a.name: _run(a, history, bound) for a in chosen if not a.shares})
    return [reports[a] for a in names]


def _run(attack: attack_registry.Attack, history: History, bound: Bound) -> Report:
    """``attack`` over ``history`` against ``bound``, as the step ``attack <name>``."""
    with step(f"attack {attack.name}"):
        return attack.run(history, bound)


def attack_history(history: History, attacks: Sequence[str] | None = None) -> list[Report]:
    """The named attacks over the (judged) history, against the bound the model promises.

    An attack the model declares inapplicable (``ModelDescriptor.skipped_attacks``) is reported as skipped, with
    the reason, in its place. After releases recorded as published before the tool (``recorded``), an attack
    fails only for what the later releases add (``recorded.discount_recorded``).

    Args:
        history: a release history of a registered model.
        attacks: attack names; None for every registered attack.

    Returns:
        One report per attack, in the order named.

    Raises:
        ValueError: a name is not a registered attack.
    """
    model = descriptor(history.spec.model.name)
    names = attack_registry.names() if attacks is None else list(attacks)
    bound = model.bound(history.spec.model.params)
    run = [a for a in names if a not in model.skipped_attacks]
    every = [a for a in attack_registry.names() if a not in model.skipped_attacks]  # what recorded releases disclose
    ran = iter(discount_recorded(history, run_attacks(judged(history), bound, run),
                                 lambda before: run_attacks(judged(before), bound, every)))
    return [skipped(a, model.skipped_attacks[a]) if a in model.skipped_attacks else next(ran) for a in names]
