"""The distribution: one namespace, light imports, Python 3.10 on the device side."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import PACKAGE_DIRS, ROOT, run_python

HEAVY = ("torch", "tensorrt", "pycuda", "onnxruntime", "pytriton")
# Code that runs on the Orin, where JetPack 6 has Python 3.10.
DEVICE_SIDE = ("core", "formats", "server", "client", "jetson", "systemd", "convert", "ui", "fleet", "video", "lanes",
               "tune", "detect")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out),
         str(ROOT)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    (path,) = out.glob("orinkit-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_installs_every_folder_under_the_orinkit_namespace(wheel):
    names = set(wheel.namelist())
    for folder in PACKAGE_DIRS:
        for source in (ROOT / folder).rglob("*.py"):
            if "__pycache__" in source.parts:
                continue
            assert f"orinkit/{source.relative_to(ROOT)}" in names, f"{source} is not packaged"
    assert not any(n.startswith(tuple(f"{d}/" for d in PACKAGE_DIRS)) for n in names), "a top-level package leaked"
    assert "orinkit/__init__.py" not in names, "orinkit must stay a namespace package"
    assert not any(n.startswith("tests/") for n in names)


def test_wheel_declares_the_console_script_and_extras(wheel):
    (entry_points,) = [n for n in wheel.namelist() if n.endswith("entry_points.txt")]
    scripts = wheel.read(entry_points).decode()
    assert "edge-serve = orinkit.cli.serve:main" in scripts
    assert "edge-repo = orinkit.cli.repo:main" in scripts
    assert "edge-convert = orinkit.cli.convert:main" in scripts
    assert "edge-bench = orinkit.cli.bench:main" in scripts
    assert "edge-jetson = orinkit.cli.jetson:main" in scripts
    assert "edge-fleet = orinkit.cli.fleet:main" in scripts
    (metadata,) = [n for n in wheel.namelist() if n.endswith("METADATA")]
    text = wheel.read(metadata).decode()
    assert "Requires-Python: >=3.10" in text
    for extra in ("torch", "device", "tensorrt", "server", "test", "fleet", "int8"):
        assert f"Provides-Extra: {extra}" in text
    assert 'numpy<2,>=1.21; extra == "server"' in text
    assert 'nvidia-modelopt==0.47.0; extra == "int8"' in text  # without its [onnx] extra (see setup.cfg)
    # The Orin's install (video + convert, never server) converts: the gates' onnxruntime comes with convert, and
    # the error for a missing onnxruntime names that extra, not the server one the Orin page leaves out.
    assert 'onnxruntime>=1.16; extra == "convert"' in text


def test_a_missing_onnxruntime_names_the_convert_extra():
    from orinkit.core.optional import INSTALL_HINTS

    assert "orinkit[convert]" in INSTALL_HINTS["onnxruntime"]


def test_importing_any_package_loads_no_heavy_optional_dependency():
    code = (
        "import sys\n"
        + "".join(f"import orinkit.{name}\n" for name in sorted(PACKAGE_DIRS))
        + "import orinkit.cli.serve, orinkit.cli.repo, orinkit.repo.check, orinkit.repo.deploy\n"
        + "import orinkit.cli.convert, orinkit.convert.trt, orinkit.convert.fp16.gate\n"
        + "import orinkit.cli.bench, orinkit.client.bench, orinkit.client.shm\n"
        + "import orinkit.cli.jetson, orinkit.jetson.sampler, orinkit.lanes.client, orinkit.lanes.repository\n"
        + f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def _python310() -> str | None:
    for candidate in ("python3.10", str(Path.home() / ".pyenv/versions/3.10.13/bin/python3.10")):
        found = shutil.which(candidate) or (candidate if Path(candidate).is_file() else None)
        if found and run_python("import sys; assert sys.version_info[:2] == (3, 10)", python=found).returncode == 0:
            return found
    return None


def test_device_side_code_compiles_and_imports_on_python_310(source_tree, tmp_path):
    python = _python310()
    if python is None:
        pytest.skip("no Python 3.10 interpreter on this machine to check JetPack 6 compatibility with")
    folders = [str(ROOT / name) for name in DEVICE_SIDE]
    compiled = subprocess.run(
        [python, "-m", "compileall", "-q", "-d", str(tmp_path), *folders],
        capture_output=True, text=True, env={"PYTHONPYCACHEPREFIX": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    # The standard-library-only parts import and locate the server under 3.10, without site-packages.
    code = (
        "from orinkit.server import locate_tritonserver, ServerOptions, TritonProcess\n"
        "import orinkit.core.files, orinkit.core.optional, orinkit.server.health\n"
        "print('ok')\n"
    )
    result = run_python(code, python=python, flags=("-S",), pythonpath=source_tree)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
