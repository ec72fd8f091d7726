"""Clients with their DEFAULT settings across a real server restart, with and without shared memory: no failed
call, none past its deadline; and the deadline bounds a whole call, retries included."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from client_fixtures import build_client_repository

from orinkit.client import Client, InvalidInputError, ServerUnavailableError
from orinkit.client.errors import ModelNotFoundError, SharedMemoryRegionLostError, map_exception
from orinkit.server import ServerOptions, TritonProcess, build_command, locate_tritonserver
from orinkit.server.ports import free_ports

X = np.arange(6, dtype=np.float32).reshape(2, 3)
THREADS = 8


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    return build_client_repository(tmp_path_factory.mktemp("restart") / "models")


def _server(repository, ports, log):
    http, grpc, metrics = ports
    command = build_command(locate_tritonserver(), ServerOptions(repository=repository, http_port=http,
                                                                 grpc_port=grpc, metrics_port=metrics))
    return TritonProcess(command, log=log)


@pytest.mark.parametrize("shared_memory", [None, "system"])
def test_default_clients_ride_through_a_restart(repository, tmp_path, shared_memory):
    ports = free_ports(3)
    server = _server(repository, ports, tmp_path / "first.log").start()
    url = server.command.grpc_url
    clients = [Client(url, "plus_one", shared_memory=shared_memory) for _ in range(THREADS)]  # defaults
    stop = threading.Event()
    failures, durations = [], []
    after_restart = [0] * THREADS
    restarted = threading.Event()

    def work(index):
        client = clients[index]
        while not stop.is_set():
            started = time.monotonic()
            try:
                np.testing.assert_array_equal(client(X), X + 1)
                if restarted.is_set():
                    after_restart[index] += 1
            except Exception as exc:  # noqa: BLE001 - every failure is what this test counts
                failures.append(exc)
            durations.append(time.monotonic() - started)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    second = None
    try:
        time.sleep(1.0)
        server.stop()  # a crash or Restart=on-failure: the server is gone, then back on the same ports
        down = time.monotonic()
        second = _server(repository, ports, tmp_path / "second.log").start()
        back = time.monotonic() - down
        restarted.set()
        time.sleep(2.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        for client in clients:
            client.close()
        if second is not None:
            second.stop()
    assert failures == [], failures[:3]
    assert max(durations) < clients[0].timeout_s, "no call outlived its deadline"
    assert all(count > 0 for count in after_restart), f"every client was served again ({after_restart})"
    assert back < 30


def test_the_deadline_bounds_the_whole_call_retries_included(repository, tmp_path):
    ports = free_ports(3)
    server = _server(repository, ports, tmp_path / "log").start()
    with Client(server.command.grpc_url, "plus_one") as patient:
        patient(X)  # the server answers (with the default deadline: a loaded machine may be slow to start it)
    client = Client(server.command.grpc_url, "plus_one", timeout_s=2.0)
    try:
        server.stop()
        started = time.monotonic()
        with pytest.raises(ServerUnavailableError, match="unreachable for the whole 2 s of the call"):
            client(X)
        # It kept trying for the whole deadline and stopped then (the upper margin is scheduling on a loaded
        # machine, not a figure).
        assert 1.8 < time.monotonic() - started < 5.0
    finally:
        client.close()
        server.stop()


def test_a_request_above_the_size_limit_is_refused_before_it_is_sent(repository, tmp_path):
    ports = free_ports(3)
    server = _server(repository, ports, tmp_path / "log").start()
    try:
        with Client(server.command.grpc_url, "frame_stats", max_request_bytes=1 << 20) as client:
            frame = np.zeros((2, 3, 360, 640), np.float32)  # 5.3 MiB
            started = time.monotonic()
            with pytest.raises(InvalidInputError, match="above this client's limit of 1 MiB") as info:
                client(frame)
            assert time.monotonic() - started < 0.5 and info.value.given == frame.nbytes
        with Client(server.command.grpc_url, "frame_stats") as client:  # the default (64 MiB) lets it through
            assert client(frame)["MEANS"].shape == (2, 3)
    finally:
        server.stop()


class _Raised(Exception):
    """tritonclient's InferenceServerException as the server raises it (status and message)."""


def _error(status, message):
    from tritonclient.utils import InferenceServerException

    return InferenceServerException(message, status=f"StatusCode.{status}")


def test_status_decides_first_and_the_message_only_separates_causes():
    region = map_exception(_error("NOT_FOUND", "Unable to find shared memory region: 'r1'"), url="u", model="m")
    model = map_exception(_error("NOT_FOUND", "Request for unknown model: 'm' is not found"), url="u", model="m")
    assert isinstance(region, SharedMemoryRegionLostError) and isinstance(model, ModelNotFoundError)
    invalid = map_exception(_error("INVALID_ARGUMENT", "image_preprocess: not an image"), url="u", model="m")
    assert isinstance(invalid, InvalidInputError)
    assert isinstance(map_exception(_error("UNAVAILABLE", "connection refused"), url="u"), ServerUnavailableError)
