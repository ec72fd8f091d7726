"""mkdocs hook: the reference pages, generated from the code at every build so that they cannot drift from it.

Each page under ``docs/reference/`` that holds a ``<!-- generated: NAME -->`` line gets that line replaced by what
the code says today:

- ``cli``: every console script of setup.cfg walked through click (commands, subcommands, every option and argument);
- ``api``: a mkdocstrings ``:::`` entry for every name each package exports (its ``__all__``);
- ``errors``: the ``EXIT_*`` codes of ``orinkit.core.errors`` and every ``OrinkitError`` subclass of every package's
  ``errors`` module, as trees, with their exit codes, docstrings and the hints the code raises them with;
- ``manifest``: the engine manifest's fields (``orinkit.formats.manifest``) and the build facts ``edge-convert``
  records in it.

Something the code does not say (an exit code with no meaning in ``orinkit.core.errors``' table, a manifest field
with no description) is logged as a warning, which ``mkdocs build --strict`` turns into a failure.
"""

from __future__ import annotations

import ast
import configparser
import dataclasses
import importlib
import importlib.util
import inspect
import io
import logging
import re
import shutil
import sys
import tempfile
import textwrap
import tokenize
from pathlib import Path

import click
from mkdocs.plugins import event_priority

log = logging.getLogger("mkdocs.hooks.reference")

ROOT = Path(__file__).resolve().parents[2]
GENERATED = re.compile(r"^<!--\s*generated:\s*([\w-]+)\s*-->\s*$", re.MULTILINE)
# The API reference's order: what a user meets first, down to what every package shares.
API_ORDER = ("client", "convert", "repo", "server", "systemd", "jetson", "lanes", "detect", "video", "ui", "fleet",
             "tune", "formats", "core")


def _load_sibling(name: str):
    spec = importlib.util.spec_from_file_location(f"orinkit_docs_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


to_markdown = _load_sibling("docstrings").to_markdown


# --- what setup.cfg declares ------------------------------------------------------------------------------------

def _setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    return config


def console_scripts() -> dict[str, str]:
    """``{"edge-convert": "orinkit.cli.convert:main", ...}`` in setup.cfg's order."""
    lines = _setup_cfg()["options.entry_points"]["console_scripts"].strip().splitlines()
    return dict((part.strip() for part in line.split("=", 1)) for line in lines if line.strip())


def package_dirs() -> dict[str, Path]:
    """``{"core": ROOT / "core", ...}``: the top-level packages of the ``orinkit`` namespace (setup.cfg package_dir)."""
    lines = _setup_cfg()["options"]["package_dir"].strip().splitlines()
    pairs = (line.split("=", 1) for line in lines if line.strip())
    return {name.strip().removeprefix("orinkit."): ROOT / folder.strip() for name, folder in pairs
            if name.strip().count(".") == 1}


def click_command(target: str) -> click.Command:
    """The click command behind a console script (``module:function``). A script that wraps its module's click
    command in a plain function (edge-stream's ``run``) resolves to the module's ``main``."""
    module_name, attribute = target.split(":")
    module = importlib.import_module(module_name)
    value = getattr(module, attribute)
    if isinstance(value, click.Command):
        return value
    main = getattr(module, "main", None)
    if isinstance(main, click.Command):
        return main
    raise TypeError(f"{target} is not a click command, and {module_name} has no click command 'main'")


# --- Markdown helpers -------------------------------------------------------------------------------------------

def _escape(text: str) -> str:
    """Plain text for Markdown (a table cell): Markdown's own characters escaped outside `code spans`."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(part if index % 2 else re.sub(r"([\\*_\[\]|>])", r"\\\1", part).replace("<", "&lt;")
                   for index, part in enumerate(parts))


def _cell(markdown: str) -> str:
    """Markdown (paragraphs) as one table cell."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", markdown.strip()) if p.strip()]
    return "<br>".join(paragraphs).replace("|", "\\|")


def _table(header: str, rows: list[str]) -> list[str]:
    """A Markdown table in the div the site's stylesheet (docs/stylesheets/reference.css) lays out."""
    columns = header.count("|") - 1
    return ['<div class="orinkit-reference" markdown>', "", header, "|" + "---|" * columns, *rows, "", "</div>", ""]


def _code(value) -> str:
    text = str(value)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


# --- cli: every command, from click -----------------------------------------------------------------------------

def _help_text(command: click.Command) -> str:
    text = inspect.cleandoc(command.help or "").split("\f")[0]
    return "\n".join(line for line in text.splitlines() if line.strip() != "\b").strip()


def _param_names(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        return _code(param.human_readable_name)
    names = [*param.opts, *param.secondary_opts]
    return ", ".join(_code(name) for name in names)


def _param_type(param: click.Parameter) -> str:
    kind = param.type
    if isinstance(param, click.Option) and param.is_flag:
        text = "flag" if not param.secondary_opts else "on/off flag"
    elif isinstance(kind, click.Choice):
        text = "one of " + ", ".join(_code(choice) for choice in kind.choices)
    elif isinstance(kind, click.Path):
        text = "file" if kind.dir_okay is False else "folder" if kind.file_okay is False else "path"
    else:
        text = kind.name
    if isinstance(param, click.Option) and param.multiple:
        text += ", repeatable"
    if param.nargs == -1:
        text += ", any number" if not param.required else ", one or more"
    elif param.nargs > 1:
        text = f"{param.nargs} × {text}"
    return text


def _param_default(param: click.Parameter, ctx: click.Context) -> str:
    if isinstance(param, click.Option) and isinstance(param.show_default, str):
        return _escape(param.show_default)
    value = param.get_default(ctx, call=False)
    if value is None or value is getattr(sys.modules.get("click._utils"), "UNSET", None) or value == ():
        return ""
    if callable(value):
        return "computed"
    if isinstance(param, click.Option) and param.is_flag:
        if param.secondary_opts:
            return _code(param.opts[0] if value else param.secondary_opts[0])
        return "" if value is False else "on"
    if isinstance(value, (list, tuple)):
        return ", ".join(_code(v) for v in value)
    return _code(value)


def _param_help(param: click.Parameter) -> str:
    text = getattr(param, "help", None) or ""
    extra = []
    if getattr(param, "envvar", None):
        extra.append(f"Environment variable: {_code(param.envvar)}.")
    if isinstance(param, click.Option) and param.count:
        extra.append("Counts: repeat it for more.")
    return " ".join([_escape(" ".join(text.split())), *extra]).strip()


def _command_markdown(command: click.Command, ctx: click.Context, level: int) -> list[str]:
    path = ctx.command_path
    anchor = path.replace(" ", "-")
    out = [f"{'#' * level} {path} {{ #{anchor} }}", ""]
    if command.deprecated:
        out += ["!!! warning \"Deprecated\"", "", "    This command is deprecated.", ""]
    help_text = _help_text(command)
    if help_text:
        out += [_escape(help_text), ""]
    out += ["```text", f"{path} {' '.join(command.collect_usage_pieces(ctx))}".rstrip(), "```", ""]
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    if params:
        rows = []
        for param in params:
            what = " ".join(filter(None, ["**Required.**" if param.required else "", _param_help(param)]))
            rows.append(f"| {_param_names(param)} | {_param_type(param)} | {_param_default(param, ctx)} | {what} |")
        out += _table("| name | type | default | what it does |", rows)
    if isinstance(command, click.Group):
        names = [n for n in command.list_commands(ctx) if not command.get_command(ctx, n).hidden]
        out += ["Subcommands:", ""]
        for name in names:
            sub = command.get_command(ctx, name)
            summary = _escape(sub.get_short_help_str(limit=1000))
            out.append(f"- [`{path} {name}`](#{anchor}-{name}): {summary}")
        out.append("")
        for name in names:
            sub = command.get_command(ctx, name)
            child = click.Context(sub, info_name=name, parent=ctx, **sub.context_settings)
            out += _command_markdown(sub, child, level + 1)
    return out


def cli_markdown() -> str:
    scripts = console_scripts()
    rows = [f"| [`{name}`](#{name}) | {_escape(click_command(target).get_short_help_str(limit=1000))} |"
            for name, target in scripts.items()]
    out = _table("| command | what it does |", rows)
    for name, target in scripts.items():
        command = click_command(target)
        out += _command_markdown(command, click.Context(command, info_name=name, **command.context_settings), 2)
    return "\n".join(out)


# --- api: mkdocstrings entries for every exported name ----------------------------------------------------------

def _top_level_names(path: Path) -> tuple[set[str], set[str]]:
    """(names a module defines, names it imports) at its top level, read from its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    defined, imported = set(), set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update((a.asname or a.name).split(".")[0] for a in node.names)
    return defined, imported


def _defining_module(package: str, folder: Path, name: str) -> str:
    """The module of ``orinkit.<package>`` that defines ``name`` (for names the package exports lazily)."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        if path.name == "__init__.py" and path.parent == folder:
            continue
        if name in _top_level_names(path)[0]:
            parts = path.relative_to(folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found.append(".".join(("orinkit", package, *parts)))
    if len(found) != 1:
        log.warning(f"orinkit.{package} exports {name}, defined in {len(found)} of its modules ({found}): "
                    "the API reference cannot place it")
    return found[0] if found else f"orinkit.{package}"


def api_markdown() -> str:
    folders = package_dirs()
    missing = sorted(set(folders) - set(API_ORDER) - {"cli"})
    if missing:
        log.warning(f"the API reference has no place for the packages {missing}: add them to API_ORDER")
    out = []
    for package in API_ORDER:
        module = importlib.import_module(f"orinkit.{package}")  # __init__ only: lazy names stay unloaded
        exported = list(getattr(module, "__all__", ()))
        if not exported:
            log.warning(f"orinkit.{package} has no __all__: the API reference lists nothing for it")
        defined, imported = _top_level_names(folders[package] / "__init__.py")
        out += [f"::: orinkit.{package}", "    options:", "      heading_level: 2", "      show_root_full_path: true",
                "      members: false", ""]
        for name in exported:
            if name in defined | imported:
                out += [f"::: orinkit.{package}.{name}", ""]
            else:  # a name the package loads on first use: documented where it is defined, linkable as exported
                where = _defining_module(package, folders[package], name)
                out += [f'<a id="orinkit.{package}.{name}"></a>', "", f"::: {where}.{name}", ""]
    return "\n".join(out)


# --- errors: exit codes and every error class -------------------------------------------------------------------

def _exit_meanings(errors) -> dict[int, str]:
    """code → meaning, from the table in orinkit.core.errors' docstring."""
    rows = re.findall(r"^(\d+)\s{2,}(.+)$", inspect.getdoc(errors) or "", re.MULTILINE)
    return {int(code): meaning.strip() for code, meaning in rows}


def _exit_names(errors) -> dict[int, list[str]]:
    names: dict[int, list[str]] = {}
    for name, value in vars(errors).items():
        if name.startswith("EXIT_") and isinstance(value, int):
            names.setdefault(value, []).append(name)
    return names


def _hints(folders: dict[str, Path], classes: dict[str, type]) -> dict[type, list[str]]:
    """The hints the code raises each error class with: every literal ``hint=`` given to its constructor (or to
    ``super().__init__`` in its own ``__init__``), ``{…}`` where the text is computed."""

    def text(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else "{…}" for v in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = text(node.left), text(node.right)
            return None if left is None or right is None else left + right
        return None

    found: dict[type, list[str]] = {}
    for folder in folders.values():
        for path in sorted(folder.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            owners = {}  # super().__init__ calls: the class whose body holds them
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    for inner in ast.walk(node):
                        owners.setdefault(id(inner), node.name)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call) \
                        and getattr(func.value.func, "id", None) == "super":
                    name = owners.get(id(node))
                else:
                    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) \
                        else None
                if name not in classes:
                    continue
                for keyword in node.keywords:
                    hint = text(keyword.value) if keyword.arg == "hint" else None
                    if hint and hint not in found.setdefault(classes[name], []):
                        found[classes[name]].append(hint)
    return found


def _own_doc(cls: type) -> str:
    """The class's own docstring as Markdown (not one inherited from its parent)."""
    doc = cls.__dict__.get("__doc__")
    return to_markdown(inspect.cleandoc(doc)) if doc else ""


def error_trees() -> list[tuple[str, list[type]]]:
    """(package, the OrinkitError subclasses its ``errors`` module defines, in source order) for every package."""
    from orinkit.core.errors import OrinkitError

    folders = package_dirs()
    trees = []
    for package in dict.fromkeys([*API_ORDER, *sorted(folders)]):
        module_name = f"orinkit.{package}.errors"
        if package not in folders or importlib.util.find_spec(module_name) is None:
            continue
        module = importlib.import_module(module_name)
        classes = [value for value in vars(module).values() if isinstance(value, type)
                   and issubclass(value, OrinkitError) and value.__module__ == module_name]
        if classes:
            trees.append((package, classes))
    return trees


# How many of a class's hints its row shows; the list under the table has them all.
ROW_HINTS = 3


def _error_rows(classes: list[type], anchors: dict[type, str], names: dict[int, list[str]],
                hints: dict[type, list[str]]) -> list[str]:
    """One table row per class, each below its parent (indented), children in source order: its exit code, its
    docstring and the first hints the code raises it with."""
    members = set(classes)
    rows: list[str] = []

    def parent(cls: type) -> type | None:
        return next((base for base in cls.__bases__ if base in members), None)

    def walk(cls: type, depth: int) -> None:
        indent = "&emsp;" * depth + ("└ " if depth else "")
        label = f'<code id="{anchors[cls]}">{cls.__name__}</code>'
        outside = [b.__name__ for b in cls.__bases__ if parent(cls) is not b and b is not object]
        based = _escape(f" ({', '.join(outside)})") if outside else ""
        constant = (names.get(cls.exit_code) or [""])[0]
        what = _cell(_own_doc(cls))
        given = hints.get(cls, [])
        if given:
            more = f" (and {len(given) - ROW_HINTS} more below)" if len(given) > ROW_HINTS else ""
            shown = "; ".join(f"*{_escape(text)}*" for text in given[:ROW_HINTS])
            what += ("<br>" if what else "") + f'<span class="hints">Hints: {shown}{more}</span>'
        rows.append(f"| {indent}{label}{based} | {cls.exit_code}&nbsp;`{constant}` | {what} |")
        for child in classes:
            if parent(child) is cls:
                walk(child, depth + 1)

    for cls in classes:
        if parent(cls) is None:
            walk(cls, 0)
    return rows


def errors_markdown() -> str:
    from orinkit.core import errors as core_errors

    meanings, names = _exit_meanings(core_errors), _exit_names(core_errors)
    out = ["## Exit codes { #exit-codes }", "",
           "Every command ends with the exit code of the error that stopped it, so a script can tell them apart.", "",
           ]
    rows = []
    for code in sorted(names):
        if code not in meanings:
            log.warning(f"exit code {code} ({', '.join(names[code])}) has no row in orinkit.core.errors' table")
        constants = ", ".join(f"`{n}`" for n in names[code])
        rows.append(f"| {code} | {constants} | {_escape(meanings.get(code, ''))} |")
    out += _table("| code | constant | meaning |", rows)
    for code in sorted(set(meanings) - set(names)):
        log.warning(f"orinkit.core.errors' table explains exit code {code}, which no EXIT_ constant defines")

    trees = error_trees()
    counts: dict[str, int] = {}
    for _, classes in trees:
        for cls in classes:
            counts[cls.__name__] = counts.get(cls.__name__, 0) + 1
    # A class's anchor is its name (reference/errors.md#AccuracyGateError); a name two packages share gets its
    # package in front.
    anchors = {cls: cls.__name__ if counts[cls.__name__] == 1 else f"{package}.{cls.__name__}"
               for package, classes in trees for cls in classes}
    by_name = {cls.__name__: cls for cls in anchors if counts[cls.__name__] == 1}
    hints = _hints(package_dirs(), by_name)

    out += ["## Error classes { #error-classes }", "",
            "Every error orinkit raises on purpose derives from `OrinkitError`: `message` says what went wrong, "
            "`hint` how to fix it, and `str(error)` gives both on one line (a command prints it as `Error: ...`). "
            "Each package has its own tree; the exit code is the class's `exit_code`.", ""]
    for package, classes in trees:
        out += [f"### orinkit.{package} {{ #orinkit.{package} }}", "",
                *_table("| error | exit code | what it means |", _error_rows(classes, anchors, names, hints))]
        given = [(cls, hints[cls]) for cls in classes if hints.get(cls)]
        if given:
            count = sum(len(texts) for _, texts in given)
            out += [f'??? note "Every hint orinkit.{package}\'s errors are raised with ({count})"', ""]
            for cls, texts in given:
                out.append(f"    - `{cls.__name__}`: " + "; ".join(f"*{_escape(text)}*" for text in texts))
            out.append("")
    return "\n".join(out)


# --- manifest: the engine manifest's fields ---------------------------------------------------------------------

def _field_comments(cls: type) -> dict[str, str]:
    """A dataclass's field comments: the comment lines right above a field, else its own trailing comment."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    comments = {}
    for node in ast.parse(source).body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above, index = [], node.lineno - 2
        while index >= 0 and lines[index].strip().startswith("#"):
            above.insert(0, lines[index].strip().lstrip("#").strip())
            index -= 1
        trailing = ""
        if "#" in lines[node.lineno - 1]:
            try:
                tokens = tokenize.generate_tokens(io.StringIO(lines[node.lineno - 1] + "\n").readline)
                trailing = next((t.string.lstrip("#").strip() for t in tokens if t.type == tokenize.COMMENT), "")
            except tokenize.TokenError:  # a field whose default spans lines
                trailing = ""
        text = " ".join(above) or trailing
        if text:
            comments[node.target.id] = text
    return comments


# What the code leaves unsaid about a field, said once here. A field missing from both the code's comments and this
# table (or a name here that is no field) is a warning: --strict fails until they are in step.
MANIFEST_FIELDS = {
    "inputs": "The engine's inputs, each ``{name, dtype, shape}`` with its full engine shape (-1 where dynamic).",
    "outputs": "The engine's outputs, each ``{name, dtype, shape}`` like the inputs.",
    "precision": "What the engine computes in: ``fp32``, ``fp16`` or ``int8``.",
    "format_version": "The manifest format; orinkit refuses a manifest newer than the one it writes.",
}


def manifest_markdown() -> str:
    from orinkit.formats import manifest as module
    from orinkit.formats.manifest import EngineManifest, ProfileShape
    from orinkit.formats.tensors import TensorSpec

    comments = _field_comments(EngineManifest)
    out = [f"A plan `model.plan` has its manifest beside it as `model.plan{module.SUFFIX}` (format version "
           f"{module.FORMAT_VERSION}); `orinkit.formats.read_manifest` and `write_manifest` read and write it.", "",
           "## Fields { #fields }", ""]
    rows = []
    fields = dataclasses.fields(EngineManifest)
    for name in sorted(set(MANIFEST_FIELDS) - {f.name for f in fields}):
        log.warning(f"MANIFEST_FIELDS describes '{name}', which EngineManifest no longer has")
    for field in fields:
        meaning = comments.get(field.name) or MANIFEST_FIELDS.get(field.name)
        if field.name in comments and field.name in MANIFEST_FIELDS:
            log.warning(f"EngineManifest.{field.name} is described in the code now: drop it from MANIFEST_FIELDS")
        if not meaning:
            log.warning(f"EngineManifest.{field.name} has no description (a comment above it in "
                        "orinkit/formats/manifest.py)")
        if field.default is not dataclasses.MISSING:
            default = _code(repr(field.default))
        elif field.default_factory is not dataclasses.MISSING:
            default = _code(repr(field.default_factory()))
        else:
            default = "required"
        rows.append(f"| `{field.name}` | {_code(field.type)} | {default} | {_cell(to_markdown(meaning or ''))} |")
    out += _table("| field | type | default | what it holds |", rows)
    out += ["Each profile maps an input's name to its shapes: "
            + ", ".join(f"`{f.name}`" for f in dataclasses.fields(ProfileShape))
            + " (the smallest, the one TensorRT tunes for, the largest).", ""]

    build = _build_keys()
    if build:
        out += ["## Build facts { #build }", "",
                "What `edge-convert` records under `build` when it builds a plan (`orinkit.convert.pipeline`), and "
                "where orinkit reads each back:", ""]
        from orinkit.convert.pipeline import ConvertOptions

        options = _field_comments(ConvertOptions)
        rows = []
        for key, source, readers in build:
            attribute = re.fullmatch(r".*\bself\.(\w+)\b.*", source)
            meaning = options.get(attribute.group(1), "") if attribute and key.startswith("options.") else ""
            written = _code(source) + (f": {_escape(meaning)}" if meaning else "")
            rows.append(f"| `{key}` | {written} | {', '.join(_code(r) for r in readers)} |")
        out += _table("| key | written from | read by |", rows)

    example = EngineManifest(
        inputs=(TensorSpec.parse("input:FP16:-1x3x360x640"),),
        outputs=(TensorSpec("proposals", "FP32", (-1, 2784, 77)),),
        profiles=({"input": ProfileShape((1, 3, 360, 640), (1, 3, 360, 640), (4, 3, 360, 640))},), precision="fp16")
    out += ["## Example { #example }", "",
            "A manifest as `write_manifest` writes it (the build facts left empty):", "", "```json",
            example.to_json().rstrip(), "```", ""]
    return "\n".join(out)


def _build_keys() -> list[tuple[str, str, list[str]]]:
    """(key, the expression that writes it, the modules that read it) for every key of the ``build`` dict the
    conversion pipeline writes, nested dicts spread; read from the source."""
    folders = package_dirs()
    path = folders["convert"] / "pipeline.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "EngineManifest"]
    build = next((k.value for c in calls for k in c.keywords if k.arg == "build"), None)
    if not isinstance(build, ast.Dict):
        log.warning("orinkit.convert.pipeline writes no EngineManifest(build={...}): the manifest page cannot list "
                    "its build facts")
        return []
    keys: list[tuple[str, str]] = []
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}

    def spread(node: ast.Dict, prefix: str = "") -> None:
        for key, value in zip(node.keys, node.values):
            if key is None:  # **expression
                if isinstance(value, ast.Dict):
                    spread(value, prefix)
                elif isinstance(value, ast.IfExp):
                    for branch in (value.body, value.orelse):
                        if isinstance(branch, ast.Dict):
                            spread(branch, prefix)
                elif ast.unparse(value).endswith("facts.as_dict()"):
                    from orinkit.convert.facts import DeviceFacts

                    keys.extend((prefix + f.name, f"current_facts().{f.name}") for f in dataclasses.fields(DeviceFacts))
                else:
                    keys.append((prefix + "...", f"**{ast.unparse(value)}"))
            elif isinstance(key, ast.Constant):
                keys.append((prefix + key.value, "{...}" if isinstance(value, ast.Dict) else ast.unparse(value)))
                if isinstance(value, ast.Dict):
                    spread(value, f"{prefix}{key.value}.")
                elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                        and value.func.attr in functions:  # options.recorded(): the dict that method returns
                    returned = [n.value for n in ast.walk(functions[value.func.attr]) if isinstance(n, ast.Return)]
                    for dictionary in returned:
                        if isinstance(dictionary, ast.Dict):
                            spread(dictionary, f"{prefix}{key.value}.")

    spread(build)
    readers: dict[str, list[str]] = {}
    for package, folder in folders.items():
        for source in sorted(folder.rglob("*.py")):
            text = source.read_text(encoding="utf-8")
            module = ".".join(("orinkit", package, *source.relative_to(folder).with_suffix("").parts))
            for key in re.findall(r"\.build\.get\(\s*[\"'](\w+)[\"']", text):
                readers.setdefault(key, []).append(module)
    seen, result = set(), []
    for key, source in keys:
        if key in seen:
            continue
        seen.add(key)
        result.append((key, " ".join(source.split()), sorted(set(readers.get(key, [])))))
    return result


# --- the hook ---------------------------------------------------------------------------------------------------

PAGES = {"cli": cli_markdown, "api": api_markdown, "errors": errors_markdown, "manifest": manifest_markdown}
_tree: Path | None = None


@event_priority(100)  # before mkdocstrings' own on_config reads its handlers' options
def on_config(config):
    """Let griffe find the ``orinkit`` namespace: a temporary folder where ``orinkit/<name>`` links to each
    package's folder, added to mkdocstrings' Python paths."""
    global _tree
    if _tree is not None:  # mkdocs serve reloads the config on every change
        shutil.rmtree(_tree, ignore_errors=True)
    _tree = Path(tempfile.mkdtemp(prefix="orinkit-docs-"))
    (_tree / "orinkit").mkdir()
    for name, folder in package_dirs().items():
        (_tree / "orinkit" / name).symlink_to(folder, target_is_directory=True)
    plugin = config.plugins.get("mkdocstrings")
    if plugin is not None:
        python = plugin.config.handlers.setdefault("python", {})
        python["paths"] = [str(_tree), *python.get("paths", [])]
    return config


def on_page_markdown(markdown: str, page, config, files):
    def generate(match: re.Match) -> str:
        name = match.group(1)
        if name not in PAGES:
            log.warning(f"{page.file.src_uri}: no generator named '{name}' (known: {sorted(PAGES)})")
            return match.group(0)
        return PAGES[name]()

    return GENERATED.sub(generate, markdown)


def on_shutdown():
    if _tree is not None:
        shutil.rmtree(_tree, ignore_errors=True)
