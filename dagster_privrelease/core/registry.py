"""A registry of named entries, the shape the models and the attacks share (``models.registry``,
``judge.attack_registry``): ``register``, ``unregister``, ``registered``, ``names``, ``find``; the built-in
entries loaded on the first use, not when the registry's module is imported."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries by name, in the order they were registered (the built-in ones first).

    Args:
        builtin: the built-in entries, read once, on the first use of the registry.
        name_of: an entry's name.
        check: raises (ValueError, naming the entry and the rule) for an entry that cannot be registered.
    """

    def __init__(self, builtin: Callable[[], Iterable[T]], name_of: Callable[[T], str],
                 check: Callable[[T], None] = lambda entry: None) -> None:
        self._entries: dict[str, T] = {}
        self._name_of = name_of
        self._check = check
        self._builtin = functools.cache(lambda: self._add_all(builtin()))

    def _add_all(self, entries: Iterable[T]) -> None:
        for entry in entries:
            self._check(entry)
            self._entries[self._name_of(entry)] = entry

    def register(self, entry: T) -> T:
        """Add ``entry``, replacing an entry of the same name; returns it. Raises what ``check`` raises."""
        self._builtin()
        self._check(entry)
        self._entries[self._name_of(entry)] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove the entry ``name`` (no error when there is none)."""
        self._builtin()
        self._entries.pop(name, None)

    @contextmanager
    def registered(self, entry: T) -> Iterator[T]:
        """``entry`` registered for the duration of the block (tests and notebooks)."""
        self.register(entry)
        try:
            yield entry
        finally:
            self.unregister(self._name_of(entry))

    def names(self) -> list[str]:
        """The names, in the order the entries were registered."""
        self._builtin()
        return list(self._entries)

    def find(self, name: str) -> T | None:
        """The entry ``name``, or None."""
        self._builtin()
        return self._entries.get(name)
