"""Which Triton HTTP address the device page reads its models from when only the gRPC address (--url) is given: the
same server's, never whatever answers on port 8000. Real tritonservers on free ports only (8000/8001 may be taken)."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DATA

from orinkit.server import PortInUseError, ServerOptions, TritonProcess, build_command, locate_tritonserver
from orinkit.server.ports import free_ports, port_is_free
from orinkit.ui import UiError, UiServer
from orinkit.ui.models import http_url_for

CORPUS = DATA / "check_corpus"


def test_without_a_local_server_the_port_below_grpcs_is_used_and_said():
    # Nothing of this machine listens there: derived as Triton pairs its defaults (8000 beside 8001).
    for grpc_url, http_url in (("10.0.0.5:8001", "http://10.0.0.5:8000"), ("10.0.0.5:9011", "http://10.0.0.5:9010"),
                               ("board.example:8001", "http://board.example:8000"),
                               ("board.example", "http://board.example:8000"),
                               ("grpc://10.1.2.3:8101", "http://10.1.2.3:8100")):
        found = http_url_for(grpc_url)
        assert found.url == http_url, grpc_url
        assert "names no port" in found.how if grpc_url == "board.example" else "below gRPC's" in found.how
    port = free_ports(1)[0]
    found = http_url_for(f"localhost:{port}")
    assert found.url == f"http://localhost:{port - 1}" and f"below gRPC's {port}" in found.how
    assert UiServer(f"[::1]:{port}", port=0).http_url == f"http://[::1]:{port - 1}"


# A process that calls itself tritonserver and listens on a port, as a server started by hand would.
FAKE = "import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', int(sys.argv[1])))\ns.listen()\n" \
       "print('listening', flush=True)\ntime.sleep(120)\n"


def _fake_tritonserver(tmp_path: Path, port: int, *flags: str) -> subprocess.Popen:
    # argv[0] "tritonserver" (what port_holder matches), the flags as Triton's own command line carries them.
    process = subprocess.Popen(["bash", "-c", 'exec -a "$0" "$@"', str(tmp_path / "bin" / "tritonserver"),
                                sys.executable, "-c", FAKE, str(port), *flags], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "listening"
    return process


@pytest.mark.parametrize("flags, expected", [
    (("--http-port=18123",), "http://127.0.0.1:18123"),
    (("--http-port", "18124", "--grpc-port=X"), "http://127.0.0.1:18124"),
    ((), "http://127.0.0.1:8000"),  # Triton's own default when its command line names none
])
def test_a_local_tritonservers_http_port_is_read_from_its_command_line(tmp_path, flags, expected):
    port = free_ports(1)[0]
    process = _fake_tritonserver(tmp_path, port, *flags)
    try:
        found = http_url_for(f"127.0.0.1:{port}")
        assert found.url == expected and f"tritonserver on gRPC port {port} (pid {process.pid})" in found.how
    finally:
        process.kill()
        process.wait()


def test_a_local_tritonserver_without_http_is_refused_with_the_fix(tmp_path):
    port = free_ports(1)[0]
    process = _fake_tritonserver(tmp_path, port, "--allow-http=false", "--http-port=18125")
    try:
        with pytest.raises(UiError, match="runs without HTTP") as caught:
            UiServer(f"localhost:{port}", port=0)
        assert "--http-url" in caught.value.hint
    finally:
        process.kill()
        process.wait()


def _start(repository: Path, log: Path, http: int, grpc: int, metrics: int) -> TritonProcess:
    options = ServerOptions(repository=repository, http_port=http, grpc_port=grpc, metrics_port=metrics)
    return TritonProcess(build_command(locate_tritonserver(), options), log=log).start(ready_timeout_s=180)


@pytest.fixture
def two_servers(tmp_path):
    """``wanted`` on ports of no pattern; ``other`` on neighbouring ports with its HTTP port just below wanted's gRPC
    port, where deriving from the gRPC port alone would look."""
    for case in ("example_add_sub", "python_no_config"):
        shutil.copytree(CORPUS / case, tmp_path / case)
    started = []
    try:
        for _ in range(5):
            grpc, http, metrics, other_grpc, other_metrics = free_ports(5)
            if not (port_is_free("127.0.0.1", grpc - 1) and port_is_free("127.0.0.1", grpc - 2)):
                continue
            try:
                started.append(_start(tmp_path / "example_add_sub", tmp_path / "wanted.log", http, grpc, metrics))
                started.append(_start(tmp_path / "python_no_config", tmp_path / "other.log", grpc - 1, grpc - 2,
                                      other_metrics))
            except PortInUseError:  # another process took a port in between: try other ones
                for process in started:
                    process.stop()
                started.clear()
                continue
            yield started[0], started[1]
            return
        pytest.fail("no free ports for the two servers after 5 tries")
    finally:
        for process in started:
            process.stop()


def _listed(page: UiServer) -> list[str]:
    connection = http.client.HTTPConnection("127.0.0.1", page.port, timeout=60)
    try:
        connection.request("GET", "/api/models")
        response = connection.getresponse()
        body = json.loads(response.read())
    finally:
        connection.close()
    assert response.status == 200, body
    return [m["name"] for m in body["models"]]


def test_the_page_lists_the_models_of_the_server_its_url_names(two_servers):
    wanted, other = two_servers
    grpc_port = int(wanted.command.grpc_url.rpartition(":")[2])
    assert other.command.http_url.endswith(f":{grpc_port - 1}")
    with UiServer(wanted.command.grpc_url, port=0, board_interval_s=0.5) as page:
        assert page.http_url == wanted.command.http_url
        assert f"--http-port of the tritonserver on gRPC port {grpc_port}" in page.http_how
        assert _listed(page) == ["add_sub"]
    with UiServer(other.command.grpc_url, port=0, board_interval_s=0.5) as page:
        assert page.http_url == other.command.http_url and _listed(page) == ["bare_doubler"]


def test_edge_serve_ui_says_where_it_reads_the_models(two_servers):
    wanted, _ = two_servers
    port = free_ports(1)[0]
    process = subprocess.Popen([sys.executable, "-m", "orinkit.cli.serve", "ui", "--url", wanted.command.grpc_url,
                                "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = process.stdout.readline()
        assert f"(HTTP {wanted.command.http_url}: the --http-port of the tritonserver on gRPC port" in first, first
        deadline = time.monotonic() + 30
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                connection.request("GET", "/api/models")
                body = json.loads(connection.getresponse().read())
                connection.close()
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert body["http"] == wanted.command.http_url and [m["name"] for m in body["models"]] == ["add_sub"]
    finally:
        process.terminate()
        process.communicate(timeout=30)
