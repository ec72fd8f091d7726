"""The device page's unit: checked by the real systemd-analyze (verify, security), and refused where it would be
open to the network without a token."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from orinkit.systemd import UnitOptionError
from orinkit.systemd.render import parse_exec_line
from orinkit.systemd.ui_unit import UiOptions, render_ui_unit, ui_service
from orinkit.systemd.unit import FORBIDDEN, ServiceOptions

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
OPEN = UiOptions(host="0.0.0.0", token_file=Path("/etc/orinkit/ui.token"), repository=Path("/srv/models"),
                 allow_control=True)


def _write(ui: UiOptions, tmp_path: Path, service: ServiceOptions | None = None) -> Path:
    path = tmp_path / "tritonserver-ui.service"
    path.write_text(render_ui_unit(ui, ui_service(service or ServiceOptions())).render())
    return path


@needs_analyze
@pytest.mark.parametrize("ui", [UiOptions(), OPEN], ids=["loopback", "network-with-token"])
def test_the_page_unit_verifies_and_exposes_at_most_2(tmp_path, ui):
    path = _write(ui, tmp_path)
    verify = subprocess.run([ANALYZE, "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0 and "tritonserver-ui.service" not in verify.stderr, verify.stderr
    security = subprocess.run([ANALYZE, "security", "--offline=yes", str(path)], capture_output=True, text=True,
                              timeout=60)
    match = re.search(r"Overall exposure level for tritonserver-ui.service: ([\d.]+)", security.stdout)
    assert match and float(match[1]) <= 2.0, security.stdout[-800:]


def test_the_token_is_a_credential_never_an_argument():
    text = render_ui_unit(OPEN, ui_service(ServiceOptions())).render()
    start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    argv = parse_exec_line(start.partition("=")[2])
    assert argv[argv.index("--token-file") + 1] == "%d/token", "systemd's credentials folder, not the file itself"
    assert "/etc/orinkit/ui.token" not in start
    assert "LoadCredential=token:/etc/orinkit/ui.token" in text
    assert "ReadWritePaths=/srv/models" in text, "control writes the repository, nothing else"
    for key in ("MemoryDenyWriteExecute=yes", "PrivateDevices=yes", "DevicePolicy=closed"):
        assert key in text
    assert argv[1:8] == ["-m", "orinkit.cli.serve", "ui", "--url", "localhost:8001", "--http-url",
                         "http://localhost:8000"]
    loopback = render_ui_unit(UiOptions(), ui_service(ServiceOptions())).render()
    assert "ReadWritePaths" not in loopback and "LoadCredential" not in loopback


def test_the_page_keeps_none_of_what_only_the_gpu_server_may_not_have():
    # The server's unit may never set these (they break the GPU); the page has no GPU to break and sets the strict
    # ones, but never a DynamicUser: it reads the repository as the server's user.
    text = render_ui_unit(UiOptions(), ui_service(ServiceOptions(user="vision"))).render()
    assert "User=vision" in text and "DynamicUser" not in text
    # Same user as the server: RemoveIPC would take the server's shared-memory regions when the page stops.
    assert "RemoveIPC" not in text
    assert {"PrivateDevices", "MemoryDenyWriteExecute"} <= set(FORBIDDEN)


@pytest.mark.parametrize("ui, text", [
    (dict(host="0.0.0.0"), "open to the network without a token"),
    (dict(host="192.168.1.20"), "without a token"),
    (dict(allow_control=True), "control needs the model repository"),
    (dict(port=0), "is not a TCP port"),
])
def test_options_that_cannot_be_served_safely_are_refused(ui, text):
    with pytest.raises(UnitOptionError, match=text):
        UiOptions(**ui)


def test_loopback_spellings_need_no_token():
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert UiOptions(host=host).token_file is None


def test_install_ui_stages_both_units_and_a_private_token(tmp_path):
    from click.testing import CliRunner
    from conftest import DATA

    from orinkit.cli.serve import main as edge_serve

    root = tmp_path / "image"
    shutil.copytree(DATA / "repository", root / "opt/models")
    runner = CliRunner()
    args = ["install", "--repository", "/opt/models", "--root", str(root), "--ui", "--ui-host", "0.0.0.0",
            "--ui-token-file", "/etc/orinkit/ui.token", "--ui-allow-control", "--http-port", "9100", "--grpc-port",
            "9101"]
    result = runner.invoke(edge_serve, args)
    assert result.exit_code == 0, result.output
    page = (root / "etc/systemd/system/tritonserver-ui.service").read_text()
    assert "LoadCredential=token:/etc/orinkit/ui.token" in page and "--host 0.0.0.0" in page
    assert "--url localhost:9101 --http-url http://localhost:9100" in page, "the page follows the server's ports"
    assert "ReadWritePaths=/opt/models" in page and "After=network-online.target tritonserver.service" in page
    assert (root / "etc/systemd/system/multi-user.target.wants/tritonserver-ui.service").is_symlink()
    token = root / "etc/orinkit/ui.token"
    assert token.stat().st_mode & 0o777 == 0o600 and len(token.read_text().strip()) >= 32
    before = token.read_text()
    again = runner.invoke(edge_serve, args)
    assert again.exit_code == 0 and token.read_text() == before, "an existing token is kept"
    assert again.output.count("(nothing changed)") == 2
    removed = runner.invoke(edge_serve, ["uninstall", "--root", str(root)])
    assert removed.exit_code == 0, removed.output
    assert not (root / "etc/systemd/system/tritonserver-ui.service").exists()


def test_install_refuses_an_open_page_without_a_token_and_stray_page_options(tmp_path):
    from click.testing import CliRunner
    from conftest import DATA

    from orinkit.cli.serve import main as edge_serve

    root = tmp_path / "image"
    shutil.copytree(DATA / "repository", root / "opt/models")
    before = sorted(root.rglob("*"))
    runner = CliRunner()
    base = ["install", "--repository", "/opt/models", "--root", str(root)]
    open_page = runner.invoke(edge_serve, [*base, "--ui", "--ui-host", "0.0.0.0"])
    assert open_page.exit_code == 4 and "without a token" in open_page.output
    assert sorted(root.rglob("*")) == before, "nothing is installed when the page's options are refused"
    stray = runner.invoke(edge_serve, [*base, "--ui-port", "9000"])
    assert stray.exit_code == 2 and "only apply with --ui" in stray.output
