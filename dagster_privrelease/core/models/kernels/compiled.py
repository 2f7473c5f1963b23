"""Compiled kernels (issue #26): a loop that numpy cannot vectorise further, written once as plain Python over
numpy arrays and compiled by numba (``njit(cache=True)``), beside the numpy reference it must agree with.

``compiled(reference)`` turns such a loop into a ``Kernel``: called, it runs the compiled loop, or the numpy
``reference`` inside ``references()`` (the path before the kernel existed; the property tests and the benchmarks
compare both). numba is imported, and the loop compiled, on the first call of a kernel, not when the package is
imported: a step that runs no kernel pays nothing. The machine code is cached on disk (``cache=True``) and read
back by the next process: next to the module when its folder is writable, else under
``$PRIVRELEASE_CACHE/numba`` (default ``~/.cache/dagster_privrelease/numba``; ``NUMBA_CACHE_DIR`` when set wins);
with no folder numba can write, each process compiles its kernels again (about a second each).
Kernels take and mutate numpy arrays only, one partition of the codes at a time.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

__all__ = ["Kernel", "compiled", "loaded", "references"]

#: False inside ``references()``: every kernel runs its numpy reference.
_COMPILED: ContextVar[bool] = ContextVar("privrelease_compiled", default=True)


@contextmanager
def references() -> Iterator[None]:
    """Inside the block every ``Kernel`` runs its numpy reference instead of its compiled loop."""
    token = _COMPILED.set(False)
    try:
        yield
    finally:
        _COMPILED.reset(token)


class Kernel:
    """A loop compiled by numba on first call, and the numpy reference it agrees with.

    Attributes:
        loop: the plain-Python loop numba compiles (also callable as it is, slowly).
        reference: the numpy implementation, same arguments and effects.
    """

    def __init__(self, loop: Callable[..., Any], reference: Callable[..., Any]) -> None:
        self.loop = loop
        self.reference = reference
        functools.update_wrapper(self, loop)

    def __call__(self, *args: Any) -> Any:
        """Run the compiled loop (compiling it, or reading it from the cache, on the first call), or the reference
        inside ``references()``."""
        if not _COMPILED.get():
            return self.reference(*args)
        return self.machine_code()(*args)

    @functools.cached_property
    def _compiled(self) -> Callable[..., Any]:
        numba = _numba()
        try:
            return numba.njit(cache=True, nogil=True)(self.loop)
        except RuntimeError:  # numba found no folder to cache in: compiled again by every process
            return numba.njit(nogil=True)(self.loop)

    def machine_code(self) -> Callable[..., Any]:
        """The compiled loop: numba's dispatcher, made on first use."""
        return self._compiled


def loaded() -> bool:
    """Whether this process has imported numba already (some kernel ran). Importing it and reading a kernel's
    cached machine code costs about a second of CPU once per process, so a caller whose loop saves less than that
    (``judge.utility``'s estimates) runs the compiled loop only when numba is loaded anyway or its work is large,
    and the numpy reference (the same results) otherwise. O(1)."""
    return "numba" in sys.modules


def compiled(reference: Callable[..., Any]) -> Callable[[Callable[..., Any]], Kernel]:
    """Decorator: the loop below as a ``Kernel`` whose numpy reference is ``reference``."""
    return lambda loop: Kernel(loop, reference)


@functools.cache
def _numba() -> Any:
    """numba, imported on first use with a writable cache folder (module docstring)."""
    pycache = Path(__file__).parent / "__pycache__"
    if "NUMBA_CACHE_DIR" not in os.environ and not os.access(pycache if pycache.exists() else pycache.parent,
                                                             os.W_OK):
        from ....datasets import cache_dir

        folder = cache_dir() / "numba"
        folder.mkdir(parents=True, exist_ok=True)
        os.environ["NUMBA_CACHE_DIR"] = str(folder)
    import numba

    return numba
