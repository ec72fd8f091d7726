"""The client against servers that stop, restart, or speak TLS: each on its own real tritonserver."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from client_fixtures import build_client_repository

from orinkit.client import Client, Retry, ServerUnavailableError
from orinkit.server import ServerOptions, TritonProcess, build_command, locate_tritonserver
from orinkit.server.ports import free_ports
from orinkit.server.testing import start_on_free_ports

X = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    return build_client_repository(tmp_path_factory.mktemp("faults") / "models")


def _command(repository, ports, **options):
    http, grpc, metrics = ports
    return build_command(locate_tritonserver(), ServerOptions(repository=repository, http_port=http, grpc_port=grpc,
                                                             metrics_port=metrics, exit_timeout_s=1, **options))


def test_a_server_stopped_mid_run_never_leaves_a_call_hanging(repository, tmp_path):
    server = start_on_free_ports(repository, tmp_path / "log", exit_timeout_s=1)
    outcome = {}
    client = Client(server.command.grpc_url, "sleepy", timeout_s=5, retry=Retry(attempts=2, backoff_s=0.1))
    try:
        _ = client.inputs

        def call():
            started = time.monotonic()
            try:
                outcome["result"] = client(np.array([2500], np.int32)).tolist()
            except Exception as exc:  # what a stopping server gives is part of what is checked
                outcome["error"] = exc
            outcome["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=call)
        thread.start()
        time.sleep(0.5)
        server.stop()
        thread.join(timeout=30)
        assert not thread.is_alive() and outcome["seconds"] < 5 + 1, "ended within its deadline"
        # Triton finishes in-flight requests when it stops gracefully, or the call fails as unavailable.
        assert outcome.get("result") == [2500] or isinstance(outcome.get("error"), ServerUnavailableError)
        started = time.monotonic()
        with pytest.raises(ServerUnavailableError):
            client(np.array([1], np.int32))
        assert time.monotonic() - started < 5
    finally:
        client.close()
        server.stop()


def test_calls_succeed_again_after_a_restart_within_the_retry_budget(repository, tmp_path):
    ports = free_ports(3)
    first = TritonProcess(_command(repository, ports), log=tmp_path / "first.log").start()
    second = TritonProcess(_command(repository, ports), log=tmp_path / "second.log")
    client = Client(first.command.grpc_url, "plus_one", retry=Retry(attempts=40, backoff_s=0.1, max_backoff_s=0.5))
    try:
        assert np.array_equal(client(X), X + 1)
        first.stop()
        restart = threading.Thread(target=lambda: (time.sleep(0.5), second.start()))
        restart.start()
        started = time.monotonic()
        assert np.array_equal(client(X), X + 1), "answered by the restarted server"
        assert time.monotonic() - started < 30
        restart.join(timeout=60)
    finally:
        client.close()
        first.stop()
        second.stop()


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    trustme = pytest.importorskip("trustme")
    folder = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    paths = {"ca": folder / "ca.pem", "cert": folder / "server.pem", "key": folder / "server.key"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    cert.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    cert.private_key_pem.write_to_path(str(paths["key"]))
    return paths


@pytest.fixture(scope="module")
def tls_server(repository, tls, tmp_path_factory):
    server = start_on_free_ports(repository, tmp_path_factory.mktemp("tls-log") / "log", grpc_tls_cert=tls["cert"],
                                 grpc_tls_key=tls["key"], grpc_tls_root_cert=tls["ca"])
    yield server
    server.stop()


def test_tls_with_the_ca_connects(tls_server, tls):
    with Client(tls_server.command.grpc_url, "plus_one", ssl=True, root_certificates=str(tls["ca"])) as client:
        assert np.array_equal(client(X), X + 1)


def test_tls_without_certificates_is_refused(tls_server):
    with Client(tls_server.command.grpc_url, "plus_one", retry=Retry(attempts=2, backoff_s=0.05)) as client:
        with pytest.raises(ServerUnavailableError):
            client(X)


def test_tls_without_peer_verification(tls_server):
    with Client(tls_server.command.grpc_url, "plus_one", insecure=True) as client:
        assert np.array_equal(client(X), X + 1)
