"""edge-serve: in-process with click's CliRunner for errors, as a real process for signals."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from click.testing import CliRunner
from conftest import DATA

from orinkit.cli.serve import main
from orinkit.core.processes import live_group_members
from orinkit.server.ports import free_ports

EDGE_SERVE = str(Path(sys.executable).parent / "edge-serve")


def _ports():
    http, grpc, metrics = free_ports(3)
    return ["--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]


def _invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_command_prints_the_exact_command_line():
    result = _invoke("command", "--repository", str(DATA / "repository"), "--grpc-port", "9001")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("# tritonserver: ") and "nvidia-pytriton" in lines[0]
    assert lines[1].startswith("LD_LIBRARY_PATH=") and lines[2].startswith("PATH=")
    assert "--grpc-port=9001" in lines[3] and "--backend-directory=" in lines[3]


def test_missing_repository_is_one_line_and_exit_4(tmp_path):
    result = _invoke("run", "--repository", str(tmp_path / "models"), *_ports())
    assert result.exit_code == 4
    assert result.output.count("\n") == 1
    assert result.output.startswith("Error: model repository") and "--repository" in result.output


def test_missing_server_binary_is_one_line_and_exit_3(tmp_path):
    result = _invoke("run", "--repository", str(DATA / "repository"), "--triton-home", str(tmp_path), *_ports())
    assert result.exit_code == 3
    assert result.output.count("\n") == 1
    assert "holds no bin/tritonserver" in result.output


def test_port_in_use_is_one_line_and_exit_5():
    ports = _ports()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", int(ports[1])))
        taken.listen()
        result = _invoke("run", "--repository", str(DATA / "repository"), *ports)
    assert result.exit_code == 5
    assert result.output.count("\n") == 1
    assert f"port {ports[1]} (http-port) on 127.0.0.1 is already in use" in result.output


def test_invalid_option_combination_is_exit_4():
    result = _invoke("run", "--repository", str(DATA / "repository"), "--load-model", "add_sub", *_ports())
    assert result.exit_code == 4
    assert "--model-control-mode explicit" in result.output


def test_a_model_that_fails_to_load_is_exit_6(tmp_path):
    log = tmp_path / "server.log"
    result = _invoke("run", "--repository", str(DATA / "broken_repository"), "--log-file", str(log), *_ports())
    assert result.exit_code == 6
    assert "tritonserver exited with code 1 while starting" in result.output
    assert "weights file is corrupt" in log.read_text()


def _start_edge_serve(tmp_path, *extra):
    ports = _ports()
    log = tmp_path / "server.log"
    proc = subprocess.Popen(
        [EDGE_SERVE, "run", "--repository", str(shutil.copytree(DATA / "repository", tmp_path / "models")),
         "--log-file", str(log), *ports, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    first = proc.stdout.readline()
    match = re.match(r"tritonserver (\S+) ready \(pid (\d+);", first)
    assert match, first + proc.stderr.read()
    listening = [proc.stdout.readline() for _ in range(5)]
    return proc, int(match.group(2)), ports, listening, log


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_run_serves_then_stops_everything_on_a_signal(tmp_path, sig):
    proc, server_pid, ports, listening, log = _start_edge_serve(tmp_path)
    try:
        grpc_url = f"127.0.0.1:{ports[3]}"
        assert any(grpc_url in line for line in listening)
        assert [p for p in live_group_members(server_pid) if p != server_pid], "stubs are running"
        with grpcclient.InferenceServerClient(grpc_url) as client:
            a = np.ones((1, 4), np.float32)
            inputs = [grpcclient.InferInput(n, a.shape, "FP32") for n in ("A", "B")]
            for tensor in inputs:
                tensor.set_data_from_numpy(a)
            np.testing.assert_array_equal(client.infer("add_sub_twice", inputs).as_numpy("TWO_A"), 2 * a)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert f"{sig.name}: stopping tritonserver" in err
    assert "tritonserver stopped" in err
    assert live_group_members(server_pid) == []
    assert "Started GRPCInferenceService" in log.read_text()


def test_run_exits_6_when_the_server_dies_under_it(tmp_path):
    proc, server_pid, _, _, _ = _start_edge_serve(tmp_path)
    try:
        os.kill(server_pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 6
    assert "tritonserver exited with code -9" in err
    deadline = time.monotonic() + 15
    while live_group_members(server_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert live_group_members(server_pid) == []


def test_commands_that_talk_to_a_server_default_to_the_local_one():
    """--url (or --server) defaults to localhost:8001 (Triton's gRPC port), except where a server is optional:
    deploy and rollback change files, and load them on a server only when --url names one."""
    from orinkit.cli.bench import main as bench
    from orinkit.cli.repo import main as repo

    defaults = {"edge-bench": next(p.default for p in bench.params if p.name == "url")}
    for name, command in repo.commands.items():
        for param in command.params:
            if param.name == "server":
                defaults[f"edge-repo {name}"] = param.default
    assert defaults == {"edge-bench": "localhost:8001", "edge-repo status": "localhost:8001",
                        "edge-repo index": "localhost:8001", "edge-repo load": "localhost:8001",
                        "edge-repo unload": "localhost:8001", "edge-repo deploy": None, "edge-repo rollback": None}


def _cli_commands() -> dict:
    """Every command of the edge-* tools by the words that run it ("edge-repo status")."""
    import click

    from orinkit.cli import bench, convert, fleet, jetson, repo, serve, stream, tune

    tools = {"edge-bench": bench.main, "edge-convert": convert.main, "edge-fleet": fleet.main,
             "edge-jetson": jetson.main, "edge-repo": repo.main, "edge-serve": serve.main, "edge-stream": stream.main,
             "edge-tune": tune.main}
    found = {}

    def walk(name: str, command) -> None:
        if isinstance(command, click.Group):
            for word, child in command.commands.items():
                walk(f"{name} {word}", child)
        else:
            found[name] = command

    for name, command in tools.items():
        walk(name, command)
    return found


# Each command that talks to a running server, with the other arguments it needs to parse.
SERVER_COMMANDS = {
    "edge-bench": ["--model", "m"],
    "edge-stream": ["clip.mp4", "--model", "m"],
    "edge-tune": ["m", "--repo", "models"],
    "edge-serve ui": [],
    "edge-serve wait-ready": [],
    "edge-repo deploy": ["m", "m.onnx", "--repo", "models"],
    "edge-repo rollback": ["m", "--repo", "models"],
    "edge-repo load": ["m", "--repo", "models"],
    "edge-repo unload": ["m"],
    "edge-repo index": [],
    "edge-repo status": [],
    "edge-fleet agent": ["--ring", "r", "--bucket", "s3://fleet/ring", "--repository", "{folder}"],
}


@pytest.mark.parametrize("spelling", ["--url", "--server"])
@pytest.mark.parametrize("name", sorted(SERVER_COMMANDS))
def test_every_command_that_talks_to_a_server_takes_url_and_server_as_another_name(name, spelling, tmp_path):
    """One name for one thing: the server's address is --url everywhere, and --server keeps older command lines
    working."""
    commands = _cli_commands()
    talking = sorted(n for n, c in commands.items() if any({"--url", "--server"} & set(p.opts) for p in c.params))
    assert talking == sorted(SERVER_COMMANDS), "every command with either option is listed (and takes both)"
    command = commands[name]
    (option,) = [p for p in command.params if {"--url", "--server"} & set(p.opts)]
    assert option.opts == ["--url", "--server"], "--url is the documented name, --server its alias"
    args = [a.format(folder=tmp_path) for a in SERVER_COMMANDS[name]]
    with command.make_context(name, [*args, spelling, "orin.local:9001"]) as ctx:
        assert ctx.params[option.name] == "orin.local:9001"
    assert "--url, --server" in CliRunner().invoke(command, ["--help"], prog_name=name).output
