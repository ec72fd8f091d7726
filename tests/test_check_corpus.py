"""edge-repo check against the real tritonserver, over a corpus of hand-written repositories
(tests/data/check_corpus/<case>/, verdicts in cases.json): for every model, check has no error finding exactly
when the server loads it READY, and both reach the verdict the manifest records (and, where the manifest says so,
name the cause: "check_says", "server_says").

One server (explicit model control) serves all cases at once, so model names are unique across cases; each model is
loaded through the repository API and its answer recorded.

Limitation: this server (Triton 2.51 from nvidia-pytriton) has only the Python backend. The ONNX, TensorRT plan and
TorchScript cases are refused by it because the backend is missing, not because of anything in the model: for them
the test requires the server's own reason (cases.json "server_says") and check's backend-missing finding. That check
accepts such models where the backend exists is tested apart, without a server (the tests after the corpus ones).
"""

from __future__ import annotations

import json
import queue
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from click.testing import CliRunner
from tritonclient.utils import InferenceServerException

from orinkit.cli.repo import main
from orinkit.repo.check import check_repository, server_defaults

CORPUS = Path(__file__).resolve().parent / "data" / "check_corpus"
CASES = json.loads((CORPUS / "cases.json").read_text())
CASES.pop("_about")
VERDICTS = ("ready", "refused")
# A Python model whose file is missing makes the server wait for ever (its stub exits during start-up).
HANG_TIMEOUT_S = 15
LOAD_TIMEOUT_S = 120


def _models(case: str) -> dict[str, str]:
    return {name: verdict for name, verdict in CASES[case].items() if verdict in VERDICTS}


def _for_model(says, name: str) -> str | None:
    """A manifest's "server_says" or "check_says": one text for every model of the case, or one per model."""
    return says.get(name) if isinstance(says, dict) else says


def _copy_case(case: str, into: Path) -> Path:
    for model in (CORPUS / case).iterdir():
        shutil.copytree(model, into / model.name)
    return into


@pytest.fixture(scope="module")
def server(triton_server_factory, tmp_path_factory):
    combined = tmp_path_factory.mktemp("corpus") / "models"
    combined.mkdir()
    names = [name for case in CASES for name in _models(case)]
    assert len(names) == len(set(names)), "model names must be unique across corpus cases"
    for case in CASES:
        _copy_case(case, combined)
    # Short exit timeout: the models whose load hangs would otherwise hold the server's stop.
    return triton_server_factory(combined, model_control_mode="explicit", exit_timeout_s=2)


def _load(url: str, name: str, timeout_s: float) -> tuple[str, str]:
    with grpcclient.InferenceServerClient(url) as client:
        try:
            client.load_model(name, client_timeout=timeout_s)
        except InferenceServerException as exc:
            return "refused", exc.message() or str(exc)
        return ("ready" if client.is_model_ready(name) else "refused"), ""


@pytest.fixture(scope="module")
def server_verdicts(server) -> dict[str, tuple[str, str]]:
    """Every corpus model loaded at once: name -> (verdict, the server's message)."""
    jobs = {name: HANG_TIMEOUT_S if CASES[case].get("hangs") else LOAD_TIMEOUT_S
            for case in CASES for name in _models(case)}
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {name: pool.submit(_load, server.command.grpc_url, name, t) for name, t in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.fixture(scope="module")
def server_setup():
    backends, python, note = server_defaults()
    assert backends is not None, note
    return backends, python


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_and_the_server_agree(case, server_verdicts, server_setup, tmp_path):
    backends, python = server_setup
    repository = _copy_case(case, tmp_path / "models")
    findings = check_repository(repository, backend_directory=backends, python=python)
    for name, expected in _models(case).items():
        errors = [str(f) for f in findings if f.model == name and f.severity == "error"]
        served, message = server_verdicts[name]
        checked = "refused" if errors else "ready"
        assert (checked, served) == (expected, expected), (
            f"case {case}, model {name}: check says {checked} {errors}, the server says {served} {message!r}, "
            f"the manifest says {expected}")
        says = _for_model(CASES[case].get("server_says"), name)
        if says:
            assert says in message, message
        if says and "unable to find backend library" in says:
            assert any("backend-missing" in f.code for f in findings if f.model == name), findings
        wanted = _for_model(CASES[case].get("check_says"), name)
        if wanted:
            assert any(wanted in e for e in errors), errors


def test_the_decoupled_model_streams(server, server_verdicts):
    assert server_verdicts["repeat_stream"][0] == "ready"
    answers: queue.Queue = queue.Queue()
    count = grpcclient.InferInput("COUNT", [1], "INT32")
    count.set_data_from_numpy(np.array([3], np.int32))
    indices = []
    with grpcclient.InferenceServerClient(server.command.grpc_url) as client:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        client.async_stream_infer("repeat_stream", [count], enable_empty_final_response=True)
        while True:
            result, error = answers.get(timeout=30)
            assert error is None, error
            response = result.get_response()
            if response.outputs:
                indices.append(int(result.as_numpy("INDEX")[0]))
            if response.parameters["triton_final_response"].bool_param:
                break
        client.stop_stream()
    assert indices == [0, 1, 2]


def test_cli_check_exit_status_on_an_accepted_and_a_refused_case(tmp_path):
    runner = CliRunner()
    accepted = runner.invoke(main, ["check", str(_copy_case("example_auto_complete_nobatch", tmp_path / "a"))])
    assert accepted.exit_code == 0, accepted.output
    assert "0 error(s), 0 warning(s), 2 note(s)" in accepted.output and "the server completes one" in accepted.output
    strict = runner.invoke(main, ["check", str(tmp_path / "a"), "--disable-auto-complete-config"])
    assert strict.exit_code == 4 and "the server completes none" in strict.output, strict.output
    refused = runner.invoke(main, ["check", str(_copy_case("broken_auto_complete_batch", tmp_path / "b"))])
    assert refused.exit_code == 4, refused.output
    assert "auto_complete_config sets 4" in refused.output


# Check-side only: what the server with every backend would accept (this one lacks onnxruntime, tensorrt, pytorch).

def _tiny_onnx(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    tensor = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 3]) for n in ("x", "y")]
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [tensor[0]], [tensor[1]])
    path.parent.mkdir(parents=True)
    onnx.save(helper.make_model(graph), path)
    return path


@pytest.fixture
def all_backends(tmp_path):
    for backend in ("python", "onnxruntime", "tensorrt", "pytorch"):
        (tmp_path / "backends" / backend).mkdir(parents=True)
    return tmp_path / "backends"


def test_model_files_the_backend_completes_are_accepted_where_the_backend_exists(tmp_path, all_backends):
    repository = tmp_path / "models"
    _tiny_onnx(repository / "onnx_plain" / "1" / "model.onnx")
    _copy_case("plan_no_config", repository)
    _copy_case("torchscript_no_config", repository)
    findings = check_repository(repository, backend_directory=all_backends)
    assert [f for f in findings if f.severity == "error"] == []
    assert {(f.code, f.model) for f in findings if f.severity == "info"} >= {
        ("config-completed", "onnx_plain"), ("io-completed", "onnx_plain"),
        ("config-completed", "plan_autocomplete"), ("config-completed", "torchscript_autocomplete")}
    # A partial config (backend only) is completed too; a declared input the model lacks is still an error.
    (repository / "onnx_plain" / "config.pbtxt").write_text('backend: "onnxruntime"\n')
    assert [f for f in check_repository(repository, backend_directory=all_backends) if f.severity == "error"] == []
    (repository / "onnx_plain" / "config.pbtxt").write_text(
        'backend: "onnxruntime"\nmax_batch_size: 4\ninput [ { name: "z", data_type: TYPE_FP32, dims: [ 3 ] } ]\n')
    codes = [f.code for f in check_repository(repository, backend_directory=all_backends) if f.severity == "error"]
    assert codes == ["io-name"]


def test_a_strict_server_needs_every_config(tmp_path):
    repository = _copy_case("example_auto_complete_nobatch", tmp_path / "models")
    assert [f.severity for f in check_repository(repository)] == ["info", "info"]
    strict = check_repository(repository, auto_complete=False)
    assert [(f.code, f.severity) for f in strict] == [("config-missing", "error")]


def test_an_ensemble_over_a_step_completed_at_load_time_is_not_guessed(tmp_path):
    repository = _copy_case("ensemble_over_python", tmp_path / "models")
    model = repository / "ens_scale" / "1" / "model.py"
    model.write_text(model.read_text().replace('config.add_input({"name": "IN", "data_type": "TYPE_FP32", '
                                                '"dims": [2]})', "config.add_input(make_input())"))
    findings = check_repository(repository)
    assert ("ensemble-unchecked", "info") in {(f.code, f.severity) for f in findings}
    assert not [f for f in findings if f.severity == "error"]
