"""Installing the unit as a newcomer does: the README's staged install with a relative --root and paths that exist
only in the image, refusals that leave nothing behind, the sandbox's PrivateTmp, and a machine without systemd."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA

from orinkit.cli.serve import main as edge_serve
from orinkit.server import ServerOptions, build_command, locate_tritonserver
from orinkit.systemd import ServiceOptions, UnitOptionError, render_unit
from orinkit.systemd.errors import NoSystemdError
from orinkit.systemd.installer import SYSTEMD_RUNTIME, control, undone_on_failure
from orinkit.systemd.render import parse_exec_line

ANALYZE = shutil.which("systemd-analyze")
EDGE_SERVE = str(Path(sys.executable).parent / "edge-serve")
UNIT = "etc/systemd/system/tritonserver.service"
off_systemd = pytest.mark.skipif(SYSTEMD_RUNTIME.is_dir(), reason="this machine was booted with systemd")


def _tree(root: Path) -> dict[str, bytes | str | bool]:
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): (p.is_symlink() and os.readlink(p)) or (p.is_file() and p.read_bytes())
            for p in sorted(root.rglob("*"))}


def _image(tmp_path: Path, models=("add_sub",), at="opt/models") -> Path:
    """An image tree holding the models at /opt/models, as a board image would; the build host has none there."""
    root = tmp_path / "image-rootfs"
    for model in models:
        shutil.copytree(DATA / "repository" / model, root / at / model)
    return root


def _paths_of(unit_text: str) -> list[str]:
    """Every path-valued argument of the unit's Exec lines."""
    paths = []
    for key in ("ExecStartPre", "ExecStart", "ExecStartPost"):
        for line in re.findall(rf"^{key}=(.*)$", unit_text, re.M):
            argv = parse_exec_line(line)
            paths.append(argv[0])
            paths += [a.split("=", 1)[1] for a in argv if a.startswith(("--model-repository=", "--backend-directory="))]
            paths += [argv[i + 1] for i, a in enumerate(argv) if a == "--repository"]
    return paths


def test_the_readme_example_stages_an_image_whose_models_exist_only_in_the_image(tmp_path, monkeypatch):
    root = _image(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["install", "--repository", "/opt/models", "--root", "./image-rootfs"]
    result = CliRunner().invoke(edge_serve, args)
    assert result.exit_code == 0, result.output
    text = (root / UNIT).read_text()
    argv = parse_exec_line(re.search(r"^ExecStart=(.*)$", text, re.M)[1])
    assert "--model-repository=/opt/models" in argv
    assert [a for a in argv if a.startswith("--load-model=")] == ["--load-model=add_sub"], "the image's models"
    paths = _paths_of(text)
    assert len(paths) >= 6 and all(p.startswith("/") for p in paths), paths
    backends = next(a.split("=", 1)[1] for a in argv if a.startswith("--backend-directory="))
    assert backends.startswith("/var/lib/tritonserver/")
    assert (root / backends.lstrip("/") / "python" / "libtriton_python.so").is_file()
    assert (root / "etc/systemd/system/multi-user.target.wants/tritonserver.service").is_symlink()
    if ANALYZE:
        verify = subprocess.run([ANALYZE, "verify", str(root / UNIT)], capture_output=True, text=True, timeout=60)
        assert verify.returncode == 0 and "tritonserver.service" not in verify.stderr, verify.stderr
    again = CliRunner().invoke(edge_serve, args)
    assert again.exit_code == 0 and "(nothing changed)" in again.output


def test_a_path_under_the_root_is_named_as_on_the_target(tmp_path):
    root = _image(tmp_path)
    (root / "etc/orinkit").mkdir(parents=True)
    for name in ("server.pem", "server.key"):
        (root / "etc/orinkit" / name).write_text("staged for the board\n")
    result = CliRunner().invoke(edge_serve, [
        "install", str(root / "opt/models"), "--root", str(root),
        "--grpc-tls-cert", "/etc/orinkit/server.pem", "--grpc-tls-key", str(root / "etc/orinkit/server.key")])
    assert result.exit_code == 0, result.output
    text = (root / UNIT).read_text()
    assert "--grpc-server-cert=/etc/orinkit/server.pem" in text and "--grpc-server-key=/etc/orinkit/server.key" in text
    assert "--model-repository=/opt/models " in text and str(root) not in text


def _not_a_directory(root: Path) -> None:
    # A real failure of systemctl --root enable, after the files were written: the link's folder is a file.
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/system/multi-user.target.wants").write_text("not a folder\n")


@pytest.mark.parametrize("args, prepare, code, message", [
    # Exists here (the checkout's repository) but not in the image.
    ([str(DATA / "repository")], None, 4, "does not exist"),
    (["/opt/models", "--load-model", "nope"], None, 4, "--load-model names nope"),
    (["models"], None, 4, "is relative and outside the image tree"),
    (["/tmp/models"], "tmp", 4, "PrivateTmp=yes"),
    (["/opt/models"], _not_a_directory, 6, "Not a directory"),
], ids=["missing-in-image", "unknown-model", "relative", "private-tmp", "systemctl-fails"])
def test_a_refused_install_leaves_the_image_as_it_was(tmp_path, args, prepare, code, message):
    root = _image(tmp_path, at="tmp/models" if prepare == "tmp" else "opt/models")
    if callable(prepare):
        prepare(root)
    before = _tree(root)
    result = subprocess.run([EDGE_SERVE, "install", "--repository", *args, "--root", str(root)], capture_output=True,
                            text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == code, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert _tree(root) == before, "nothing of the install is left: no unit, no backends under var/lib"


def test_nothing_is_made_for_an_image_tree_that_does_not_exist_when_refused(tmp_path):
    root = tmp_path / "new-image"
    result = CliRunner().invoke(edge_serve, ["install", "--repository", "/opt/models", "--root", str(root)])
    assert result.exit_code == 4 and not root.exists()


def test_the_sandbox_refuses_what_private_tmp_would_hide(tmp_path):
    root = _image(tmp_path, at="tmp/models")
    refused = CliRunner().invoke(edge_serve, ["install", "-r", "/tmp/models", "--root", str(root)])
    assert refused.exit_code == 4
    assert "move it out of /tmp (e.g. to /opt), or install with --no-hardening" in refused.output
    bare = CliRunner().invoke(edge_serve, ["install", "-r", "/tmp/models", "--root", str(root), "--no-hardening"])
    assert bare.exit_code == 0, bare.output
    assert "PrivateTmp" not in (root / UNIT).read_text()


def test_render_unit_refuses_tmp_and_relative_paths():
    options = ServerOptions(repository="/var/tmp/models", model_control_mode="explicit")
    command = build_command(locate_tritonserver(), options, assemble_backends=False)
    with pytest.raises(UnitOptionError, match="model repository /var/tmp/models is under /var/tmp") as info:
        render_unit(command, ServiceOptions())
    assert info.value.exit_code == 4 and "emptied at boot" not in str(info.value)
    assert "PrivateTmp" not in render_unit(command, ServiceOptions(hardening=False)).render()
    plain = build_command(locate_tritonserver(), ServerOptions(repository="/srv/models"), assemble_backends=False)
    with pytest.raises(UnitOptionError, match="Python that runs orinkit /tmp/venv/bin/python is under /tmp"):
        render_unit(plain, ServiceOptions(python="/tmp/venv/bin/python"))
    with pytest.raises(UnitOptionError, match="'venv/bin/python' is relative"):
        render_unit(plain, ServiceOptions(python="venv/bin/python", hardening=False))


def test_a_failed_step_puts_every_file_back_even_on_an_interrupt(tmp_path):
    kept = tmp_path / "kept.conf"
    kept.write_text("old\n")
    os.chmod(kept, 0o640)
    made = tmp_path / "new/deeper/unit.service"
    with pytest.raises(KeyboardInterrupt):
        with undone_on_failure([kept, made]):
            kept.write_text("new\n")
            made.parent.mkdir(parents=True)
            made.write_text("[Unit]\n")
            raise KeyboardInterrupt
    assert kept.read_text() == "old\n" and kept.stat().st_mode & 0o777 == 0o640
    assert not (tmp_path / "new").exists()


@off_systemd
@pytest.mark.parametrize("action", ["status", "logs", "start", "stop", "restart"])
def test_service_commands_off_systemd_say_so_in_one_line_and_exit_3(action):
    result = subprocess.run([EDGE_SERVE, action], capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in result.stderr
    assert "needs a machine booted with systemd" in lines[0] and "edge-serve run" in lines[0]
    assert result.stdout == "", "nothing that looks like an answer"


@off_systemd
def test_the_library_refuses_control_off_systemd():
    with pytest.raises(NoSystemdError) as info:
        control("status", ServiceOptions())
    assert info.value.exit_code == 3


@off_systemd
def test_a_live_install_off_systemd_is_refused_before_anything_is_written():
    name = f"orinkit-test-{os.getpid()}"
    result = subprocess.run([EDGE_SERVE, "install", str(DATA / "repository"), "--name", name], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 3 and "--root DIR" in result.stderr, result.stderr
    written = [Path("/etc/systemd/system") / f"{name}.service", Path("/etc/sysusers.d") / f"orinkit-{name}.conf",
               Path("/var/lib") / name]
    assert not any(p.exists() for p in written)
    removed = subprocess.run([EDGE_SERVE, "uninstall", "--name", name], capture_output=True, text=True, timeout=60)
    assert removed.returncode == 3 and "booted with systemd" in removed.stderr
