"""A griffe extension: the docstrings' literal blocks (`Example::`) as Markdown code blocks.

The library's docstrings are Google style as Sphinx reads them, where a
paragraph ending in `::` introduces an indented literal block. Markdown has no
such marker, and mkdocstrings renders docstrings as Markdown: this turns the
marker into a colon (a bare `::` line disappears) and the block into a fenced
Python block, before the docstring is parsed.
"""

from __future__ import annotations

import textwrap
from typing import Any

import griffe


class LiteralBlocks(griffe.Extension):
    """Rewrite every docstring's literal blocks as fenced code blocks."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite `obj`'s docstring, if it has one."""
        if obj.docstring is not None:
            obj.docstring.value = fenced(obj.docstring.value)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def fenced(text: str) -> str:
    """`text` with each `::` literal block as a fenced Python block at the same indentation."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        ends_paragraph = line.rstrip().endswith("::")
        if not (ends_paragraph and i + 1 < len(lines) and not lines[i + 1].strip()):
            out.append(line)
            i += 1
            continue
        # The block: the lines after it that are blank or indented deeper.
        end = i + 1
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > _indent(line)):
            end += 1
        block = textwrap.dedent("\n".join(lines[i + 1 : end])).strip("\n")
        if not block:
            out.append(line)
            i += 1
            continue
        lead = line.rstrip()[:-2].rstrip()
        if lead.strip():
            out.append(lead + ":")
        pad = " " * _indent(line)
        code = [pad + row if row else "" for row in block.split("\n")]
        out += ["", pad + "```python", *code, pad + "```", ""]
        i = end
    return "\n".join(out)
