"""orinkit.core: the error root, optional imports that name their extra, atomic writes."""

from __future__ import annotations

import sys

import pytest

from orinkit.core.errors import BrokenDependencyError, MissingExtraError, OrinkitError
from orinkit.core.files import atomic_write_bytes, atomic_write_text, building_directory
from orinkit.core.optional import require


def test_error_carries_message_hint_and_exit_code():
    err = OrinkitError("the thing is wrong", hint="do this instead")
    assert str(err) == "the thing is wrong; do this instead"
    assert err.exit_code == 1
    assert str(OrinkitError("alone")) == "alone"


@pytest.mark.parametrize(
    "module, extra_text",
    [("tensorrt", "orinkit[tensorrt]"), ("pycuda", "orinkit[device]"), ("pycuda.driver", "orinkit[device]")],
)
def test_missing_device_packages_name_their_extra_and_jetpack(module, extra_text):
    # tensorrt and pycuda are absent on this machine for real: the error is what a user sees here.
    with pytest.raises(MissingExtraError) as info:
        require(module)
    assert extra_text in str(info.value)
    assert "JetPack" in str(info.value)
    assert info.value.exit_code == 3
    assert isinstance(info.value, ImportError)
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_require_returns_an_installed_module():
    assert require("numpy").__name__ == "numpy"


def test_a_package_that_fails_inside_its_import_is_reported_as_broken(tmp_path, monkeypatch):
    package = tmp_path / "brokenpkg"
    package.mkdir()
    (package / "__init__.py").write_text("import libthatdoesnotexist\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BrokenDependencyError) as info:
        require("brokenpkg")
    assert "libthatdoesnotexist" in str(info.value)
    sys.modules.pop("brokenpkg", None)


def test_atomic_write_replaces_whole_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "sub" / "config.pbtxt"
    atomic_write_text(target, "first")
    atomic_write_bytes(target, b"second")
    assert target.read_text() == "second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["config.pbtxt"]


def test_atomic_write_that_fails_keeps_the_old_content(tmp_path):
    target = tmp_path / "config.pbtxt"
    target.write_text("old")
    with pytest.raises(TypeError):
        atomic_write_bytes(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["config.pbtxt"]


def test_building_directory_appears_only_when_complete(tmp_path):
    target = tmp_path / "model"
    with pytest.raises(RuntimeError):
        with building_directory(target) as staging:
            (staging / "part").write_text("half")
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    with building_directory(target) as staging:
        (staging / "whole").write_text("done")
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert (target / "whole").read_text() == "done"


def test_building_directory_keeps_what_another_builder_finished_first(tmp_path):
    target = tmp_path / "model"
    with building_directory(target) as staging:
        (staging / "mine").write_text("late")
        target.mkdir()
        (target / "theirs").write_text("first")
    assert [p.name for p in target.iterdir()] == ["theirs"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
