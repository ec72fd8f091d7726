"""Docstrings as Markdown: orinkit's docstrings are prose with reStructuredText's ``literals``, ``:class:`X```
roles and ``>>>`` examples. Markdown renders ``literals`` as code already; this turns the roles into code and each
run of ``>>>`` lines into a fenced ``pycon`` block.

Used twice: as a griffe extension (mkdocs.yml, mkdocstrings' ``extensions``) for the API reference, and by
``reference.py`` for the docstrings it puts on the errors page.
"""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const|ref):`~?([^`]+)`")
_PROMPT = re.compile(r"^(\s*)(>>>|\.\.\.)(\s|$)")
_DIRECTIVE = re.compile(r"\s*#\s*doctest:.*$")


def to_markdown(text: str) -> str:
    """``text`` (a cleaned docstring) with roles as code spans and doctest runs fenced as ``pycon``."""
    text = _ROLE.sub(r"``\1``", text)
    lines, out, index = text.splitlines(), [], 0
    while index < len(lines):
        line = lines[index]
        prompt = _PROMPT.match(line)
        if not prompt or prompt.group(2) != ">>>":
            # reST's "Example::" introduces a literal block: in Markdown the indented block is code already.
            out.append(line[:-1] if line.endswith("::") and not line.strip() == "::" else line)
            index += 1
            continue
        indent = prompt.group(1)
        block = []
        while index < len(lines) and lines[index].strip():  # the example and its output, up to a blank line
            block.append(lines[index][len(indent):] if lines[index].startswith(indent) else lines[index].strip())
            index += 1
        if out and out[-1].strip():
            out.append("")
        block = [_DIRECTIVE.sub("", b) for b in block]  # "# doctest: +SKIP" is for doctest, not for readers
        out += [f"{indent}```pycon", *(f"{indent}{b}" for b in block), f"{indent}```", ""]
    return "\n".join(out).rstrip() + "\n"


class DocstringsAsMarkdown(griffe.Extension):
    """The griffe extension: every docstring griffe reads passes through :func:`to_markdown`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
