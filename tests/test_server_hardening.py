"""A server that stays bounded and private: shared memory of killed servers removed, its own regions unreadable by
other users, TLS through edge-serve run with real certificates, image bombs refused before decoding, and a unit
whose user can read its backends."""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from client_fixtures import build_client_repository
from conftest import DATA
from PIL import Image

from orinkit.client import Client, InvalidInputError, ServerUnavailableError
from orinkit.repo.steps import ImagePreprocess, add_step
from orinkit.server import live_group_members
from orinkit.server.ports import free_ports
from orinkit.server.regions import PREFIX, remove_stale_regions, stale_regions
from orinkit.server.testing import start_on_free_ports

EDGE_SERVE = str(Path(sys.executable).parent / "edge-serve")
X = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    return build_client_repository(tmp_path_factory.mktemp("hardening") / "models")


def _regions_of(pids) -> set[str]:
    names = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        names |= set(re.findall(rf"/dev/shm/({PREFIX}\S+)", maps))
    return names


def test_a_killed_servers_regions_are_removed_and_a_live_ones_kept(repository, tmp_path):
    live = start_on_free_ports(repository, tmp_path / "live.log")
    killed = start_on_free_ports(repository, tmp_path / "killed.log")
    try:
        live_regions = _regions_of(live_group_members(live.pid))
        dead_regions = _regions_of(live_group_members(killed.pid))
        assert live_regions and dead_regions
        os.killpg(killed.pid, signal.SIGKILL)  # a power cut for the server: nothing cleans up
        killed.stop()
        left = {p.name for p in Path("/dev/shm").glob(f"{PREFIX}*")}
        assert dead_regions <= left, "a killed server leaves its regions behind"
        for name in dead_regions:  # as if killed a while ago (fresh regions may belong to a starting server)
            os.utime(f"/dev/shm/{name}", (time.time() - 60, time.time() - 60))
        assert {p.name for p in stale_regions()} >= dead_regions
        removed = remove_stale_regions()
        assert {p.name for p in removed.paths} >= dead_regions and removed.bytes > 0
        remaining = {p.name for p in Path("/dev/shm").glob(f"{PREFIX}*")}
        assert live_regions <= remaining and not (dead_regions & remaining)
        with Client(live.command.grpc_url, "plus_one") as client:
            np.testing.assert_array_equal(client(X), X + 1)
    finally:
        live.stop()
        killed.stop()


def test_the_servers_regions_are_private_to_its_user(repository, tmp_path):
    server = start_on_free_ports(repository, tmp_path / "log")
    try:
        regions = _regions_of(live_group_members(server.pid))
        modes = {name: stat.S_IMODE(os.stat(f"/dev/shm/{name}").st_mode) for name in regions}
        assert modes and all(mode & 0o077 == 0 for mode in modes.values()), {k: oct(v) for k, v in modes.items()}
    finally:
        server.stop()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    import trustme

    folder = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("edge-client")
    paths = {name: folder / f"{name}.pem" for name in ("ca", "cert", "key", "client_cert", "client_key")}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    server.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    server.private_key_pem.write_to_path(str(paths["key"]))
    client.cert_chain_pems[0].write_to_path(str(paths["client_cert"]))
    client.private_key_pem.write_to_path(str(paths["client_key"]))
    os.chmod(paths["key"], 0o600)
    return paths


def _edge_serve(repository, tmp_path, *args):
    http, grpc, metrics = (str(p) for p in free_ports(3))
    process = subprocess.Popen([EDGE_SERVE, "run", "--repository", str(repository), "--http-port", http,
                                "--grpc-port", grpc, "--metrics-port", metrics, "--log-file", str(tmp_path / "log"),
                                *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    first = process.stdout.readline()
    assert first.startswith("tritonserver"), first + process.stderr.read()
    grpc_line = process.stdout.readline()
    return process, f"127.0.0.1:{grpc}", grpc_line


def _stop(process):
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)


def test_tls_through_edge_serve_run(repository, tmp_path, certificates):
    c = certificates
    process, url, line = _edge_serve(repository, tmp_path, "--grpc-tls-cert", str(c["cert"]), "--grpc-tls-key",
                                     str(c["key"]))
    try:
        assert "(TLS)" in line
        with Client(url, "plus_one", ssl=True, root_certificates=str(c["ca"])) as client:
            np.testing.assert_array_equal(client(X), X + 1)
        with Client(url, "plus_one", timeout_s=2) as plain:
            with pytest.raises(ServerUnavailableError):
                plain(X)
    finally:
        _stop(process)


def test_tls_that_verifies_client_certificates(repository, tmp_path, certificates):
    c = certificates
    process, url, _ = _edge_serve(repository, tmp_path, "--grpc-tls-cert", str(c["cert"]), "--grpc-tls-key",
                                  str(c["key"]), "--grpc-tls-root-cert", str(c["ca"]), "--grpc-tls-verify-client")
    try:
        with Client(url, "plus_one", ssl=True, root_certificates=str(c["ca"]), private_key=str(c["client_key"]),
                    certificate_chain=str(c["client_cert"])) as client:
            np.testing.assert_array_equal(client(X), X + 1)
        with Client(url, "plus_one", ssl=True, root_certificates=str(c["ca"]), timeout_s=2) as anonymous:
            with pytest.raises(ServerUnavailableError):
                anonymous(X)
    finally:
        _stop(process)


@pytest.mark.parametrize("args, message", [
    (["--grpc-tls-cert", "{cert}"], "needs both the server's certificate and its private key"),
    (["--grpc-tls-cert", "{cert}", "--grpc-tls-key", "{key}", "--grpc-tls-verify-client"], "needs the CA"),
    (["--grpc-tls-cert", "{missing}", "--grpc-tls-key", "{key}"], "is not a file"),
])
def test_tls_options_that_cannot_work_are_one_line_and_exit_4(tmp_path, certificates, args, message):
    values = {"cert": certificates["cert"], "key": certificates["key"], "missing": tmp_path / "nope.pem"}
    result = subprocess.run([EDGE_SERVE, "run", "--repository", str(DATA / "repository"),
                             *(a.format(**values) for a in args)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 4 and message in result.stderr and "Traceback" not in result.stderr


def _rss_of_group(pid) -> int:
    total = 0
    for member in live_group_members(pid):
        try:
            fields = Path(f"/proc/{member}/statm").read_text().split()
        except OSError:
            continue
        total += int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    return total


def test_an_image_bomb_is_refused_before_decoding_and_memory_stays_put(tmp_path):
    repo = tmp_path / "models"
    add_step(repo, ImagePreprocess(width=64, height=64), name="pre", max_batch_size=4)
    server = start_on_free_ports(repo, tmp_path / "log")
    try:
        with Client(server.command.grpc_url, "pre") as client:
            small = io.BytesIO()
            Image.new("RGB", (640, 360), (90, 90, 90)).save(small, "JPEG")
            client(np.array([small.getvalue()], dtype=object))
            baseline = _rss_of_group(server.pid)
            bomb = io.BytesIO()
            Image.new("L", (12000, 12000)).save(bomb, "PNG")  # 140 kB that decode to 432 MB
            started = time.monotonic()
            with pytest.raises(InvalidInputError, match="megapixels"):
                client(np.array([bomb.getvalue()], dtype=object))
            assert time.monotonic() - started < 1.0
            with pytest.raises(InvalidInputError, match="not an image Pillow can decode"):
                client(np.array([b"\x89PNG\r\n\x1a\n cut short"], dtype=object))
            assert _rss_of_group(server.pid) < baseline * 1.10
    finally:
        server.stop()


def test_a_unit_for_the_bundled_server_keeps_its_backends_where_its_user_reads_them(tmp_path):
    root = tmp_path / "image"
    shutil.copytree(DATA / "repository", root / "opt/models")
    result = subprocess.run([EDGE_SERVE, "install", "--repository", "/opt/models", "--root", str(root)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    unit = (root / "etc/systemd/system/tritonserver.service").read_text()
    backends = re.search(r"--backend-directory=(\S+)", unit)[1]
    assert backends.startswith("/var/lib/tritonserver/backends-py"), backends
    assert (root / backends.lstrip("/") / "python" / "libtriton_python.so").is_file()
    assert "UMask=0077" in unit and "ExecStartPre=+" in unit and "prepare --repository" in unit


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_a_tls_unit_passes_systemd_analyze_and_stays_hardened(tmp_path, certificates):
    from orinkit.server import ServerOptions, build_command, locate_tritonserver
    from orinkit.systemd.unit import ServiceOptions, render_unit

    # The files as staged in an image at /etc/orinkit (under /tmp, where tmp_path is, PrivateTmp would hide them).
    root = tmp_path / "image"
    (root / "etc/orinkit").mkdir(parents=True)
    staged = {name: shutil.copy(certificates[name], root / "etc/orinkit" / f"{name}.pem")
              for name in ("cert", "key", "ca")}
    http, grpc, metrics = free_ports(3)
    command = build_command(locate_tritonserver(), ServerOptions(
        repository=DATA / "repository", http_port=http, grpc_port=grpc, metrics_port=metrics,
        model_control_mode="explicit", grpc_tls_cert=staged["cert"], grpc_tls_key=staged["key"],
        grpc_tls_root_cert=staged["ca"], grpc_tls_verify_client=True)).relocated(root)
    path = tmp_path / "tritonserver.service"
    path.write_text(render_unit(command, ServiceOptions()).render())
    text = path.read_text()
    assert "--grpc-use-ssl=true" in text and "--grpc-use-ssl-mutual=true" in text and "UMask=0077" in text
    assert "--grpc-server-cert=/etc/orinkit/cert.pem" in text and "--grpc-root-cert=/etc/orinkit/ca.pem" in text
    verify = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stderr
    security = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(path)], capture_output=True,
                              text=True, timeout=60)
    score = float(re.search(r"Overall exposure level for tritonserver.service: ([\d.]+)", security.stdout)[1])
    assert score <= 2.0
