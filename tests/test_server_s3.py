"""A server build that reads S3 itself (x86 and SBSA, never Jetson's): the bundled tritonserver serving a repository
from a real S3 API server (moto), in explicit mode; poll mode and loading everything at start are refused."""

from __future__ import annotations

import contextlib
import socket
from urllib.parse import urlparse

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import DATA

from orinkit.cli.serve import main as edge_serve
from orinkit.client import Client
from orinkit.server import ServerOptions
from orinkit.server.errors import InvalidServerOptionError
from orinkit.server.ports import free_ports
from orinkit.server.testing import start_on_free_ports

pytest_plugins = ["fleet_fixtures"]


def _upload_repository(endpoint: str, bucket: str) -> None:
    from fleet_fixtures import _admin

    for path in (DATA / "repository").rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            key = "models/" + path.relative_to(DATA / "repository").as_posix()
            _admin(endpoint).put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


def test_the_bundled_server_serves_an_s3_repository_in_explicit_mode(s3_env, moto_server, tmp_path):
    from fleet_fixtures import create_bucket

    bucket = create_bucket(moto_server)
    _upload_repository(moto_server, bucket)
    # Triton's form for an endpoint that is not AWS: s3://HOST:PORT/BUCKET/PREFIX.
    url = f"s3://{urlparse(moto_server).netloc}/{bucket}/models"
    server = start_on_free_ports(url, tmp_path / "server.log", model_control_mode="explicit",
                                 load_models=("add_sub",))
    try:
        assert "--model-repository=" + url in server.command.argv
        with Client(server.command.grpc_url, "add_sub") as client:
            a, b = np.arange(4, dtype=np.float32), np.ones(4, dtype=np.float32)
            result = client(a, b)
        np.testing.assert_array_equal(result["OUTPUT0"], a + b)
    finally:
        server.stop()


@pytest.mark.parametrize("options, text", [
    ({}, "explicit model control mode, not 'none'"),
    ({"model_control_mode": "poll"}, "explicit model control mode, not 'poll'"),
    ({"model_control_mode": "explicit", "extra_args": ("--repository-poll-secs=2",)}, "polling an S3 repository"),
])
def test_modes_that_poll_or_depend_on_the_bucket_at_start_are_refused(options, text):
    with pytest.raises(InvalidServerOptionError, match=text):
        ServerOptions(repository="s3://bucket/models", **options)


def test_the_cli_keeps_the_url_whole_and_refuses_a_service_for_it():
    runner = CliRunner()
    shown = runner.invoke(edge_serve, ["command", "s3://10.0.0.5:9000/fleet/models", "--model-control-mode",
                                       "explicit"])
    assert shown.exit_code == 0, shown.output
    assert "--model-repository=s3://10.0.0.5:9000/fleet/models" in shown.output
    refused = runner.invoke(edge_serve, ["install", "s3://fleet/models", "--dry-run"])
    assert refused.exit_code == 4 and "cannot read s3://" in refused.output
    ports = [str(p) for p in free_ports(3)]  # never 8000-8002: a server may hold them on this machine
    unchecked = runner.invoke(edge_serve, ["run", "s3://fleet/models", "--model-control-mode", "explicit",
                                           "--no-check", "--http-port", ports[0], "--grpc-port", ports[1],
                                           "--metrics-port", ports[2]])
    assert unchecked.exit_code == 4 and "--no-check does not apply" in unchecked.output


def test_a_refused_option_does_not_depend_on_the_ports_being_free():
    # Held ports (as 8000-8002 are where a server runs) must not turn the option's refusal (4) into "busy" (5).
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(3):
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            ports.append(str(sock.getsockname()[1]))
        refused = CliRunner().invoke(edge_serve, ["run", "s3://fleet/models", "--model-control-mode", "explicit",
                                                  "--no-check", "--http-port", ports[0], "--grpc-port", ports[1],
                                                  "--metrics-port", ports[2]])
    assert refused.exit_code == 4 and "--no-check does not apply" in refused.output
