"""dagster_privrelease: privacy-preserving re-publication of a changing table, as a Dagster plugin.

The public API, importable from the package itself:

- Dagster: ``ProtectedTableComponent`` (one protected table configured by a ``defs.yaml``; the
  ``dagster_dg_cli.registry_modules`` entry point names this package, so ``dg`` lists it), ``release_definitions``
  (a code location for one protected table), ``run_release`` (one release through the release job, in-process),
  ``Source`` and ``Fingerprint`` (where the rows come from);
- the store: ``ReleaseStore`` (the DuckDB file of one table);
- the spec: ``Spec``, ``load_spec``;
- extending: ``ModelDescriptor``, ``Param``, ``Stage``, ``register`` (a model), ``Attack``, ``register_attack``,
  and what a model or an attack reads and returns (``History``, ``Bound``, ``Report``, ``PreviousRelease``,
  ``Release``, ``build_release``);
- the errors: ``PrivReleaseError`` and its kinds.

Names are imported on first use (``__getattr__``), so ``import dagster_privrelease`` loads neither Dagster nor
DuckDB.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import DatasetUnavailable, NotPublishable, PrivReleaseError, SnapshotError, SpecError, StoreError

if TYPE_CHECKING:
    from .core.judge.attack_registry import Attack
    from .core.judge.attack_registry import register as register_attack
    from .core.judge.history import Bound, History, Report
    from .core.models.base import ModelDescriptor, Param, Stage
    from .core.models.registry import register
    from .core.release import PreviousRelease, Release, build_release
    from .core.spec import Spec, load_spec
    from .orchestration import Fingerprint, Source, release_definitions, run_release
    from .orchestration.component import ProtectedTableComponent
    from .storage import ReleaseStore

__version__ = "0.1.0"

#: Every lazily imported public name -> (module, attribute).
_LAZY = {
    "Attack": ("core.judge.attack_registry", "Attack"),
    "Bound": ("core.judge.history", "Bound"),
    "Fingerprint": ("orchestration", "Fingerprint"),
    "History": ("core.judge.history", "History"),
    "ModelDescriptor": ("core.models.base", "ModelDescriptor"),
    "Param": ("core.models.base", "Param"),
    "PreviousRelease": ("core.release", "PreviousRelease"),
    "ProtectedTableComponent": ("orchestration.component", "ProtectedTableComponent"),
    "Release": ("core.release", "Release"),
    "ReleaseStore": ("storage", "ReleaseStore"),
    "Report": ("core.judge.history", "Report"),
    "Source": ("orchestration", "Source"),
    "Spec": ("core.spec", "Spec"),
    "Stage": ("core.models.base", "Stage"),
    "build_release": ("core.release", "build_release"),
    "load_spec": ("core.spec", "load_spec"),
    "register": ("core.models.registry", "register"),
    "register_attack": ("core.judge.attack_registry", "register"),
    "release_definitions": ("orchestration", "release_definitions"),
    "run_release": ("orchestration", "run_release"),
}

__all__ = [
    "Attack", "Bound", "DatasetUnavailable", "Fingerprint", "History", "ModelDescriptor", "NotPublishable", "Param",
    "PreviousRelease", "PrivReleaseError", "ProtectedTableComponent", "Release", "ReleaseStore", "Report",
    "SnapshotError", "Source", "Spec", "SpecError", "Stage", "StoreError", "__version__", "build_release", "load_spec",
    "register", "register_attack", "release_definitions", "run_release",
]


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use.

    Raises:
        AttributeError: ``name`` is not a public name of the package.
    """
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazy ones included."""
    return sorted({*globals(), *_LAZY})
