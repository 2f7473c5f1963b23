"""MkDocs hook: the CLI reference, generated from the typer app at build time (no network, no extra package).

A page line ``<!-- cli-reference -->`` is replaced by one section per command of ``dagster_privrelease.cli.app``:
its help text, its usage line and a table of its options, read from the command typer builds (typer's own click).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import typer

MARKER = "<!-- cli-reference -->"


def _prose(text: str) -> str:
    """A docstring's paragraphs with their hard line breaks joined (typer prints them as written)."""
    paragraphs = re.split(r"\n\s*\n", inspect.cleandoc(text or ""))
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs if p.strip())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _option_row(param: Any, context: typer.Context) -> str:
    names = ", ".join(f"`{n}`" for n in (*param.opts, *param.secondary_opts))
    kind = "flag" if param.is_flag else param.display_type(context).strip("<>")
    if param.min is not None:
        kind += f" ≥ {param.min}"
    default = param.default
    shown = "required" if param.required else ("—" if default is None or callable(default) else f"`{default}`")
    return f"| {names} | {kind} | {shown} | {_cell(_prose(getattr(param, 'help', None) or ''))} |"


def _command(name: str, command: Any, parent: typer.Context) -> str:
    context = typer.Context(command, info_name=name, parent=parent)
    usage = " ".join(command.collect_usage_pieces(context))
    rows = [_option_row(p, context) for p in command.get_params(context) if p.name != "help"]
    table = ["| option | type | default | what |", "|---|---|---|---|", *rows] if rows else []
    return "\n".join([f"## `privrelease {name}`", "", _prose(command.help or ""), "", "```text",
                      f"privrelease {name} {usage}", "```", "", *table, ""])


def reference() -> str:
    """The markdown of every command of the ``privrelease`` app, in the app's order."""
    from dagster_privrelease.cli import app

    group = typer.main.get_command(app)
    root = typer.Context(group, info_name="privrelease")
    return "\n".join(_command(name, group.commands[name], root) for name in group.list_commands(root))


def on_page_markdown(markdown: str, **_: object) -> str:
    """Replace the marker line with the generated reference."""
    return markdown.replace(MARKER, reference()) if MARKER in markdown else markdown
