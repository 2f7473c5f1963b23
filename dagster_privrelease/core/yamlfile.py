"""Reading the YAML files a user writes (specs, taxonomy files, release requests): one loader for all of them.

It is PyYAML's safe loader, stricter in one rule: a key written twice in one mapping is refused (PyYAML keeps
the last one silently). Every failure is one line naming the file, and the line and column where the reader
stopped. A file is read by libyaml's parser when PyYAML has it (``FastStrictLoader``: 5-10 times faster than
the pure-Python one, which took 0.03-0.15 s of CPU for a spec and its taxonomies, read twice a release); a file
it refuses is read again by the pure-Python ``StrictLoader``, whose message is the one reported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, ScalarNode

from ..errors import SpecError


class _UniqueKeys:
    """A loader's constructor that refuses a mapping holding the same key twice (merge keys ``<<`` may still be
    overridden, as YAML intends)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The mapping of ``node``; ConstructorError marked at the second occurrence of a repeated key."""
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)  # type: ignore[attr-defined]
            if key in first:
                raise ConstructorError(
                    problem=f"key {key!r} is written twice in one mapping (first at line {first[key]}); "
                    "write each key once",
                    problem_mark=key_node.start_mark,
                )
            first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class StrictLoader(_UniqueKeys, yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping holding the same key twice (``_UniqueKeys``)."""


#: libyaml's safe loader (C parser, Python constructor), or the pure-Python one when PyYAML was built without it.
_LIBYAML: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class FastStrictLoader(_UniqueKeys, _LIBYAML):
    """``StrictLoader`` on libyaml's parser (``yaml.CSafeLoader``; the pure-Python one without libyaml)."""


def read_yaml(path: Path, what: str) -> Any:
    """The YAML document in ``path`` (None for an empty file), read with ``StrictLoader``.

    Args:
        path: the file.
        what: what the file is, for the message ("spec", "taxonomy file", "request").

    Raises:
        SpecError: one line naming ``path``: the file cannot be read, or it is not valid YAML (with the line and
            column where the reader stopped and PyYAML's one-line reason), or a mapping repeats a key.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the {what} ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: cannot read the {what} (it is not UTF-8 text)") from exc
    try:
        return yaml.load(text, Loader=FastStrictLoader)  # a SafeLoader: builds plain data only
    except yaml.YAMLError:
        pass
    try:  # the pure-Python reader's message and position: the same words whichever parser found the fault
        return yaml.load(text, Loader=StrictLoader)
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML{_where(exc)}") from exc


def _where(exc: yaml.YAMLError) -> str:
    """``exc``'s position and reason as ``" at line L, column C: reason"`` (empty when PyYAML gives neither)."""
    mark = getattr(exc, "problem_mark", None)
    problem = " ".join(str(getattr(exc, "problem", None) or "").split())
    where = "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"
    return where + (f": {problem}" if problem else "")
