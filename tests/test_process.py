"""Starting and stopping real tritonservers: failures name their cause, nothing is left running."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time

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
from orinkit.server.ports import free_ports


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
