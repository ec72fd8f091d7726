from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Real tritonservers for tests; the plugin also adds each server's log to a failing test's report.
pytest_plugins = ["orinkit.server.testing"]

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
# The folders setup.cfg maps into the orinkit namespace.
# Every folder setup.cfg maps to orinkit.<name>.
PACKAGE_DIRS = {"core", "formats", "server", "jetson", "convert", "repo", "client", "systemd", "lanes", "cli", "ui",
                "fleet", "video", "detect"}


@pytest.fixture(scope="session")
def repository_server(triton_server_factory):
    """The hand-written repository (add_sub and the add_sub_twice ensemble) on a real tritonserver."""
    return triton_server_factory(DATA / "repository")


@pytest.fixture(scope="session")
def int8_digits(tmp_path_factory) -> dict:
    """The trained digits classifier, its calibration set and held-out samples (tests/int8_models.py)."""
    from int8_models import digits_model

    return digits_model(tmp_path_factory.mktemp("int8-digits"))


@pytest.fixture(scope="session")
def int8_converted(int8_digits, tmp_path_factory):
    """Its INT8 conversion where TensorRT is absent: ``(result, progress lines)``."""
    from int8_models import convert_digits

    return convert_digits(int8_digits, tmp_path_factory.mktemp("int8-converted"))


@pytest.fixture(scope="session")
def source_tree(tmp_path_factory) -> Path:
    """A folder where ``import orinkit.<pkg>`` finds this checkout's sources without installing them, so that
    other interpreters (Python 3.10, or one started without site-packages) can import them."""
    tree = tmp_path_factory.mktemp("source-tree")
    (tree / "orinkit").mkdir()
    for name in PACKAGE_DIRS:
        (tree / "orinkit" / name).symlink_to(ROOT / name)
    return tree


def run_python(code: str, *, python: str = sys.executable, flags: tuple[str, ...] = (), pythonpath=None,
               timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([python, *flags, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)
