"""Client.stream against the real local tritonserver: decoupled models, their errors, deadlines and restarts."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from client_fixtures import build_stream_repository

from orinkit.client import (
    Client,
    DeadlineExceededError,
    DecoupledModelError,
    InferenceFailedError,
    InvalidInputError,
)
from orinkit.client.errors import map_exception
from orinkit.server import ServerOptions, TritonProcess, build_command, locate_tritonserver
from orinkit.server.ports import free_ports


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    return build_stream_repository(tmp_path_factory.mktemp("stream") / "models")


@pytest.fixture(scope="module")
def stream_url(triton_server_factory, repository):
    return triton_server_factory(repository).command.grpc_url


def _count(n, delay_ms=0):
    return np.array([n], np.int32), np.array([delay_ms], np.int32)


def _settled(baseline: int, seconds: float = 5.0) -> int:
    """The thread count once the stream's threads had their chance to end."""
    deadline = time.monotonic() + seconds
    while threading.active_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    return threading.active_count()


def test_every_response_in_order_and_the_empty_final_one_unseen(stream_url):
    with Client(stream_url, "count_stream") as client:
        assert client.info.decoupled
        baseline = threading.active_count()
        values = [int(value[0]) for value in client.stream(*_count(5))]
        assert values == [0, 1, 2, 3, 4]
        assert list(client.stream(*_count(0))) == [], "only the final flag: nothing to yield"
        assert _settled(baseline) == baseline


def test_a_plain_call_to_a_decoupled_model_names_stream(stream_url):
    with Client(stream_url, "count_stream") as client:
        for call in (client, client.infer_sample):
            with pytest.raises(DecoupledModelError, match="decoupled") as info:
                call(*_count(2))
            assert "client.stream(" in info.value.hint and info.value.exit_code == 4


def test_the_servers_decoupled_refusal_is_mapped_too(stream_url):
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    raw = grpcclient.InferenceServerClient(stream_url)
    inputs = []
    for name, array in zip(("N", "DELAY_MS"), _count(2)):
        inputs.append(grpcclient.InferInput(name, [1], "INT32"))
        inputs[-1].set_data_from_numpy(array)
    try:
        with pytest.raises(InferenceServerException) as info:
            raw.infer("count_stream", inputs)
    finally:
        raw.close()
    assert isinstance(map_exception(info.value, url=stream_url, model="count_stream"), DecoupledModelError)


def test_inputs_are_checked_before_anything_is_sent(stream_url):
    with Client(stream_url, "count_stream") as client:
        with pytest.raises(InvalidInputError, match="DELAY_MS"):
            client.stream(np.array([3], np.int32))
        with pytest.raises(InvalidInputError, match="no output"):
            client.stream(*_count(3), outputs=["NOPE"])


def test_an_error_mid_stream_raises_after_the_good_responses(stream_url):
    with Client(stream_url, "broken_stream") as client:
        seen = []
        with pytest.raises(InferenceFailedError, match="sensor lost after 2 frames"):
            for value in client.stream(np.array([2], np.int32)):
                seen.append(int(value[0]))
        assert seen == [0, 1]


def test_a_model_that_is_not_decoupled_streams_one_response(stream_url):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with Client(stream_url, "plus_one") as client:
        results = list(client.stream(x))
    assert len(results) == 1
    np.testing.assert_array_equal(results[0], x + 1)


def test_the_deadline_bounds_the_whole_stream_and_leaves_nothing_running(stream_url):
    with Client(stream_url, "count_stream") as client:
        assert client.info.decoupled
        baseline = threading.active_count()
        seen, started = [], time.monotonic()
        with pytest.raises(DeadlineExceededError, match="longer than its 0.6 s"):
            for value in client.stream(*_count(50, delay_ms=100), timeout_s=0.6):
                seen.append(int(value[0]))
        elapsed = time.monotonic() - started
        # The whole stream would take 5 s: the deadline ends it long before that (a loaded machine may add some
        # seconds of scheduling, never the rest of the stream).
        assert 0.5 < elapsed < 4.0 and 3 <= len(seen) < 40, (elapsed, seen)
        assert _settled(baseline) == baseline
        # The cancelled request freed its model instance: a new stream runs at once.
        assert [int(v[0]) for v in client.stream(*_count(3))] == [0, 1, 2]


def test_breaking_out_early_cancels_cleanly(stream_url):
    with Client(stream_url, "count_stream") as client:
        assert client.info.decoupled
        baseline = threading.active_count()
        started = time.monotonic()
        for value in client.stream(*_count(100, delay_ms=100)):
            if value[0] == 1:
                break
        assert _settled(baseline) == baseline
        stream = client.stream(*_count(100, delay_ms=100))
        assert next(stream)[0] == 0
        stream.close()
        assert _settled(baseline) == baseline
        assert time.monotonic() - started < 3, "nothing waited for the 10 s streams to finish"


def test_a_stream_started_while_the_server_is_down_waits_for_it(tmp_path):
    repository = build_stream_repository(tmp_path / "models", only=("count_stream",))
    http, grpc, metrics = free_ports(3)
    command = build_command(locate_tritonserver(), ServerOptions(repository=repository, http_port=http,
                                                                 grpc_port=grpc, metrics_port=metrics))
    first = TritonProcess(command, log=tmp_path / "first.log").start()
    second: list[TritonProcess] = []
    restart = threading.Timer(0.5, lambda: second.append(TritonProcess(command, log=tmp_path / "second.log")
                                                         .start()))
    client = Client(first.command.grpc_url, "count_stream", timeout_s=60)
    try:
        assert client.info.decoupled  # read while it is up: the stream itself then meets the restart
        first.stop()
        stream = client.stream(*_count(3))
        restart.start()
        started = time.monotonic()
        assert [int(v[0]) for v in stream] == [0, 1, 2]
        assert time.monotonic() - started > 0.5, "the stream waited for the server"
    finally:
        client.close()
        first.stop()
        if restart.is_alive() or second:
            restart.join()
        for process in second:
            process.stop()
