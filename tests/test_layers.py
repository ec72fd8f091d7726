"""The package graph has one direction, and the light packages stay light.

The graph is read from the source (every ``import orinkit.…``, lazy ones inside functions included), because a
cycle through a lazy import is still a cycle: it only waits for the first call to show.
"""

from __future__ import annotations

import ast
import configparser
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _packages() -> dict[str, Path]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    mapping = {}
    for line in config["options"]["package_dir"].strip().splitlines():
        name, folder = (part.strip() for part in line.split("="))
        mapping[name.removeprefix("orinkit.")] = ROOT / folder
    return mapping


def _imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def package_graph() -> dict[str, set[str]]:
    packages = _packages()
    graph: dict[str, set[str]] = {name: set() for name in packages}
    for name, folder in packages.items():
        for source in folder.rglob("*.py"):
            for module in _imported(ast.parse(source.read_text(), str(source))):
                parts = module.split(".")
                if parts[0] == "orinkit" and len(parts) > 1 and parts[1] != name and parts[1] in packages:
                    graph[name].add(parts[1])
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_cycle_between_packages():
    graph = package_graph()
    assert set(graph) >= {"core", "formats", "convert", "repo", "client", "server", "systemd", "jetson", "cli"}
    cycle = _cycle(graph)
    assert cycle is None, f"import cycle between packages: {' -> '.join(cycle)}"


def test_the_layers_point_down():
    graph = package_graph()
    assert graph["core"] == set()
    assert graph["formats"] == {"core"}
    # Libraries never import the command line; only the command line composes them.
    assert not any("cli" in deps for name, deps in graph.items() if name != "cli")
    for light in ("client", "jetson", "server", "systemd", "formats"):
        assert not graph[light] & {"convert", "lanes", "repo"}, f"{light} imports {graph[light]}"
    assert "convert" not in graph["repo"], "repo reads plans through orinkit.formats, never through convert"


# The task packages: what a model answers (lanes, boxes) is taught to the rest through orinkit.core.kits.
TASKS = {"lanes", "detect"}


def test_video_the_page_and_convert_reach_a_task_only_through_its_kit():
    """video/, ui/ and convert/ have no import statement of a task package (lazy ones included): they ask
    ``orinkit.core.kits.kit_for``, so a new task is a new kit and not an edit in each. convert/ reaching
    orinkit.detect by ``importlib`` with a string is not an import statement, and is allowed for now."""
    graph = package_graph()
    for user in ("video", "ui", "convert"):
        assert not graph[user] & TASKS, f"{user} imports {sorted(graph[user] & TASKS)}"


def test_the_light_packages_import_no_task():
    graph = package_graph()
    for light in ("core", "formats", "client", "jetson", "server", "systemd", "repo", "fleet", "tune"):
        assert not graph[light] & TASKS, f"{light} imports {sorted(graph[light] & TASKS)}"
    # The kits point down, never at each other: a broken kit must leave the other loadable.
    assert "lanes" not in graph["detect"] and "detect" not in graph["lanes"]


def test_the_video_pipeline_and_edge_stream_load_no_task_package():
    loaded = _loaded_after("import orinkit.video.pipeline, orinkit.video.adapters, orinkit.video.sinks, "
                           "orinkit.video.mp4, orinkit.video.live, orinkit.core.kits, orinkit.cli.stream")
    assert "orinkit.video.pipeline" in loaded
    tasks = {m for m in loaded if ".".join(m.split(".")[:2]) in {f"orinkit.{task}" for task in TASKS}}
    assert not tasks, f"video loads {sorted(tasks)} before a model asks for its kit"


def _loaded_after(statement: str) -> set[str]:
    prefixes = ("orinkit", "grpc", "torch", "onnx", "tensorrt", "tritonclient")
    code = f"import sys; {statement}; print('\\n'.join(m for m in sys.modules if m.startswith({prefixes!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


@pytest.mark.parametrize("statement", ["import orinkit.client", "import orinkit.repo",
                                       "from orinkit.repo import add_model, add_step, add_ensemble"])
def test_light_imports_load_no_conversion_or_server_code(statement):
    loaded = _loaded_after(statement)
    heavy = {m for m in loaded if m.split(".")[0] in ("torch", "onnxruntime", "tensorrt")
             or ".".join(m.split(".")[:2]) in ("orinkit.convert", "orinkit.server", "orinkit.lanes", "orinkit.detect",
                                               "orinkit.cli")}
    assert not heavy, f"{statement} loads {sorted(heavy)}"


def test_client_does_not_load_grpc_until_it_connects():
    loaded = _loaded_after("import orinkit.client")
    assert not {m for m in loaded if m.startswith(("grpc", "tritonclient"))}


@pytest.mark.parametrize("package", sorted(_packages()))
def test_no_exported_name_is_also_a_submodule(package):
    """``from orinkit.systemd import install`` gave the module once the submodule install.py was imported (it
    shadows the function of the same name): an export may never share its name with a module beside it."""
    import importlib

    exported = set(getattr(importlib.import_module(f"orinkit.{package}"), "__all__", ()))
    folder = ROOT / package
    modules = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    assert not exported & modules, f"orinkit.{package} exports {sorted(exported & modules)}, also its submodules"


def test_the_video_pipeline_loads_no_conversion_code_and_no_decoder_until_a_source_opens():
    code = ("import sys, orinkit.video.pipeline, orinkit.lanes.video, orinkit.cli.stream; "
            "print('\\n'.join(sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(run.stdout.split())
    assert "orinkit.video.pipeline" in loaded
    heavy = {m for m in loaded if m.split(".")[0] in ("torch", "onnxruntime", "tensorrt", "onnx", "av", "gi")
             or ".".join(m.split(".")[:2]) in ("orinkit.convert", "orinkit.server")}
    assert not heavy, f"the video pipeline loads {sorted(heavy)}"
