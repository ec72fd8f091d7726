"""Finding tritonserver and assembling its backend directory, on this machine's real installation."""

from __future__ import annotations

import os
import shutil
import stat

import pytest
from conftest import run_python

from orinkit.server import Layout, PythonStubNotFoundError, TritonNotFoundError, locate_tritonserver
from orinkit.server.backends import available_python_stubs, backend_directory, running_python_version
from orinkit.server.locate import HOME_ENV, bundled_home


@pytest.fixture(scope="module")
def bundled():
    home = bundled_home()
    assert home is not None, "the nvidia-pytriton wheel must be installed (orinkit[server])"
    return home


def test_finds_the_server_bundled_in_nvidia_pytriton(bundled, monkeypatch):
    monkeypatch.delenv(HOME_ENV, raising=False)
    install = locate_tritonserver(default_homes=())
    assert install.layout is Layout.BUNDLED
    assert install.home == bundled.resolve()
    assert install.binary.is_file() and os.access(install.binary, os.X_OK)
    assert "nvidia-pytriton" in install.source
    assert any(d.name == "nvidia_pytriton.libs" for d in install.library_dirs)


def test_environment_variable_names_the_home(bundled):
    install = locate_tritonserver(environ={HOME_ENV: str(bundled)}, default_homes=())
    assert install.home == bundled.resolve()
    assert HOME_ENV in install.source


def test_explicit_home_wins_over_the_environment(bundled, tmp_path):
    install = locate_tritonserver(bundled, environ={HOME_ENV: str(tmp_path)})
    assert install.source == "given explicitly"


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_an_explicit_home_without_a_server_is_an_error_not_skipped(tmp_path, how):
    (tmp_path / "lib").mkdir()
    with pytest.raises(TritonNotFoundError) as info:
        if how == "argument":
            locate_tritonserver(tmp_path)
        else:
            locate_tritonserver(environ={HOME_ENV: str(tmp_path)})
    assert "bin/tritonserver" in str(info.value)
    assert info.value.exit_code == 3


def test_a_missing_home_is_named(tmp_path):
    with pytest.raises(TritonNotFoundError, match="does not exist"):
        locate_tritonserver(tmp_path / "nowhere")


def test_a_binary_without_execute_permission_is_named(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tritonserver").write_text("")
    (tmp_path / "bin" / "tritonserver").chmod(stat.S_IRUSR)
    if os.access(tmp_path / "bin" / "tritonserver", os.X_OK):
        pytest.skip("running as a user that may execute anything")
    with pytest.raises(TritonNotFoundError, match="not executable"):
        locate_tritonserver(tmp_path)


def test_nothing_installed_names_every_place_and_the_fix(source_tree):
    # Started without site-packages, so the nvidia-pytriton wheel is really absent for this interpreter.
    code = (
        "from orinkit.server import locate_tritonserver, TritonNotFoundError\n"
        "try:\n    locate_tritonserver(environ={}, default_homes=())\n"
        "except TritonNotFoundError as e:\n    print(e.exit_code, e)\n"
    )
    result = run_python(code, flags=("-S",), pythonpath=source_tree)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("3 no tritonserver found")
    assert HOME_ENV in result.stdout and "pip install 'orinkit[server]'" in result.stdout


def test_default_homes_are_searched_before_the_wheel(bundled, tmp_path):
    release = _release_tree(bundled, tmp_path / "tritonserver")
    install = locate_tritonserver(environ={}, default_homes=(tmp_path / "absent", release))
    assert install.layout is Layout.RELEASE
    assert install.home == release


def _release_tree(bundled, home):
    """A Jetson-tarball-shaped folder (bin/, lib/, backends/python/) around this machine's real server binary."""
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    (home / "bin" / "tritonserver").symlink_to(bundled / "bin" / "tritonserver")
    python = home / "backends" / "python"
    python.mkdir(parents=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        shutil.copy2(bundled / "backends" / "python" / name, python / name)
    shutil.copy2(bundled / "python_backend_stubs" / running_python_version() / "triton_python_backend_stub", python)
    return home


def test_release_layout_uses_its_own_backends_and_lib(bundled, tmp_path):
    release = _release_tree(bundled, tmp_path / "tritonserver")
    install = locate_tritonserver(release)
    assert install.layout is Layout.RELEASE
    assert backend_directory(install) == release / "backends"
    assert install.library_dirs == (release / "lib",)


def test_release_layout_without_backends_is_named(bundled, tmp_path):
    release = _release_tree(bundled, tmp_path / "tritonserver")
    shutil.rmtree(release / "backends")
    with pytest.raises(TritonNotFoundError, match="no backends/ folder"):
        backend_directory(locate_tritonserver(release))


def test_bundled_backend_directory_holds_the_stub_for_this_python(tmp_path):
    install = locate_tritonserver(default_homes=())
    folder = backend_directory(install, cache=tmp_path)
    python = folder / "python"
    assert sorted(p.name for p in python.iterdir()) == [
        "libtriton_python.so", "triton_python_backend_stub", "triton_python_backend_utils.py",
    ]
    stub = python / "triton_python_backend_stub"
    assert os.access(stub, os.X_OK)
    expected = install.python_stubs / running_python_version() / "triton_python_backend_stub"
    assert stub.read_bytes() == expected.read_bytes()
    # Reused as it is the next time; rebuilt whole when a file no longer matches.
    mtime = stub.stat().st_mtime_ns
    assert backend_directory(install, cache=tmp_path) == folder
    assert stub.stat().st_mtime_ns == mtime
    stub.write_bytes(b"truncated")
    assert backend_directory(install, cache=tmp_path) == folder
    assert stub.read_bytes() == expected.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]


def test_a_python_without_a_stub_lists_the_versions_there_are(tmp_path):
    install = locate_tritonserver(default_homes=())
    assert running_python_version() in available_python_stubs(install)
    with pytest.raises(PythonStubNotFoundError) as info:
        backend_directory(install, python_version="2.7", cache=tmp_path)
    assert "3.10" in str(info.value) and "3.11" in str(info.value)
    assert list(tmp_path.iterdir()) == []
