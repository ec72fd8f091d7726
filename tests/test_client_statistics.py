"""Triton's inference statistics through orinkit.client.statistics, against the real local server: counts that
grow by exactly the calls made, failures counted apart, times that are positive and grow."""

from __future__ import annotations

import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from client_fixtures import MODELS
from conftest import run_python

from orinkit.client import Client
from orinkit.client.errors import ModelNotFoundError, ServerUnavailableError
from orinkit.client.statistics import ModelStatistics, delta, model_statistics, total
from orinkit.repo.add import add_model
from orinkit.repo.options import ModelOptions
from orinkit.repo.signature import TensorSpec

KEY = ("stats_faulty", "1")


@pytest.fixture(scope="module")
def url(triton_server_factory, tmp_path_factory):
    repository = tmp_path_factory.mktemp("statistics") / "models"
    add_model(repository, MODELS / "stats_faulty.py", name="stats_faulty", inputs=[TensorSpec.parse("X:FP32:1")],
              outputs=[TensorSpec.parse("Y:FP32:1")], options=ModelOptions(max_batch_size=0))
    add_model(repository, MODELS / "plus_one.py", name="plus_one", inputs=[TensorSpec.parse("X:FP32:2x3")],
              outputs=[TensorSpec.parse("Y:FP32:2x3")], options=ModelOptions(max_batch_size=0))
    return triton_server_factory(repository).command.grpc_url


@pytest.fixture()
def grpc(url):
    with grpcclient.InferenceServerClient(url) as client:
        yield client


def _call(grpc, value: float) -> bool:
    """One request to stats_faulty; whether it succeeded (a negative value makes the model raise)."""
    tensor = grpcclient.InferInput("X", [1], "FP32")
    tensor.set_data_from_numpy(np.array([value], np.float32))
    try:
        grpc.infer("stats_faulty", [tensor])
        return True
    except grpcclient.InferenceServerException:
        return False


def _after(grpc, before, successes: int, failures: int):
    """The statistics once the server counted what was sent: it records a request as it releases it, which may
    be a moment after the client has the answer."""
    deadline = time.monotonic() + 2.0
    while True:
        after = model_statistics(grpc, "stats_faulty")
        change = delta(before, after)[KEY]
        if (change.success_count, change.failure_count) >= (successes, failures) or time.monotonic() > deadline:
            return after, change
        time.sleep(0.02)


def test_counts_grow_by_exactly_the_calls_made(grpc):
    before = model_statistics(grpc, "stats_faulty")
    started_ms = time.time() * 1000
    outcomes = [_call(grpc, v) for v in (1, 2, -1, 3, 4, -2, 5, 6, -3, 7)]
    assert outcomes.count(True) == 7
    after, change = _after(grpc, before, 7, 3)
    assert (change.model, change.version) == KEY
    assert change.success_count == 7 and change.failure_count == 3
    assert change.inference_count == 7, "failed requests are not inferences"
    assert change.execution_count == 10, "no batching: every request is one execution, failed ones too"
    assert change.failure_ns > 0 and change.request_ns > 0
    for stage in ("queue_ns", "compute_input_ns", "compute_infer_ns", "compute_output_ns"):
        assert getattr(change, stage) > 0, stage
        assert getattr(after[KEY], stage) > getattr(before[KEY], stage), f"{stage} grows"
    # The stages of a request happen inside its arrival-to-response time.
    assert 0 < change.server_ns <= change.request_ns
    assert 0 < change.mean_server_ms <= change.mean_request_ms
    assert change.mean_server_ms == pytest.approx(change.server_ns / 7 / 1e6)
    assert change.last_inference_ms == after[KEY].last_inference_ms >= started_ms - 1000


def test_every_model_and_a_second_snapshot(grpc):
    before = model_statistics(grpc)
    assert {KEY, ("plus_one", "1")} <= set(before)
    _call(grpc, 1)
    _, change = _after(grpc, before, 1, 0)
    after = model_statistics(grpc)
    changes = delta(before, after)
    assert changes[KEY].success_count == 1 and changes[KEY].failure_count == 0
    assert changes[("plus_one", "1")].success_count == 0, "a model nobody called does not change"
    assert total(changes, "stats_faulty").success_count == 1
    assert model_statistics(grpc, "stats_faulty", "1").keys() == {KEY}


def test_the_client_reads_its_models_statistics(url):
    with Client(url, "plus_one") as client:
        before = client.statistics()
        assert set(before) == {("plus_one", "1")}
        for _ in range(5):
            client(np.zeros((2, 3), np.float32))
        deadline = time.monotonic() + 2.0
        while True:
            change = delta(before, client.statistics())[("plus_one", "1")]
            if change.success_count >= 5 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert change.success_count == 5 and change.failure_count == 0 and change.mean_server_ms > 0
        assert {KEY, ("plus_one", "1")} <= set(client.statistics(all_models=True))
    with Client(url, "nope") as missing, pytest.raises(ModelNotFoundError, match="'nope'"):
        missing.statistics()


def test_failures_are_typed(grpc, url):
    with pytest.raises(ModelNotFoundError, match="nope"):
        model_statistics(grpc, "nope", url=url)
    with pytest.raises(ModelNotFoundError, match="version 7"):
        model_statistics(grpc, "stats_faulty", "7", timeout_s=10, url=url)
    with grpcclient.InferenceServerClient("127.0.0.1:1") as nowhere:
        with pytest.raises(ServerUnavailableError, match="127.0.0.1:1"):
            model_statistics(nowhere, timeout_s=5, url="127.0.0.1:1")


def test_arithmetic_of_snapshots():
    a = ModelStatistics("m", "1", inference_count=4, execution_count=5, success_count=4, failure_count=1,
                        request_ns=4_000_000, queue_ns=400_000, compute_input_ns=200_000, compute_infer_ns=2_000_000,
                        compute_output_ns=200_000, last_inference_ms=10)
    b = ModelStatistics("m", "1", inference_count=6, execution_count=7, success_count=6, failure_count=1,
                        request_ns=6_000_000, queue_ns=600_000, compute_input_ns=300_000, compute_infer_ns=3_000_000,
                        compute_output_ns=300_000, last_inference_ms=20)
    change = b - a
    assert (change.success_count, change.failure_count, change.last_inference_ms) == (2, 0, 20)
    assert change.mean_queue_ms == pytest.approx(0.1) and change.mean_server_ms == pytest.approx(0.7)
    assert change.mean_request_ms == pytest.approx(1.0)
    assert ModelStatistics("m", "1").mean_server_ms is None, "no request, no mean (and no NaN in JSON)"
    assert change.as_dict()["mean_compute_infer_ms"] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        b - ModelStatistics("m", "2")
    both = total([a, ModelStatistics("m", "2", success_count=1), ModelStatistics("other", "1", success_count=9)],
                 "m")
    assert both.success_count == 5 and both.last_inference_ms == 10
    # A version loaded between two snapshots counts from zero.
    assert delta({}, {("m", "1"): b})[("m", "1")] == b


def test_importing_it_loads_no_grpc():
    code = ("import sys, orinkit.client.statistics; "
            "print(sorted(m for m in sys.modules if m.startswith(('grpc', 'tritonclient'))))")
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
