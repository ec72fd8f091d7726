"""The tritonserver unit: checked by the real systemd-analyze, its ExecStart run for real, staged installs."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import DATA

from orinkit.cli.serve import main as edge_serve
from orinkit.server import ServerOptions, build_command, live_group_members, locate_tritonserver
from orinkit.server.ports import free_ports
from orinkit.systemd.installer import install, uninstall
from orinkit.systemd.render import exec_line, parse_exec_line
from orinkit.systemd.unit import FORBIDDEN, ServiceOptions, render_unit

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")


def _command(**options):
    http, grpc, metrics = free_ports(3)
    defaults = dict(repository=DATA / "repository", http_port=http, grpc_port=grpc, metrics_port=metrics,
                    model_control_mode="explicit", load_models=("add_sub", "add_sub_twice"),
                    pinned_memory_pool_bytes=64 << 20, cuda_memory_pool_bytes=64 << 20)
    return build_command(locate_tritonserver(), ServerOptions(**{**defaults, **options}))


def _write(unit, tmp_path, name="tritonserver.service"):
    path = tmp_path / name
    path.write_text(unit.render())
    return path


@needs_analyze
def test_default_unit_passes_systemd_analyze_verify(tmp_path):
    path = _write(render_unit(_command(), ServiceOptions()), tmp_path)
    result = subprocess.run([ANALYZE, "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "tritonserver.service" not in result.stderr, result.stderr


@needs_analyze
@pytest.mark.parametrize("options", [ServiceOptions(), ServiceOptions(pin_clocks=True, check_plans=False)])
def test_security_exposure_is_at_most_2(tmp_path, options):
    path = _write(render_unit(_command(), options), tmp_path)
    result = subprocess.run([ANALYZE, "security", "--offline=yes", str(path)], capture_output=True, text=True,
                            timeout=60)
    match = re.search(r"Overall exposure level for tritonserver.service: ([\d.]+)", result.stdout)
    assert match, result.stdout[-500:] + result.stderr
    assert float(match[1]) <= 2.0
    unhardened = _write(render_unit(_command(), ServiceOptions(hardening=False)), tmp_path, "bare.service")
    bare = subprocess.run([ANALYZE, "security", "--offline=yes", str(unhardened)], capture_output=True, text=True)
    assert float(re.search(r"Overall exposure level for bare.service: ([\d.]+)", bare.stdout)[1]) > 5


@pytest.mark.parametrize("options", [ServiceOptions(), ServiceOptions(pin_clocks=True), ServiceOptions(
    hardening=False), ServiceOptions(check_plans=False, name="lanes", user="vision")])
def test_no_gpu_breaking_setting_ever_appears(options):
    text = render_unit(_command(), options).render()
    for key in FORBIDDEN:
        assert not re.search(rf"^{key}=", text, re.M), key
    assert "KillMode=control-group" in text and "KillMode=process" not in text


def test_unit_follows_the_checklist():
    command = _command(exit_timeout_s=20)
    unit = render_unit(command, ServiceOptions(pin_clocks=True, nvpmodel_mode=2))
    service = dict(unit.sections["Service"])
    assert unit.values("Unit", "Wants") == ["network-online.target"]
    assert unit.values("Unit", "After") == ["network-online.target nvpmodel.service"]
    assert service["Type"] == "exec" and service["Restart"] == "on-failure"
    assert service["TimeoutStopSec"] == "35" and service["TimeoutStartSec"] == "600"
    assert service["SupplementaryGroups"] == "video" and service["LimitMEMLOCK"] == "infinity"
    assert service["LimitSTACK"] == "67108864" and service["DevicePolicy"] == "closed"
    assert "/dev/nvmap rw" in unit.values("Service", "DeviceAllow")
    pre = unit.values("Service", "ExecStartPre")
    assert pre[0] == "+/usr/sbin/nvpmodel -m 2" and pre[1] == "+/usr/bin/jetson_clocks"
    assert pre[2].startswith("+") and parse_exec_line(pre[2])[-5:] == [
        "prepare", "--repository", str(DATA / "repository"), "--owner", "triton"]
    assert parse_exec_line(pre[3])[-3:] == ["check-plans", "--repository", str(DATA / "repository")]
    assert service["UMask"] == "0077", "the Python backend's shared memory must not be readable by other users"
    assert parse_exec_line(unit.values("Service", "ExecStart")[0]) == list(command.argv)
    assert "--model-control-mode=explicit" in command.argv and "--load-model=add_sub" in command.argv
    assert "--pinned-memory-pool-byte-size=67108864" in command.argv


def test_exec_lines_escape_what_systemd_would_expand():
    argv = ["/opt/x/bin/tool", "--name=$HOME", "100%", "two words", 'quote"d']
    assert parse_exec_line(exec_line(argv)) == argv
    assert "$$HOME" in exec_line(argv) and "100%%" in exec_line(argv)


def _environment(unit):
    env = {}
    for value in unit.values("Service", "Environment"):
        name, _, rest = value.strip('"').partition("=")
        env[name] = rest
    return env


def test_exec_start_and_exec_start_post_run_as_is_here(tmp_path):
    repository = shutil.copytree(DATA / "repository", tmp_path / "models")
    command = _command(repository=repository)
    # Without the sandbox: its PrivateTmp refuses a repository under /tmp, where tmp_path is; the Exec lines are
    # the same with or without it.
    unit = render_unit(command, ServiceOptions(start_timeout_s=120, hardening=False))
    env = _environment(unit)  # only what the unit sets, as under systemd
    env["HOME"] = str(tmp_path)
    start = parse_exec_line(unit.values("Service", "ExecStart")[0])
    post = parse_exec_line(unit.values("Service", "ExecStartPost")[0])
    server = subprocess.Popen(start, env=env, stdout=open(tmp_path / "log", "w"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        ready = subprocess.run(post, env=env, capture_output=True, text=True, timeout=150)
        assert ready.returncode == 0, (ready.stderr, (tmp_path / "log").read_text()[-2000:])
        assert "is ready" in ready.stdout
        assert server.poll() is None
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    assert (repository / "add_sub" / ".orinkit-versions.json").is_file(), "ExecStartPost records what loaded"
    deadline_unit = render_unit(_command(repository=repository), ServiceOptions(start_timeout_s=2, hardening=False))
    post = parse_exec_line(deadline_unit.values("Service", "ExecStartPost")[0])
    not_ready = subprocess.run(post, env=env, capture_output=True, text=True, timeout=60)
    assert not_ready.returncode == 6 and "was not ready after 2 s" in not_ready.stderr
    assert live_group_members(server.pid) == []


def _tree(root):
    return {str(p.relative_to(root)): (p.is_symlink() and os.readlink(p)) or (p.is_file() and p.read_bytes())
            for p in sorted(root.rglob("*"))}


def test_staged_install_is_idempotent_and_uninstall_leaves_models(tmp_path):
    root = tmp_path / "image"
    repository = shutil.copytree(DATA / "repository", root / "opt/models")
    runner = CliRunner()
    args = ["install", "--repository", "/opt/models", "--root", str(root)]
    before = _tree(root)
    dry = runner.invoke(edge_serve, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would install tritonserver.service" in dry.output and _tree(root) == before
    first = runner.invoke(edge_serve, args)
    assert first.exit_code == 0, first.output
    unit = root / "etc/systemd/system/tritonserver.service"
    assert unit.is_file() and "--load-model=add_sub_twice" in unit.read_text()
    assert (root / "etc/systemd/system/multi-user.target.wants/tritonserver.service").is_symlink()
    users = (root / "etc/sysusers.d/orinkit-tritonserver.conf").read_text()
    assert "u triton -" in users and "m triton video" in users
    snapshot = _tree(root)
    second = runner.invoke(edge_serve, args)
    assert second.exit_code == 0 and "(nothing changed)" in second.output
    assert _tree(root) == snapshot
    removed = runner.invoke(edge_serve, ["uninstall", "--root", str(root)])
    assert removed.exit_code == 0, removed.output
    assert not unit.exists() and not (root / "etc/systemd/system/multi-user.target.wants/tritonserver.service").exists()
    assert _tree(repository) == _tree(DATA / "repository")


def test_library_install_reports_each_change(tmp_path):
    options = ServiceOptions(name="lanes", user="vision")
    text = render_unit(_command(), options).render()
    plan = install(text, options, root=tmp_path, run=lambda argv: subprocess.CompletedProcess(argv, 0, "", ""))
    assert [c.action for c in plan.changes] == ["create", "create"]
    again = install(text + "# edited\n", options, root=tmp_path, dry_run=True)
    assert [c.action for c in again.changes] == ["update", "unchanged"] and "+# edited" in again.describe()
    gone = uninstall(options, root=tmp_path, dry_run=True)
    assert [c.action for c in gone.changes] == ["remove", "remove"]


def test_check_plans_needs_tensorrt_here(tmp_path):
    from repo_fixtures import stand_in_plan

    (tmp_path / "models" / "lane" / "1").mkdir(parents=True)
    plan = stand_in_plan(tmp_path)
    shutil.copy(plan, tmp_path / "models" / "lane" / "1" / "model.plan")
    shutil.copy(str(plan) + ".manifest.json", tmp_path / "models" / "lane" / "1" / "model.plan.manifest.json")
    result = subprocess.run([sys.executable, "-m", "orinkit.cli.serve", "check-plans", "-r", str(tmp_path / "models")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 3 and "JetPack" in result.stderr
