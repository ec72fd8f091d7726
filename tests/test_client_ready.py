"""What a newcomer meets before the first answer: no server, a model in the repository that is not loaded, a URL
written with a scheme, a request above the size limit. Against a real tritonserver in explicit model control,
serving a repository written by hand (config.pbtxt as text, model.py as Triton's Python-backend examples write
theirs)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from click.testing import CliRunner

from orinkit.cli.bench import main as edge_bench
from orinkit.client import (
    Client,
    InvalidInputError,
    ModelNotFoundError,
    ModelNotLoadedError,
    ModelNotReadyError,
    ServerUnavailableError,
)
from orinkit.client.plan import size_text, sizes
from orinkit.server.ports import free_ports
from orinkit.server.testing import start_on_free_ports

MODEL_PY = '''import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        parameters = config.get("parameters", {})
        if "FAIL" in parameters:
            raise pb_utils.TritonModelException(parameters["FAIL"]["string_value"])
        time.sleep(float(parameters.get("START_DELAY_S", {}).get("string_value", "0")))

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            out = pb_utils.Tensor("Y", (x + 1).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses

    def finalize(self):
        pass
'''

CONFIG = '''name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X", data_type: TYPE_FP32, dims: [ -1 ] }} ]
output [ {{ name: "Y", data_type: TYPE_FP32, dims: [ -1 ] }} ]
instance_group [ {{ kind: KIND_CPU, count: 1 }} ]
parameters: {{ key: "START_DELAY_S", value: {{ string_value: "{delay}" }} }}
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``echo`` loaded; ``tiny``, ``slow_start`` (3 s to initialize) and ``broken`` (its initialize raises) in the
    repository but not loaded."""
    repository = tmp_path_factory.mktemp("ready") / "models"
    for name, delay in (("echo", 0), ("tiny", 0), ("slow_start", 3), ("broken", 0)):
        (repository / name / "1").mkdir(parents=True)
        (repository / name / "config.pbtxt").write_text(CONFIG.format(name=name, delay=delay))
        (repository / name / "1" / "model.py").write_text(MODEL_PY)
    with (repository / "broken" / "config.pbtxt").open("a") as config:
        config.write('parameters: { key: "FAIL", value: { string_value: "no weights at /opt/broken.bin" } }\n')
    process = start_on_free_ports(repository, tmp_path_factory.mktemp("ready-log") / "log",
                                  model_control_mode="explicit", load_models=("echo",))
    yield process
    process.stop()


def test_a_first_call_without_a_server_ends_at_its_deadline():
    (port,) = free_ports(1)
    with Client(f"127.0.0.1:{port}", "resnet", timeout_s=2) as client:
        started = time.monotonic()
        with pytest.raises(ServerUnavailableError, match="unreachable for the whole 2 s of the call") as info:
            client(np.zeros(3, np.float32))
        took = time.monotonic() - started
    assert took < 2 * 2, f"the first call's ready wait kept to the call's deadline ({took:.1f} s)"
    assert took >= 2 * 0.9, "and the message's '2 s' is true: it kept trying that long"
    assert f"127.0.0.1:{port}" in str(info.value) and info.value.exit_code == 6


def test_retries_leave_no_grpc_thread_failing_after_close():
    """Waiting for the server watches the channel's connectivity; grpcio's watcher thread must not outlive
    close() to fail on its own ("Channel closed!", printed from a thread)."""
    (port,) = free_ports(1)
    failures = []
    previous, threading.excepthook = threading.excepthook, lambda args: failures.append(args.exc_value)
    try:
        for _ in range(20):  # short deadlines: close() comes while the watcher still runs
            with Client(f"127.0.0.1:{port}", "resnet", timeout_s=0.12) as client, \
                    pytest.raises(ServerUnavailableError):
                client(np.zeros(3, np.float32))
        time.sleep(0.5)  # grpcio's watcher polls every 0.2 s
    finally:
        threading.excepthook = previous
    assert failures == []


def test_reading_the_model_without_a_call_is_bounded_by_ready_timeout_s():
    (port,) = free_ports(1)
    with Client(f"127.0.0.1:{port}", "resnet", timeout_s=None, ready_timeout_s=1) as client:
        started = time.monotonic()
        with pytest.raises(ServerUnavailableError, match=r"whole 1 s of the wait for its model \(ready_timeout_s\)"):
            _ = client.inputs
        assert time.monotonic() - started < 2 * 1


def test_a_model_in_the_repository_but_not_loaded_says_so_and_how_to_load_it(server):
    url = server.command.grpc_url
    with Client(url, "tiny") as client:  # defaults: a 30 s deadline, a 30 s ready wait
        started = time.monotonic()
        with pytest.raises(ModelNotLoadedError) as info:
            client(np.zeros(3, np.float32))
        took = time.monotonic() - started
    error = info.value
    assert took < 10, f"told at once, not after the 30 s ready wait ({took:.1f} s)"
    assert "'tiny' is in the repository of the server" in error.message and "not loaded (never loaded)" in error.message
    assert f"edge-repo load tiny --repo REPOSITORY --url {url}" in error.hint
    assert isinstance(error, ModelNotReadyError) and error.exit_code == 6


def test_edge_bench_on_a_model_not_loaded_fails_at_once_with_the_fix(server):
    url = server.command.grpc_url
    started = time.monotonic()
    result = CliRunner().invoke(edge_bench, ["--url", url, "--model", "tiny", "--requests", "5"])
    assert time.monotonic() - started < 10
    assert result.exit_code == 6, result.output
    assert "not loaded" in result.output and f"edge-repo load tiny --repo REPOSITORY --url {url}" in result.output
    assert "server's load" not in result.output


def test_a_model_the_repository_lacks_is_unknown_and_the_error_lists_what_is_there(server):
    with Client(server.command.grpc_url, "nope") as client, pytest.raises(ModelNotFoundError) as info:
        client(np.zeros(3, np.float32))
    assert "unknown model: 'nope'" in info.value.message
    assert "echo" in info.value.hint and "tiny" in info.value.hint and info.value.exit_code == 4


def test_a_loading_model_is_waited_for_and_an_unloaded_one_is_not(server):
    url = server.command.grpc_url
    with grpcclient.InferenceServerClient(url) as admin:
        loader = threading.Thread(target=admin.load_model, args=("slow_start",))
        loader.start()
        try:
            deadline = time.monotonic() + 30
            while not any(m.get("name") == "slow_start" and m.get("state") == "LOADING"
                          for m in admin.get_model_repository_index(as_json=True)["models"]):
                assert time.monotonic() < deadline, "the server never reported slow_start as LOADING"
                time.sleep(0.05)
            with Client(url, "slow_start", timeout_s=0.5) as client, pytest.raises(ModelNotReadyError) as info:
                client(np.zeros(3, np.float32))
            assert type(info.value) is ModelNotReadyError
            assert "'slow_start' was still loading" in info.value.message and "0.5 s of the call" in info.value.message
            with Client(url, "slow_start") as client:  # asked while it loads (3 s in initialize)
                np.testing.assert_array_equal(client(np.arange(3, dtype=np.float32)), [1, 2, 3])
        finally:
            loader.join(timeout=60)
        admin.unload_model("slow_start")
    with Client(url, "slow_start") as client, pytest.raises(ModelNotLoadedError) as info:
        client(np.zeros(3, np.float32))
    assert "not loaded (UNLOADING" in info.value.message or "not loaded (UNAVAILABLE: unloaded)" in info.value.message
    assert "edge-repo load slow_start" in info.value.hint


def test_a_model_that_failed_to_load_says_why(server):
    url = server.command.grpc_url
    with grpcclient.InferenceServerClient(url) as admin, pytest.raises(Exception, match="no weights"):
        admin.load_model("broken")
    with Client(url, "broken") as client, pytest.raises(ModelNotLoadedError) as info:
        client(np.zeros(3, np.float32))
    assert "'broken' failed to load on the server" in info.value.message and "no weights" in info.value.message
    assert f"edge-repo load broken --repo REPOSITORY --url {url}" in info.value.hint


def test_a_version_the_server_does_not_serve_is_unknown_and_the_error_names_those_it_does(server):
    with Client(server.command.grpc_url, "echo", "7") as client, pytest.raises(ModelNotFoundError) as info:
        client(np.zeros(3, np.float32))
    assert "'echo' version 7 is not served" in info.value.message and "(its versions: 1 READY)" in info.value.message


@pytest.mark.parametrize("url, scheme", [("http://localhost:8001", "http"), ("grpc://localhost:8001", "grpc"),
                                         ("https://jetson.local:8001", "https")])
def test_a_url_with_a_scheme_is_refused_at_once(url, scheme):
    started = time.monotonic()
    with pytest.raises(InvalidInputError) as info:
        Client(url, "resnet")
    assert time.monotonic() - started < 1
    assert f"give host:port, without {scheme}://" in info.value.hint and info.value.exit_code == 4
    assert f"'{url}'" in info.value.message
    result = CliRunner().invoke(edge_bench, ["--url", url, "--model", "resnet", "--requests", "1"])
    assert result.exit_code == 4 and f"without {scheme}://" in result.output


def test_grpc_own_target_form_still_connects(server):
    port = server.command.grpc_url.rpartition(":")[2]
    with Client(f"dns:///127.0.0.1:{port}", "echo") as client:
        np.testing.assert_array_equal(client(np.zeros(2, np.float32)), [1, 1])


def test_size_limits_read_in_units_that_tell_the_two_numbers_apart(server):
    url = server.command.grpc_url
    cases = [(1000, 251, "1004 bytes", "1000 bytes"),  # 251 FP32 values
             (1000, 1500, "5.9 KiB", "1000 bytes"),
             (1 << 20, (1 << 18) + 1, "1,048,580 bytes", "1,048,576 bytes"),  # both would read "1 MiB"
             (1 << 20, 3 << 18, "3 MiB", "1 MiB")]
    for limit, count, given, allowed in cases:
        with Client(url, "echo", max_request_bytes=limit) as client, pytest.raises(InvalidInputError) as info:
            client(np.zeros(count, np.float32))
        assert info.value.message == f"the request holds {given}, above this client's limit of {allowed}"
        assert (info.value.given, info.value.expected) == (count * 4, limit)
    with Client(url, "echo", max_request_bytes=1000) as client:  # at the limit: sent
        assert client(np.zeros(250, np.float32)).shape == (250,)


def test_size_text():
    assert [size_text(n) for n in (0, 1023, 1024, 1536, (1 << 20) - 1, 64 << 20, (5 << 30) + (1 << 29))] == [
        "0 bytes", "1023 bytes", "1 KiB", "1.5 KiB", "1024 KiB", "64 MiB", "5.5 GiB"]
    assert sizes(2048, 1024) == ("2 KiB", "1 KiB") and sizes(1025, 1024) == ("1,025 bytes", "1,024 bytes")


def test_a_server_that_restricts_its_repository_api_still_tells_an_unknown_model_at_once(tmp_path):
    repository = tmp_path / "models"
    (repository / "echo" / "1").mkdir(parents=True)
    (repository / "echo" / "config.pbtxt").write_text(CONFIG.format(name="echo", delay=0))
    (repository / "echo" / "1" / "model.py").write_text(MODEL_PY)
    # The index then answers UNAVAILABLE ("This protocol is restricted"), like a server that went away.
    server = start_on_free_ports(repository, tmp_path / "log", extra_args=(
        "--grpc-restricted-protocol=model-repository:admin-key=admin-value",))
    try:
        with Client(server.command.grpc_url, "nope") as client, pytest.raises(ModelNotFoundError, match="'nope'"):
            started = time.monotonic()
            client(np.zeros(3, np.float32))
        assert time.monotonic() - started < 10, "not after the 30 s deadline"
        with Client(server.command.grpc_url, "echo") as client:
            np.testing.assert_array_equal(client(np.zeros(2, np.float32)), [1, 1])
    finally:
        server.stop()
