"""A model whose initialize raises, loaded through orinkit.repo: the error a person reads is one line, the
exception first, as the fleet already says it (Triton sends the stack over many lines)."""

from __future__ import annotations

import textwrap

import pytest

from orinkit.repo.errors import ServerAPIError
from orinkit.repo.server_api import RepositoryAPI

MODEL_PY = textwrap.dedent('''
    import triton_python_backend_utils as pb_utils


    def read_factor(args):
        raise ValueError("factor must be a number, got 'three'")


    class TritonPythonModel:
        def initialize(self, args):
            self.factor = read_factor(args)

        def execute(self, requests):
            return [pb_utils.InferenceResponse([]) for _ in requests]
''')
CONFIG = textwrap.dedent('''
    name: "broken"
    backend: "python"
    max_batch_size: 0
    input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
    output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
''')


@pytest.fixture(scope="module")
def server(triton_server_factory, tmp_path_factory):
    repository = tmp_path_factory.mktemp("repository")
    (repository / "broken" / "1").mkdir(parents=True)
    (repository / "broken" / "config.pbtxt").write_text(CONFIG)
    (repository / "broken" / "1" / "model.py").write_text(MODEL_PY)
    return triton_server_factory(repository, model_control_mode="explicit", exit_timeout_s=2)


def test_a_failed_load_is_one_line_with_the_exception_first(server):
    with RepositoryAPI(server.command.grpc_url) as api, pytest.raises(ServerAPIError) as info:
        api.load("broken", timeout_s=60)
    text = str(info.value)
    assert "\n" not in text and "At:" not in text, text
    assert "failed: ValueError: factor must be a number, got 'three' (raised in read_factor at model.py:" in text


def test_a_request_the_model_fails_is_one_line_with_the_exception_first(triton_server_factory, tmp_path):
    import numpy as np

    from orinkit.client import Client, InferenceFailedError

    (tmp_path / "raises" / "1").mkdir(parents=True)
    (tmp_path / "raises" / "config.pbtxt").write_text(CONFIG.replace('"broken"', '"raises"'))
    (tmp_path / "raises" / "1" / "model.py").write_text(MODEL_PY.replace(
        "self.factor = read_factor(args)", "pass").replace(
        "return [pb_utils.InferenceResponse([]) for _ in requests]", "read_factor(None)"))
    server = triton_server_factory(tmp_path)
    with Client(server.command.grpc_url, "raises", timeout_s=30) as client, \
            pytest.raises(InferenceFailedError) as info:
        client(np.zeros(2, np.float32))
    text = str(info.value)
    assert "\n" not in text and "At:" not in text, text
    assert text.startswith("ValueError: factor must be a number, got 'three' (raised in read_factor at model.py:")
    assert "the server failed the request for 'raises'" in text
