"""Every ```python block of README.md runs, so the README cannot drift from the code.

Each block runs in a fresh folder holding the files the README names (``classifier.onnx``, ``add_sub.py``, an
empty ``models/`` repository), with ``tegrastats`` on PATH replaying captured Orin output. Blocks that talk to
``localhost:8001`` get a real tritonserver (this session's, on free ports) serving the models the README lays out
(``classifier`` and ``top``); ``grpc_port=9001`` becomes free ports. A block preceded by the HTML comment
``<!-- readme-test: import-only … -->`` (one that needs a TensorRT plan, a Jetson, or models only the Orin serves)
is compiled, and every ``orinkit`` name it imports must exist. Every other block must run without an exception.

Beyond the blocks: every dotted ``orinkit.…`` name in the README must resolve, every ``python -m orinkit.…`` module
must be runnable, and every ``edge-…`` command must be an entry point of setup.cfg.
"""

from __future__ import annotations

import ast
import configparser
import importlib
import importlib.util
import re
import shutil
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, ROOT

README = ROOT / "README.md"
MARKER = re.compile(r"<!--\s*readme-test:\s*([\w-]+)")
MODES = ("import-only",)
URL = "localhost:8001"


@dataclass(frozen=True)
class Block:
    line: int  # the line of the opening fence, 1-based
    source: str
    mode: str  # "run" or "import-only"


def readme_blocks(text: str | None = None) -> list[Block]:
    lines = (README.read_text(encoding="utf-8") if text is None else text).splitlines()
    blocks, index = [], 0
    while index < len(lines):
        if lines[index].strip() != "```python":
            index += 1
            continue
        start = index
        end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() == "```"), None)
        assert end is not None, f"README.md:{start + 1}: the ```python block is never closed"
        above = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        marker = MARKER.search(above)
        mode = marker.group(1) if marker else "run"
        assert mode in ("run", *MODES), f"README.md:{start + 1}: unknown readme-test mode '{mode}' (use {MODES})"
        blocks.append(Block(start + 1, "\n".join(lines[start + 1:end]) + "\n", mode))
        index = end + 1
    return blocks


BLOCKS = readme_blocks()


def test_the_readme_has_blocks_and_every_marker_belongs_to_one():
    assert len(BLOCKS) >= 10
    lines = README.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if MARKER.search(line):
            following = next((x for x in lines[number:] if x.strip()), "")
            assert following.strip() == "```python", f"README.md:{number}: a readme-test marker before no python block"


def test_block_parser_reads_modes():
    text = ("x\n```python\na = 1\n```\n<!-- readme-test: import-only (why) -->\n\n"
            "```python\nb = 2\n```\n```bash\nc\n```\n")
    assert readme_blocks(text) == [Block(2, "a = 1\n", "run"), Block(7, "b = 2\n", "import-only")]


# --- stand-ins for the files the blocks name -------------------------------------------------------------------

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
    folder = tmp_path_factory.mktemp("readme-stand-ins")
    _classifier_onnx(folder / "classifier.onnx")
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


@pytest.fixture(scope="session")
def served_url(stand_ins, tmp_path_factory, triton_server_factory) -> str:
    """A real tritonserver serving what the README's repository block lays out: ``classifier`` and ``top``."""
    from orinkit.repo import TopK, add_model, add_step

    repository = tmp_path_factory.mktemp("readme-served") / "models"
    add_model(repository, stand_ins / "classifier.onnx", name="classifier")
    add_step(repository, TopK(k=3), name="top")
    return triton_server_factory(repository).command.grpc_url


def run_benchmark(requests: int) -> None:
    """Stand-in for the user's benchmark the TegrastatsSampler block wraps: long enough for a few samples."""
    time.sleep(0.6)


def _substituted(source: str, request) -> str:
    if URL in source:
        source = source.replace(URL, request.getfixturevalue("served_url"))
    if "grpc_port=9001" in source:
        from orinkit.server.ports import free_ports

        http, grpc, metrics = free_ports(3)
        source = source.replace("grpc_port=9001", f"grpc_port={grpc}, http_port={http}, metrics_port={metrics}")
    return source


# --- the blocks ------------------------------------------------------------------------------------------------

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


@pytest.mark.parametrize("block", BLOCKS, ids=[f"line{b.line}-{b.mode}" for b in BLOCKS])
def test_readme_block(block: Block, stand_ins, tmp_path, monkeypatch, request):
    where = f"README.md:{block.line}"
    if block.mode == "import-only":
        compile(block.source, where, "exec")
        assert _import_names(block.source, where), f"{where}: an import-only block that imports nothing from orinkit"
        return
    work = tmp_path / "work"
    shutil.copytree(stand_ins, work, ignore=shutil.ignore_patterns("bin"))
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(work))  # add_sub.py, the Python-backend model's source
    monkeypatch.setenv("PATH", f"{stand_ins / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin")
    source = _substituted(block.source, request)
    namespace = {"__name__": "readme_block", "run_benchmark": run_benchmark}
    exec(compile(source, where, "exec"), namespace)  # noqa: S102 - running the README is the point


# --- names and commands in the prose ---------------------------------------------------------------------------

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


def test_every_orinkit_name_in_the_readme_exists():
    # Not a Kubernetes label such as orinkit.io/ring (a domain, followed by a slash).
    names = sorted(set(re.findall(r"\borinkit(?:\.[A-Za-z_]\w*)+(?![\w/])", README.read_text(encoding="utf-8"))))
    assert len(names) > 20
    missing = []
    for name in names:
        try:
            _resolve(name)
        except (ImportError, AttributeError) as exc:
            missing.append(f"{name} ({exc})")
    assert not missing, "README names what does not exist: " + "; ".join(missing)


def test_every_python_dash_m_module_runs_as_a_script():
    modules = set(re.findall(r"python -m (orinkit(?:\.\w+)+)", README.read_text(encoding="utf-8")))
    assert modules
    for module in sorted(modules):
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin, f"python -m {module}: no such module"
        source = Path(spec.origin).read_text(encoding="utf-8")
        assert re.search(r"""if __name__ == ["']__main__["']""", source), f"python -m {module} runs nothing"


def test_every_edge_command_is_an_entry_point():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    scripts = {line.split("=")[0].strip(): line.split("=")[1].strip()
               for line in config["options.entry_points"]["console_scripts"].strip().splitlines()}
    used = set(re.findall(r"\b(edge-[a-z]+)\b", README.read_text(encoding="utf-8")))
    assert used and used <= set(scripts), f"README names commands setup.cfg lacks: {sorted(used - set(scripts))}"
    for target in scripts.values():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), target
