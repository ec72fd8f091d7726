"""ServerOptions and the command line built from them (no server started here)."""

from __future__ import annotations

import sys

import pytest
from conftest import DATA

from orinkit.server import (
    InvalidServerOptionError,
    RepositoryNotFoundError,
    ServerOptions,
    build_command,
    locate_tritonserver,
)


@pytest.fixture(scope="module")
def install():
    return locate_tritonserver(default_homes=())


def test_defaults_bind_loopback_and_the_standard_ports(install):
    cmd = build_command(install, ServerOptions(repository=DATA / "repository"))
    argv = cmd.argv
    assert argv[0] == str(install.binary)
    for flag in (
        f"--model-repository={DATA / 'repository'}",
        f"--backend-directory={cmd.backend_directory}",
        "--http-address=127.0.0.1", "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1",
        "--http-port=8000", "--grpc-port=8001", "--metrics-port=8002",
        "--model-control-mode=none", "--exit-timeout-secs=30",
    ):
        assert flag in argv
    assert cmd.grpc_url == "127.0.0.1:8001"
    assert cmd.http_url == "http://127.0.0.1:8000"


def test_explicit_mode_loads_the_named_models(install):
    options = ServerOptions(repository=DATA / "repository", model_control_mode="explicit",
                            load_models=["add_sub", "add_sub_twice"])
    argv = build_command(install, options).argv
    assert "--model-control-mode=explicit" in argv
    assert argv.index("--load-model=add_sub") < argv.index("--load-model=add_sub_twice")


def test_environment_prepends_libraries_and_the_python_environment(install):
    cmd = build_command(install, ServerOptions(repository=DATA / "repository"))
    env = cmd.environment({"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/opt/x", "KEEP": "1"})
    assert env["PATH"].split(":") == [f"{sys.prefix}/bin", "/usr/bin"]
    libs = env["LD_LIBRARY_PATH"].split(":")
    assert libs[-1] == "/opt/x" and libs[0].endswith("nvidia_pytriton.libs")
    assert env["KEEP"] == "1"
    assert cmd.environment({})["PATH"] == f"{sys.prefix}/bin"


def test_wildcard_address_is_reached_through_loopback(install):
    cmd = build_command(install, ServerOptions(repository=DATA / "repository", address="0.0.0.0"))
    assert "--grpc-address=0.0.0.0" in cmd.argv
    assert cmd.grpc_url == "127.0.0.1:8001"


@pytest.mark.parametrize(
    "options, problem",
    [
        ({"http_port": 8001}, "must differ"),
        ({"grpc_port": 70000}, "is not a port"),
        ({"metrics_port": 0}, "is not a port"),
        ({"model_control_mode": "lazy"}, "is unknown"),
        ({"load_models": ["add_sub"]}, "only honoured with model control mode 'explicit'"),
        ({"exit_timeout_s": -1}, "negative"),
    ],
)
def test_options_that_cannot_work_are_refused_when_made(options, problem):
    with pytest.raises(InvalidServerOptionError, match=problem) as info:
        ServerOptions(repository=DATA / "repository", **options)
    assert info.value.exit_code == 4 and info.value.hint


def test_options_are_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        ServerOptions(DATA / "repository")  # type: ignore[misc]
    options = ServerOptions(repository=DATA / "repository")
    with pytest.raises(AttributeError):
        options.grpc_port = 1  # type: ignore[misc]


def test_missing_repository_is_named(tmp_path):
    options = ServerOptions(repository=tmp_path / "models")
    with pytest.raises(RepositoryNotFoundError, match="does not exist") as info:
        options.check_repository()
    assert "--repository" in info.value.hint
