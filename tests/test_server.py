"""The hand-written repository on a real tritonserver: models READY, gRPC inference with the right numbers."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from orinkit.server.health import is_model_ready, is_ready, server_metadata


@pytest.fixture(scope="module")
def client(repository_server):
    with grpcclient.InferenceServerClient(repository_server.command.grpc_url) as c:
        yield c


def _infer(client, model, names, arrays, outputs):
    inputs = []
    for name, array in zip(names, arrays):
        tensor = grpcclient.InferInput(name, array.shape, "FP32")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    result = client.infer(model, inputs)
    return [result.as_numpy(name) for name in outputs]


def test_server_and_both_models_are_ready(repository_server, client):
    http = repository_server.command.http_url
    assert is_ready(http)
    assert server_metadata(http)["version"] == "2.51.0"
    for model in ("add_sub", "add_sub_twice"):
        assert client.is_model_ready(model)
        assert is_model_ready(http, model)
    index = {m.name: m.state for m in client.get_model_repository_index().models}
    assert index == {"add_sub": "READY", "add_sub_twice": "READY"}


def test_python_model_answers_over_grpc(client):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    total, difference = _infer(client, "add_sub", ["INPUT0", "INPUT1"], [a, b], ["OUTPUT0", "OUTPUT1"])
    np.testing.assert_array_equal(total, a + b)
    np.testing.assert_array_equal(difference, a - b)


def test_ensemble_over_the_python_model_answers_over_grpc(client):
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    two_a, two_b = _infer(client, "add_sub_twice", ["A", "B"], [a, b], ["TWO_A", "TWO_B"])
    np.testing.assert_allclose(two_a, 2 * a, rtol=1e-6)
    np.testing.assert_allclose(two_b, 2 * b, rtol=1e-6, atol=1e-6)

