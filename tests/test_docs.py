"""The documentation: README.md and the site under docs/ cannot drift from the code.

- The site builds with ``mkdocs build --strict`` (once per session, into a temporary folder), its generated reference
  pages hold every command and error class, and it renders in Chromium with no console errors or failed requests.
- Every ```python block runs, in a fresh folder holding the files the blocks name (``classifier.onnx``,
  ``image.jpg``, ``add_sub.py``, an empty ``models/`` repository), with ``tegrastats`` on PATH replaying captured
  Orin output. Blocks that talk to ``localhost:8001`` share one real tritonserver for the session (on free ports)
  serving the repository the getting-started page lays out (``classifier``, ``pre``, ``top`` and the ``classify``
  ensemble); ``grpc_port=9001`` becomes free ports. A block preceded by ``<!-- docs-test: import-only (why) -->``
  (one that needs a TensorRT plan, a Jetson, or models only an Orin serves) is compiled, and every ``orinkit`` name
  it imports must exist. (``readme-test``, the marker's old name, is refused.)
- Every ```bash / ```sh / ```console block passes ``bash -n``, and every ``edge-*`` command line in one names real
  subcommands and only options that command has, resolved through click.
- Every dotted ``orinkit.…`` name resolves, every ``python -m orinkit.…`` module is runnable, every ``edge-…`` name is
  a console script, and the README has at most 1,500 words.
"""

from __future__ import annotations

import ast
import functools
import http.server
import importlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np
import pytest
from conftest import DATA, ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*([\w-]+)")
OLD_MARKER = re.compile(r"^\s*<!--\s*readme-test:")
MODES = ("import-only",)
URL = "localhost:8001"
SHELLS = ("bash", "sh", "shell", "console")
README_WORDS = 1500
CHROMIUM = os.environ.get("ORINKIT_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
SITE_SHOT = DOCS / "images" / "site.png"
# The pages whose code blocks a newcomer copies most: every block on them must show its whole lines.
CODE_PAGES = ("getting-started/dev-machine/", "getting-started/orin/", "getting-started/first-model/",
              "guides/convert/", "guides/repository/", "guides/serving/", "guides/client/", "guides/video/",
              "guides/lanes/", "troubleshooting/")


def _hooks():
    """docs/hooks/reference.py, the build hook: the console scripts and their click commands, as the site reads them."""
    spec = importlib.util.spec_from_file_location("orinkit_docs_reference", DOCS / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOKS = _hooks()
SCRIPTS = HOOKS.console_scripts()


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


# --- the blocks -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Block:
    where: str  # path:line of the opening fence, 1-based
    lang: str
    source: str
    mode: str  # "run" or "import-only" (python blocks)


_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")


def fenced_blocks(text: str, name: str = "README.md") -> list[Block]:
    """Every fenced block of a Markdown text (indented ones, in lists and admonitions, too), with the
    ``docs-test`` mode of the nearest non-blank line above a python block."""
    lines = text.splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = next((i for i in range(index + 1, len(lines)) if closing.match(lines[i])), None)
        assert end is not None, f"{name}:{index + 1}: the {fence}{opening['lang']} block is never closed"
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[index + 1:end]]
        above = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marker = MARKER.match(above)
        mode = marker.group(1) if marker and opening["lang"] == "python" else "run"
        assert mode in ("run", *MODES), f"{name}:{index + 1}: unknown docs-test mode '{mode}' (use {MODES})"
        blocks.append(Block(f"{name}:{index + 1}", opening["lang"], "\n".join(body) + "\n", mode))
        index = end + 1
    return blocks


def all_blocks() -> list[Block]:
    return [b for path in pages() for b in fenced_blocks(path.read_text(encoding="utf-8"), _name(path))]


BLOCKS = all_blocks()
PYTHON = [b for b in BLOCKS if b.lang == "python"]
SHELL = [b for b in BLOCKS if b.lang in SHELLS]


def test_the_docs_have_blocks_and_every_marker_belongs_to_one():
    assert len(PYTHON) >= 10
    for path in pages():
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            assert not OLD_MARKER.match(line), f"{_name(path)}:{number}: the marker is <!-- docs-test: ... -->"
            if MARKER.match(line):
                following = next((x for x in lines[number:] if x.strip()), "")
                assert following.strip() == "```python", \
                    f"{_name(path)}:{number}: a docs-test marker before no python block"


def test_block_parser_reads_modes_languages_and_indented_fences():
    text = ("x\n```python\na = 1\n```\n<!-- docs-test: import-only (why) -->\n\n```python\nb = 2\n```\n"
            "```bash\nc\n```\n- item\n\n    ```python\n    d = [\n        1]\n    ```\n"
            "<!-- docs-test: import-only -->\n````python\ne = '```'\n````\n")
    assert fenced_blocks(text, "t.md") == [
        Block("t.md:2", "python", "a = 1\n", "run"), Block("t.md:7", "python", "b = 2\n", "import-only"),
        Block("t.md:10", "bash", "c\n", "run"), Block("t.md:15", "python", "d = [\n    1]\n", "run"),
        Block("t.md:20", "python", "e = '```'\n", "import-only")]


# --- stand-ins for the files the blocks name --------------------------------------------------------------------

def _classifier_onnx(path: Path) -> Path:
    """input [N, 3, 32, 32] FP32 → logits [N, 10]: Flatten and a MatMul, built with onnx.helper."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = np.random.default_rng(0).standard_normal((3 * 32 * 32, 10)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["input"], ["flat"], name="flatten"),
         helper.make_node("MatMul", ["flat", "weights"], ["logits"], name="matmul")],
        "classifier",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(weights, "weights")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


@pytest.fixture(scope="session")
def stand_ins(tmp_path_factory) -> Path:
    import sklearn.datasets

    folder = tmp_path_factory.mktemp("docs-stand-ins")
    _classifier_onnx(folder / "classifier.onnx")
    # A real photograph (scikit-learn ships it): what the image pipeline's blocks send.
    shutil.copyfile(Path(sklearn.datasets.__file__).parent / "images" / "china.jpg", folder / "image.jpg")
    shutil.copyfile(DATA / "repository" / "add_sub" / "1" / "model.py", folder / "add_sub.py")
    (folder / "models").mkdir()
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    tegrastats = bin_dir / "tegrastats"
    tegrastats.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        # Test double: replays an Orin Nano's captured tegrastats lines (tests/data/jetson/fake_tegrastats.py).
        exec {sys.executable} {DATA / "jetson" / "fake_tegrastats.py"} \\
            --fixture {DATA / "jetson" / "tegrastats" / "jp6_orin_nano.txt"} "$@"
        """))
    tegrastats.chmod(0o755)
    return folder


CLASSIFY = """
name: classify
steps:
  - model: pre
    inputs: {IMAGE: image}
    outputs: {TENSOR: pixels}
  - model: classifier
    inputs: {input: pixels}
    outputs: {logits: logits}
  - model: top
    inputs: {LOGITS: logits}
    outputs: {SCORES: scores, CLASS_IDS: ids}
outputs: [scores, ids]
"""


@pytest.fixture(scope="session")
def served_url(stand_ins, tmp_path_factory, triton_server_factory) -> str:
    """One real tritonserver for every block that talks to localhost:8001, serving what "Your first model" lays
    out: ``classifier``, ``pre`` (image bytes → [3, 32, 32]), ``top`` (top 3) and the ``classify`` ensemble."""
    from orinkit.repo import EnsembleSpec, ImagePreprocess, TopK, add_ensemble, add_model, add_step

    repository = tmp_path_factory.mktemp("docs-served") / "models"
    add_model(repository, stand_ins / "classifier.onnx", name="classifier")
    add_step(repository, ImagePreprocess(width=32, height=32), name="pre")
    add_step(repository, TopK(k=3), name="top")
    add_ensemble(repository, EnsembleSpec.from_yaml(CLASSIFY))
    return triton_server_factory(repository).command.grpc_url


def run_benchmark(requests: int) -> None:
    """Stand-in for the user's benchmark the TegrastatsSampler block wraps: long enough for a few samples."""
    time.sleep(0.6)


def _substituted(source: str, request) -> str:
    if URL in source:
        source = source.replace(URL, request.getfixturevalue("served_url"))
    if "grpc_port=9001" in source:
        from orinkit.server.ports import free_ports

        http_port, grpc, metrics = free_ports(3)
        source = source.replace("grpc_port=9001", f"grpc_port={grpc}, http_port={http_port}, metrics_port={metrics}")
    return source


def _import_names(source: str, where: str) -> list[str]:
    """Import every orinkit module the block imports, and every name it takes from one; the names checked."""
    tree = ast.parse(source, where)
    checked = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "orinkit":
                    importlib.import_module(alias.name)
                    checked.append(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "orinkit":
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):
                    importlib.import_module(f"{node.module}.{alias.name}")  # a submodule, or ImportError
                checked.append(f"{node.module}.{alias.name}")
    return checked


@pytest.mark.parametrize("block", PYTHON, ids=[b.where for b in PYTHON])
def test_python_block(block: Block, stand_ins, tmp_path, monkeypatch, request):
    if block.mode == "import-only":
        compile(block.source, block.where, "exec")
        assert _import_names(block.source, block.where), \
            f"{block.where}: an import-only block that imports nothing from orinkit"
        return
    work = tmp_path / "work"
    shutil.copytree(stand_ins, work, ignore=shutil.ignore_patterns("bin"))
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(work))  # add_sub.py, the Python-backend model's source
    monkeypatch.setenv("PATH", f"{stand_ins / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin")
    source = _substituted(block.source, request)
    namespace = {"__name__": "docs_block", "run_benchmark": run_benchmark}
    exec(compile(source, block.where, "exec"), namespace)  # noqa: S102 - running the docs is the point


# --- shell blocks: bash -n, and every edge-* command line through click -----------------------------------------

_SEPARATORS = {"|", "||", "&&", ";", "&", "|&", "(", ")", ";;", "{", "}"}
_WRAPPERS = {"sudo", "time", "nohup", "exec", "env", "command", "nice", "if", "elif", "while", "until", "then", "do",
             "else", "!"}
_WRAPPER_VALUES = {"-u", "-g", "-n"}  # sudo -u USER, nice -n 10
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")


def shell_script(block: Block) -> str:
    """The script a shell block holds: for a console block (or one with ``$ `` prompts), the prompted commands and
    their continuation lines, without the output."""
    lines = block.source.splitlines()
    if block.lang != "console" and not any(line.startswith("$ ") for line in lines):
        return block.source
    script, continued = [], False
    for line in lines:
        if line.startswith("$ ") or continued:
            script.append(line[2:] if line.startswith("$ ") and not continued else line)
            continued = line.rstrip().endswith("\\")
    return "\n".join(script) + "\n"


def command_lines(script: str) -> list[list[str]]:
    """The simple commands of a shell script, as words: continuations joined, comments, heredoc bodies,
    redirections, environment assignments and wrappers (sudo, time, env, ...) dropped, split at pipes and lists."""
    logical, pending, heredoc = [], "", None
    for line in script.splitlines():
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
        found = _HEREDOC.search(line)
        heredoc = found.group(1) if found else None
    if pending:
        logical.append(pending)
    commands = []
    for line in logical:
        line = re.sub(r"(?<![\w-])\d+(?=>|<)", " ", line)  # 2>&1: the descriptor goes with the redirection
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words, skip = [], False
        for token in lexer:
            if skip:
                skip = False
            elif token in _SEPARATORS:
                commands.append(words)
                words = []
            elif set(token) <= set("<>&") and set(token) & set("<>"):
                skip = True  # a redirection: its target follows
            else:
                words.append(token)
        commands.append(words)
    return [_unwrapped(words) for words in commands if words]


def _unwrapped(words: list[str]) -> list[str]:
    index = 0
    while index < len(words):
        word = words[index]
        if re.match(r"^[A-Za-z_]\w*=", word) or word in _WRAPPERS:
            index += 1
        elif word.startswith("-") and index and words[index - 1] in _WRAPPERS | _WRAPPER_VALUES | {"-E"}:
            index += 2 if word in _WRAPPER_VALUES else 1
        else:
            break
    words = words[index:]
    # python -m orinkit.cli.serve ... is edge-serve ...
    modules = {target.split(":")[0]: name for name, target in SCRIPTS.items()}
    if len(words) > 2 and Path(words[0]).name.startswith("python") and words[1] == "-m" and words[2] in modules:
        return [modules[words[2]], *words[3:]]
    return words


def check_edge_command(words: list[str]) -> click.Command:
    """Resolve an ``edge-*`` command line through its click command: the command and each subcommand must exist,
    and every option must be one that command has (given its value where it takes one). Values are not converted
    and required options are not demanded: docs show placeholders and partial lines. Returns the command reached."""
    name, args = words[0], list(words[1:])
    if name not in SCRIPTS:
        raise click.UsageError(f"{name} is no console script of setup.cfg ({', '.join(SCRIPTS)})")
    command = HOOKS.click_command(SCRIPTS[name])
    ctx = click.Context(command, info_name=name, **command.context_settings)
    while True:
        _, rest, _ = command.make_parser(ctx).parse_args(args=args)
        if not isinstance(command, click.Group) or not rest:
            return command
        sub = command.get_command(ctx, rest[0])
        if sub is None:
            raise click.UsageError(f"no such command '{rest[0]}' (has: {', '.join(command.list_commands(ctx))})",
                                   ctx)
        ctx = click.Context(sub, info_name=rest[0], parent=ctx, **sub.context_settings)
        command, args = sub, rest[1:]


def test_command_lines_are_split_as_the_shell_does():
    script = textwrap.dedent("""\
        # a comment
        sudo -u triton PYTHONPATH=. edge-convert model.onnx \\
            --repo models --name m   # trailing comment
        edge-bench --model m 2>&1 | tee out.txt && edge-serve run models > log.txt
        python -m orinkit.cli.serve run models
        cat <<EOF > x.yaml
        edge-nothing --in a heredoc
        EOF
        """)
    assert command_lines(script) == [
        ["edge-convert", "model.onnx", "--repo", "models", "--name", "m"],
        ["edge-bench", "--model", "m"], ["tee", "out.txt"], ["edge-serve", "run", "models"],
        ["edge-serve", "run", "models"], ["cat"]]
    console = Block("t.md:1", "console", "$ edge-serve run \\\n  models\nlistening\n$ ls\nmodels\n", "run")
    assert shell_script(console) == "edge-serve run \\\n  models\nls\n"


def test_the_edge_command_check_refuses_what_click_refuses():
    check_edge_command(["edge-repo", "step", "topk", "--repo", "models", "--name", "top", "--k", "3"])
    check_edge_command(["edge-convert", "--help"])
    for wrong in (["edge-repo", "no-such-subcommand"], ["edge-convert", "m.onnx", "--no-such-option"],
                  ["edge-bench", "--model"], ["edge-nothing", "x"]):
        with pytest.raises(click.UsageError):
            check_edge_command(wrong)


@pytest.mark.parametrize("block", SHELL, ids=[b.where for b in SHELL])
def test_shell_block(block: Block):
    script = shell_script(block)
    parsed = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=30)
    assert parsed.returncode == 0, f"{block.where}: bash -n: {parsed.stderr.strip()}"
    problems = []
    for words in command_lines(script):
        if re.fullmatch(r"edge-[a-z]+", words[0]):
            try:
                check_edge_command(words)
            except click.UsageError as error:
                problems.append(f"`{shlex.join(words)}`: {error.format_message()}")
    assert not problems, f"{block.where}: " + "; ".join(problems)


# --- names and commands in the prose ----------------------------------------------------------------------------

def _resolve(dotted: str):
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError as exc:
            if exc.name is not None and not ".".join(parts[:split]).startswith(exc.name):
                raise  # the module exists but imports something missing
            continue
        for attribute in parts[split:]:
            value = getattr(value, attribute)
        return value
    raise ModuleNotFoundError(dotted)


def _texts() -> dict[str, str]:
    return {_name(path): path.read_text(encoding="utf-8") for path in pages()}


def test_every_orinkit_name_in_the_docs_exists():
    names: dict[str, str] = {}
    for name, text in _texts().items():
        # Not a Kubernetes label such as orinkit.io/ring (a domain, followed by a slash).
        for dotted in re.findall(r"\borinkit(?:\.[A-Za-z_]\w*)+(?![\w/])", text):
            names.setdefault(dotted, name)
    assert len(names) > 20
    missing = []
    for dotted, where in sorted(names.items()):
        try:
            _resolve(dotted)
        except (ImportError, AttributeError) as exc:
            missing.append(f"{dotted} in {where} ({exc})")
    assert not missing, "the docs name what does not exist: " + "; ".join(missing)


def test_every_python_dash_m_module_runs_as_a_script():
    modules = {m: name for name, text in _texts().items() for m in re.findall(r"python3? -m (orinkit(?:\.\w+)+)", text)}
    assert modules
    for module, where in sorted(modules.items()):
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin, f"{where}: python -m {module}: no such module"
        source = Path(spec.origin).read_text(encoding="utf-8")
        assert re.search(r"""if __name__ == ["']__main__["']""", source), f"{where}: python -m {module} runs nothing"


def test_every_edge_command_is_an_entry_point():
    used = {m: name for name, text in _texts().items() for m in re.findall(r"\b(edge-[a-z]+)\b", text)}
    assert used
    unknown = {command: where for command, where in used.items() if command not in SCRIPTS}
    assert not unknown, f"the docs name commands setup.cfg lacks: {unknown}"
    for target in SCRIPTS.values():
        assert isinstance(HOOKS.click_command(target), click.Command), target


def test_the_readme_fits_on_a_screen_or_two():
    words = len(README.read_text(encoding="utf-8").split())
    assert words <= README_WORDS, f"README.md has {words} words; at most {README_WORDS} (the detail goes to docs/)"


# --- the site ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """``mkdocs build --strict``, once per session: any warning (a broken link or anchor, an API name the code no
    longer has, a reference page the code contradicts) fails it."""
    site = tmp_path_factory.mktemp("docs-site") / "site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                            cwd=ROOT, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-8000:]}"
    return site


def test_the_site_builds_strictly_with_every_page_of_the_nav(built_site):
    import yaml

    def files(nav) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, dict):
            return [f for value in nav.values() for f in files(value)]
        return [f for item in nav for f in files(item)]

    nav = files(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    assert nav[0] == "index.md" and len(nav) >= 20
    for page in nav:
        built = built_site / ("index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html")
        assert built.is_file(), f"{page} was not built"


def test_the_reference_pages_hold_every_command_and_error_class(built_site):
    cli = (built_site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")

    def walk(command: click.Command, ctx: click.Context) -> None:
        anchor = ctx.command_path.replace(" ", "-")
        assert f'id="{anchor}"' in cli, f"reference/cli.md has no heading for {ctx.command_path}"
        for param in command.get_params(ctx):
            if isinstance(param, click.Option) and not param.hidden:
                for option in [*param.opts, *param.secondary_opts]:
                    assert f"<code>{option}</code>" in cli, f"reference/cli.md lacks {ctx.command_path} {option}"
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                walk(sub, click.Context(sub, info_name=name, parent=ctx, **sub.context_settings))

    for name, target in SCRIPTS.items():
        command = HOOKS.click_command(target)
        walk(command, click.Context(command, info_name=name, **command.context_settings))

    errors = (built_site / "reference" / "errors" / "index.html").read_text(encoding="utf-8")
    classes = [cls for _, tree in HOOKS.error_trees() for cls in tree]
    assert len(classes) > 50
    for cls in classes:
        assert f">{cls.__name__}</code>" in errors, f"reference/errors.md lacks {cls.__module__}.{cls.__name__}"
    api = (built_site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for package in HOOKS.API_ORDER:
        for name in importlib.import_module(f"orinkit.{package}").__all__:
            assert f'id="orinkit.{package}.{name}"' in api, f"reference/api.md has no anchor orinkit.{package}.{name}"
    manifest = (built_site / "reference" / "manifest" / "index.html").read_text(encoding="utf-8")
    assert "tensorrt_version" in manifest and "<code>profiles</code>" in manifest


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's signature
        pass


@pytest.fixture
def served_site(built_site):
    handler = functools.partial(_QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_the_site_renders_in_chromium(served_site, tmp_path):
    """Home, a guide and the API reference in Chromium: Material's header, navigation and content drawn, the
    search answering, no console error and no failed request (nothing is fetched from outside: no fonts, no CDN).
    ORINKIT_DOCS_SCREENSHOT=1 copies the home page's screenshot to docs/images/site.png."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"no chromium at {CHROMIUM} (env ORINKIT_CHROMIUM): `make test` installs it "
                    "(apt-get install chromium); Playwright's own browser download is never used")
    errors, failed = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.set_default_timeout(30_000)
            page.on("console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"{page.url}: uncaught {e}"))
            page.on("requestfailed", lambda r: failed.append(f"{r.url} ({r.failure})"))
            page.on("response", lambda r: failed.append(f"{r.url} ({r.status})") if r.status >= 400 else None)
            shots = {}
            for name, path in (("home", ""), ("guide", "getting-started/first-model/"), ("api", "reference/api/")):
                page.goto(served_site + path, wait_until="networkidle")
                assert page.locator("header.md-header").is_visible(), name
                assert page.locator("nav.md-nav--primary").count() == 1, name
                assert page.locator("article.md-content__inner h1").first.is_visible(), name
                shots[name] = tmp_path / f"site-{name}.png"
                page.screenshot(path=str(shots[name]))
            # Every code block shows its whole lines (the trailing comments included) at common screen widths,
            # and no line runs under the copy button: 8 pages' blocks scrolled sideways before site.css.
            for width in (1280, 1920):
                page.set_viewport_size({"width": width, "height": 900})
                for path in CODE_PAGES:
                    page.goto(served_site + path, wait_until="networkidle")
                    clipped = page.evaluate("""() => [...document.querySelectorAll('.md-typeset pre > code')]
                        .filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent.slice(0, 60))""")
                    assert not clipped, f"{path} at {width} px: {clipped}"
            page.set_viewport_size({"width": 1280, "height": 900})
            # Material's search (?q= opens it with a query): the index is built in the page and answers offline.
            page.goto(served_site + "?q=edge-convert", wait_until="networkidle")
            page.locator(".md-search-result__item").first.wait_for()
        finally:
            browser.close()
    assert not errors, errors
    assert not failed, failed
    assert all(shot.stat().st_size > 10_000 for shot in shots.values())
    if os.environ.get("ORINKIT_ARTIFACTS"):  # where CI keeps screenshots
        folder = Path(os.environ["ORINKIT_ARTIFACTS"])
        folder.mkdir(parents=True, exist_ok=True)
        for shot in shots.values():
            shutil.copy(shot, folder / shot.name)
    if os.environ.get("ORINKIT_DOCS_SCREENSHOT") == "1":
        SITE_SHOT.parent.mkdir(exist_ok=True)
        shutil.copy(shots["home"], SITE_SHOT)
