"""Starting and stopping real tritonservers: failures name their cause, nothing is left running."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import DATA

from orinkit.server import (
    PortInUseError,
    ServerExitedError,
    ServerOptions,
    ServerStartError,
    TritonProcess,
    build_command,
    live_group_members,
    locate_tritonserver,
)
from orinkit.server.health import is_ready
from orinkit.server.ports import free_ports, port_is_free


def _command(repository, **options):
    http, grpc, metrics = free_ports(3)
    return build_command(
        locate_tritonserver(),
        ServerOptions(repository=repository, http_port=http, grpc_port=grpc, metrics_port=metrics, **options),
    )


def _stub_pids(pgid):
    return [pid for pid in live_group_members(pgid) if pid != pgid]


def test_stop_ends_the_server_and_its_python_stubs(tmp_path):
    server = TritonProcess(_command(DATA / "repository"), log=tmp_path / "log")
    with server:
        pgid = server.pid
        assert _stub_pids(pgid), "the Python models' stubs run in the server's process group"
    assert server.returncode == 0
    assert live_group_members(pgid) == []
    assert "add_sub" in (tmp_path / "log").read_text()


def test_a_model_that_fails_to_load_names_its_error_and_leaves_nothing(tmp_path):
    server = TritonProcess(_command(DATA / "broken_repository"), log=tmp_path / "log")
    with pytest.raises(ServerStartError) as info:
        server.start()
    assert "exited with code 1 while starting: 1 model(s) failed to load: failed to load 'crashes_on_load'" in str(
        info.value)
    assert "weights file is corrupt" in info.value.log_tail
    assert info.value.exit_code == 6
    assert live_group_members(server.pid) == []


def test_an_ensemble_without_a_version_folder_is_named(tmp_path):
    # git does not keep empty folders: an ensemble's empty "1/" is easy to lose on the way to a device.
    repository = tmp_path / "models"
    shutil.copytree(DATA / "repository", repository)
    shutil.rmtree(repository / "add_sub_twice" / "1")
    with pytest.raises(ServerStartError) as info:
        TritonProcess(_command(repository), log=tmp_path / "log").start()
    assert "failed to load model 'add_sub_twice': at least one version must be available" in str(info.value)


def test_not_ready_in_time_gives_up_and_stops_everything(tmp_path):
    server = TritonProcess(_command(DATA / "slow_repository", exit_timeout_s=2), log=tmp_path / "log")
    started = time.monotonic()
    with pytest.raises(ServerStartError, match="not ready after 3 s"):
        server.start(ready_timeout_s=3)
    assert time.monotonic() - started < 30
    assert live_group_members(server.pid) == []


def _start_with_grpc_port_taken(command, log):
    server = TritonProcess(command, log=log)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", command.options.grpc_port))
        taken.listen()
        with pytest.raises(PortInUseError) as info:
            server.start()
    return server, info.value


def test_a_port_in_use_is_named_before_starting(tmp_path):
    command = _command(DATA / "repository")
    server, error = _start_with_grpc_port_taken(command, tmp_path / "log")
    assert error.port == command.options.grpc_port
    assert "--grpc-port" in str(error)
    assert f"in use by process {os.getpid()}: " in str(error), "the holder, read from /proc"
    assert error.exit_code == 5
    assert server.pid is None, "nothing was started"


def test_a_port_taken_after_the_check_is_read_from_the_server_log(tmp_path, monkeypatch):
    # Double for a race that cannot be timed: the port is free at the check and taken before the server binds.
    monkeypatch.setattr("orinkit.server.process.port_is_free", lambda address, port: True)
    command = _command(DATA / "repository")
    server, error = _start_with_grpc_port_taken(command, tmp_path / "log")
    assert error.port == command.options.grpc_port
    assert "already in use" in str(error)
    assert live_group_members(server.pid) == []


def test_a_server_that_dies_is_reported(tmp_path):
    server = TritonProcess(_command(DATA / "repository"), log=tmp_path / "log")
    with server:
        os.kill(server.pid, signal.SIGKILL)
        assert server.wait(timeout_s=10) == -signal.SIGKILL
        with pytest.raises(ServerExitedError, match="exited with code -9"):
            server.raise_if_exited()
    assert live_group_members(server.pid) == []


EDGE_SERVE = str(Path(sys.executable).parent / "edge-serve")


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie nobody reaped yet (it holds no port)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _wait_until(condition, timeout_s: float = 90.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_a_sigkilled_edge_serve_run_takes_its_server_with_it(tmp_path):
    repository = shutil.copytree(DATA / "repository", tmp_path / "models")  # a start records what loaded there
    ports = free_ports(3)
    run = subprocess.Popen([EDGE_SERVE, "run", str(repository), "--http-port", str(ports[0]), "--grpc-port",
                            str(ports[1]), "--metrics-port", str(ports[2]), "--log-file", str(tmp_path / "log")],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    server = None
    try:
        ready = run.stdout.readline()
        server = int(re.search(r"ready \(pid (\d+);", ready)[1])
        assert _stub_pids(server), "the Python stubs run beside it"
        run.kill()  # no handler runs: only the kernel can stop the server now
        run.wait(timeout=30)
        assert _wait_until(lambda: _gone(server)), "the server outlived the edge-serve that started it"
        assert _wait_until(lambda: not live_group_members(server)), "its stubs outlived it"
        assert all(port_is_free("127.0.0.1", port) for port in ports)
    finally:
        run.kill()
        if server is not None and live_group_members(server):
            os.killpg(server, signal.SIGKILL)


def test_a_server_started_from_a_thread_outlives_the_thread(tmp_path):
    # The parent-death signal follows the thread that forked: a thread that ends must not take the server along.
    started = []
    thread = threading.Thread(target=lambda: started.append(
        TritonProcess(_command(DATA / "repository"), log=tmp_path / "log").start()))
    thread.start()
    thread.join()
    server = started[0]
    try:
        time.sleep(1.0)  # the signal would be immediate; give it a moment to arrive anyway
        assert server.returncode is None and is_ready(server.command.http_url)
    finally:
        server.stop()
    assert live_group_members(server.pid) == []


def test_a_port_held_by_an_orphaned_server_names_it_and_how_to_stop_it(tmp_path):
    command = _command(DATA / "repository")
    # Started the way a killed parent leaves one: by a shell that exits at once, so init adopts the server.
    shell = subprocess.run(["sh", "-c", f"setsid {shlex.join(command.argv)} >{tmp_path / 'orphan.log'} 2>&1 & echo $!"],
                           env=command.environment(), capture_output=True, text=True, timeout=30)
    orphan = int(shell.stdout)
    try:
        assert _wait_until(lambda: is_ready(command.http_url) or _gone(orphan)) and not _gone(orphan), (
            tmp_path / "orphan.log").read_text()[-2000:]
        o = command.options
        result = subprocess.run([EDGE_SERVE, "run", str(DATA / "repository"), "--http-port", str(o.http_port),
                                 "--grpc-port", str(o.grpc_port), "--metrics-port", str(o.metrics_port)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 5, result.stderr
        line = result.stderr.strip()
        assert len(line.splitlines()) == 1 and "Traceback" not in line
        assert f"port {o.http_port} (http-port) on 127.0.0.1 is already in use by tritonserver {orphan}" in line
        assert f"--model-repository={DATA / 'repository'}" in line, "its command line, read from /proc"
        assert f"stop it with: kill {orphan}; or pass --http-port with a free port" in line
        if Path(f"/proc/{orphan}/stat").read_text().rsplit(")", 1)[1].split()[1] == "1":
            assert "left running: the process that started it is gone" in line
    finally:
        os.killpg(orphan, signal.SIGTERM)
        assert _wait_until(lambda: not live_group_members(orphan))


def test_children_start_cleanly_while_grpc_channels_are_busy(repository_server):
    # A preexec_fn made subprocess fork(), which runs gRPC's fork handlers: about 1 child in 6 died before its exec
    # (SIGABRT) in a process streaming video to a server. popen_tied asks for the death signal through setpriv.
    import numpy as np

    from orinkit.client import Client
    from orinkit.server.spawn import popen_tied

    stop = threading.Event()
    x = np.ones(4, np.float32)

    def hammer(client):
        while not stop.is_set():
            for future in [client.submit(x, x, in_flight=4) for _ in range(4)]:
                future.result()

    with Client(repository_server.command.grpc_url, "add_sub") as client:
        client(x, x)
        thread = threading.Thread(target=hammer, args=(client,), daemon=True)
        thread.start()
        try:
            codes = []
            for _ in range(100):
                child = popen_tied(["/bin/true"])
                codes.append(child.wait(timeout=30))
        finally:
            stop.set()
            thread.join(60)
    assert codes == [0] * 100, sorted(set(codes))
