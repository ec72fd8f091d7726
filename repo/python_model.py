"""One way to ship a Python-backend model: a spec that writes both its config and a self-contained ``model.py``.

A model orinkit ships (the pre- and post-processing steps, the runners, the BLS chain, the lane post-processing)
is a module holding ``TritonPythonModel``. Its top-level ``from orinkit.… import …`` statements are resolved here,
at build time: the modules they name are inlined ahead of the model's code (recursively), so the ``model.py``
written into the repository imports nothing of orinkit and the server's Python needs numpy (and Pillow for
images) only. A vendored module may import orinkit inside ``try: … except ImportError:`` (its errors join
orinkit's tree where orinkit is installed, and fall back to built-in ones where it is not); any other orinkit import
is refused, as are two inlined modules defining the same name.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from orinkit.core.version import __version__
from orinkit.repo.add import PlacedModel
from orinkit.repo.configs import Runtime, build_config
from orinkit.repo.errors import VendoringError
from orinkit.repo.layout import check_model_name, new_model_folder
from orinkit.repo.options import ModelOptions
from orinkit.repo.pbtxt import CONFIG_NAME, write_config
from orinkit.repo.signature import Signature


@dataclass(frozen=True)
class PythonModelSpec:
    """A Python-backend model: ``source`` names the module holding ``TritonPythonModel`` (``orinkit.repo.pymodels
    .topk``), ``signature`` its tensors, ``parameters`` the config's parameters it reads, ``files`` what is copied
    beside ``model.py`` (name in the version folder → source path)."""

    source: str
    signature: Signature
    parameters: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, Path] = field(default_factory=dict)

    def config(self, name: str, options: ModelOptions | None = None):
        options = options or ModelOptions()
        options = replace(options, parameters=(*options.parameters, *self.parameters.items()))
        return build_config(check_model_name(name), Runtime.PYTHON, self.signature, options)


def add_python_model(repository: str | os.PathLike[str], spec: PythonModelSpec, *, name: str,
                     options: ModelOptions | None = None, hint: str = "choose another name") -> PlacedModel:
    """Write ``<repository>/<name>/config.pbtxt`` and ``1/model.py`` (self-contained) for ``spec``, whole or not
    at all."""
    repository = Path(repository)
    config = spec.config(name, options)
    with new_model_folder(repository, name, hint=hint) as staging:
        write_python_files(staging / "1", spec.source, spec.files)
        write_config(staging / CONFIG_NAME, config)
    return PlacedModel(name, repository / name, 1, Runtime.PYTHON, config)


def write_python_files(version: Path, source: str, files: Mapping[str, Path] = {}) -> None:  # noqa: B006 - read only
    version.mkdir(parents=True, exist_ok=True)
    (version / "model.py").write_text(model_source(source), encoding="utf-8")
    for filename, path in files.items():
        shutil.copyfile(path, version / filename)


def model_source(module: str, *, inline: str = "orinkit") -> str:
    """The text of ``module`` with the modules it imports from package ``inline`` inlined ahead of it: a
    self-contained model.py."""
    parts: dict[str, _Part] = {}
    _collect(module, parts, stack=(), prefix=inline + ".")
    clashes = _clashes(parts.values())
    if clashes:
        raise VendoringError(f"inlining into {module} defines {', '.join(sorted(clashes))} twice",
                             hint="rename one of them in orinkit's source")
    main = parts.pop(module)
    lines = [f'"""{main.docstring or "A Triton Python-backend model."}', "",
             f"Written by orinkit {__version__}: the orinkit code this model uses is inlined below, so the server's",
             'Python needs only what the code itself imports (numpy; Pillow for images)."""', ""]
    if any(p.future for p in (main, *parts.values())):
        lines += ["from __future__ import annotations", ""]
    for part in parts.values():
        lines += [_rule(f"inlined from {part.module}"), part.body, "", ""]
    lines += [_rule(module), main.body]
    text = "\n".join(lines).rstrip() + "\n"
    compile(text, f"<model.py from {module}>", "exec")
    return text


def _rule(title: str) -> str:
    head = f"# ---- {title} "
    return head + "-" * max(4, 116 - len(head))


@dataclass
class _Part:
    module: str
    docstring: str | None
    body: str
    future: bool
    defined: set[str]


def _module_text(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise VendoringError(f"cannot find the source of {module}", hint="reinstall orinkit")
    return Path(spec.origin).read_text(encoding="utf-8")


def _collect(module: str, parts: dict[str, _Part], stack: tuple[str, ...], prefix: str) -> None:
    if module in parts:
        return
    if module in stack:
        raise VendoringError(f"{' -> '.join((*stack, module))} import each other", hint="break the cycle")
    text = _module_text(module)
    tree = ast.parse(text)
    lines = text.splitlines()
    drop: set[int] = set()
    aliases: list[str] = []
    future = False
    docstring = ast.get_docstring(tree)
    body = tree.body
    if docstring is not None:
        drop.update(range(body[0].lineno, body[0].end_lineno + 1))
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            future = True
            drop.update(range(node.lineno, node.end_lineno + 1))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix) and node.level == 0:
            _collect(node.module, parts, (*stack, module), prefix)
            drop.update(range(node.lineno, node.end_lineno + 1))
            aliases += [f"{a.asname} = {a.name}" for a in node.names if a.asname and a.asname != a.name]
        elif isinstance(node, ast.Import) and any(a.name.startswith(prefix) for a in node.names):
            raise VendoringError(f"{module} line {node.lineno}: 'import {prefix}…' cannot be inlined",
                                 hint=f"use 'from {prefix}x import name'")
    _refuse_nested_imports(module, tree, prefix)
    kept = [line for number, line in enumerate(lines, start=1) if number not in drop]
    body_text = "\n".join(kept).strip("\n")
    if aliases:
        body_text = "\n".join(aliases) + "\n" + body_text
    parts[module] = _Part(module, docstring, body_text, future, _defined(tree))


def _refuse_nested_imports(module: str, tree: ast.Module, prefix: str) -> None:
    """Inside functions or classes an orinkit import would run in the server; only ``try/except ImportError``
    guards (with their own fallback) are allowed."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            guarded.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        imported = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        if any(m.startswith(prefix) or m == prefix[:-1] for m in imported) and id(node) not in top | guarded:
            raise VendoringError(f"{module} line {node.lineno} imports {prefix[:-1]} where it cannot be inlined",
                                 hint="import it at module level, or guard it with try/except ImportError")


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names)


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Try):
            names |= _defined(ast.Module(body=[*node.body, *(s for h in node.handlers for s in h.body)],
                                         type_ignores=[]))
    return names


def _clashes(parts) -> set[str]:
    seen: dict[str, str] = {}
    clashes = set()
    for part in parts:
        for name in part.defined:
            if name in seen and not name.startswith("__"):
                clashes.add(f"{name} ({seen[name]}, {part.module})")
            seen[name] = part.module
    return clashes
