"""edge-repo add and its library: configs derived from real artifacts, for every kind a repository holds."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import DATA
from torch_models import Affine, TinyClassifier, export
from tritonclient.grpc import model_config_pb2 as mc

from orinkit.cli.repo import main
from orinkit.formats import EngineManifest, FormatError, ProfileShape, TensorSpec, write_manifest
from orinkit.repo.add import add_model
from orinkit.repo.artifacts import onnx_signature
from orinkit.repo.configs import Runtime
from orinkit.repo.errors import ConfigParseError, ModelExistsError, SignatureError, UnsupportedArtifactError
from orinkit.repo.options import ModelOptions, SequenceBatching, VersionPolicy
from orinkit.repo.pbtxt import format_config, parse_config, read_config


@pytest.fixture(scope="module")
def classifier_onnx(tmp_path_factory):
    return export(TinyClassifier(), torch.randn(1, 3, 32, 32), tmp_path_factory.mktemp("onnx") / "classifier.onnx",
                  output_name="logits")


@pytest.fixture(scope="module")
def static_onnx(tmp_path_factory):
    return export(Affine(2.0), torch.randn(1, 4), tmp_path_factory.mktemp("onnx") / "static.onnx",
                  dynamic_batch=False)


def _leftovers(path):
    return [p.name for p in path.parent.iterdir() if "staging" in p.name or p.name.endswith(".tmp")]


@pytest.mark.parametrize("config_path", sorted(DATA.glob("*/*/config.pbtxt")), ids=lambda p: p.parent.name)
def test_reading_then_writing_a_config_is_lossless(config_path):
    config = read_config(config_path)
    text = format_config(config)
    assert parse_config(text) == config
    assert format_config(parse_config(text)) == text


def test_a_config_the_schema_rejects_names_the_line():
    with pytest.raises(ConfigParseError, match=r"2:17 .*Couldn't parse integer") as info:
        parse_config('name: "x"\nmax_batch_size: "eight"\n')
    assert info.value.exit_code == 4


def test_onnx_signature_from_a_torch_export(classifier_onnx, static_onnx):
    batched = onnx_signature(classifier_onnx)
    assert batched.max_batch_size == 8
    assert batched.inputs == (TensorSpec("input", "FP32", (3, 32, 32)),)
    assert batched.outputs == (TensorSpec("logits", "FP32", (10,)),)
    assert onnx_signature(classifier_onnx, max_batch_size=0).inputs[0].dims == (-1, 3, 32, 32)
    fixed = onnx_signature(static_onnx)
    assert fixed.max_batch_size == 0 and fixed.inputs[0].dims == (1, 4)
    with pytest.raises(SignatureError, match="fixed one"):
        onnx_signature(static_onnx, max_batch_size=4)


def test_onnx_as_python_onnxruntime_here(classifier_onnx, tmp_path):
    placed = add_model(tmp_path / "models", classifier_onnx, options=ModelOptions(dynamic_batching=True))
    assert placed.runtime is Runtime.PYTHON_ONNXRUNTIME
    assert "no onnxruntime backend" in placed.note and "onnxruntime_onnx" in placed.note
    version = tmp_path / "models" / "classifier" / "1"
    assert sorted(p.name for p in version.iterdir()) == ["model.onnx", "model.py"]
    config = read_config(tmp_path / "models" / "classifier" / "config.pbtxt")
    assert config == placed.config
    assert config.backend == "python" and config.max_batch_size == 8
    assert config.instance_group[0].kind == config.instance_group[0].KIND_CPU
    assert list(config.input[0].dims) == [3, 32, 32] and list(config.output[0].dims) == [10]
    assert config.parameters["ORINKIT_RUNTIME"].string_value == "python-onnxruntime"
    assert config.HasField("dynamic_batching")
    assert _leftovers(tmp_path / "models" / "x") == []


def test_onnx_as_onnxruntime_onnx_with_the_tensorrt_accelerator(classifier_onnx, tmp_path):
    placed = add_model(tmp_path, classifier_onnx, name="det", runtime="onnxruntime_onnx",
                       options=ModelOptions(tensorrt_fp16=True, instance_kind="KIND_GPU", instance_count=2))
    config = placed.config
    assert config.platform == "onnxruntime_onnx" and (tmp_path / "det" / "1" / "model.onnx").is_file()
    accelerator = config.optimization.execution_accelerators.gpu_execution_accelerator[0]
    assert accelerator.name == "tensorrt" and accelerator.parameters["precision_mode"] == "FP16"
    assert config.instance_group[0].count == 2


def _stand_in_plan(folder, *, max_batch=4):
    """A stand-in for TensorRT's output (no TensorRT here): placeholder plan bytes and a real manifest."""
    plan = folder / "lane.plan"
    plan.write_bytes(b"stand-in plan bytes: no TensorRT on this machine")
    write_manifest(plan, EngineManifest(
        inputs=(TensorSpec("input", "FP16", (-1, 3, 360, 640)),),
        outputs=(TensorSpec("proposals", "FP32", (-1, 2784, 77)),),
        profiles=({"input": ProfileShape((1, 3, 360, 640), (1, 3, 360, 640), (max_batch, 3, 360, 640))},),
        precision="fp16",
    ))
    return plan


def test_plan_config_from_its_manifest(tmp_path):
    plan = _stand_in_plan(tmp_path)
    placed = add_model(tmp_path / "models", plan)
    config = placed.config
    assert config.platform == "tensorrt_plan"
    assert config.max_batch_size == 4, "capped by the profile's max batch"
    assert list(config.input[0].dims) == [3, 360, 640] and list(config.output[0].dims) == [2784, 77]
    assert config.input[0].data_type == mc.TYPE_FP16
    version = tmp_path / "models" / "lane" / "1"
    assert sorted(p.name for p in version.iterdir()) == ["model.plan", "model.plan.manifest.json"]
    with pytest.raises(SignatureError, match="exceeds the engine's profile maximum 4"):
        add_model(tmp_path / "other", plan, options=ModelOptions(max_batch_size=16))


def test_plan_without_manifest_needs_the_device(tmp_path):
    plan = tmp_path / "bare.plan"
    plan.write_bytes(b"stand-in plan bytes")
    with pytest.raises(Exception, match="has no manifest"):
        add_model(tmp_path / "models", plan)
    assert not (tmp_path / "models" / "bare").exists()


def test_torchscript_inputs_declared_outputs_found_by_running_it(tmp_path):
    path = tmp_path / "affine.pt"
    torch.jit.save(torch.jit.script(Affine(3.0)), str(path))
    placed = add_model(tmp_path / "models", path, runtime="pytorch_libtorch",
                       inputs=[TensorSpec("input__0", "FP32", (4,))], options=ModelOptions(max_batch_size=4))
    config = placed.config
    assert config.platform == "pytorch_libtorch" and config.max_batch_size == 4
    assert [(t.name, list(t.dims)) for t in config.input] == [("input__0", [4])]
    assert [(t.name, list(t.dims)) for t in config.output] == [("output__0", [4])]
    assert (tmp_path / "models" / "affine" / "1" / "model.pt").is_file()


def test_adding_a_torchscript_file_prints_no_torch_warning(tmp_path):
    import warnings

    path = tmp_path / "affine.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # saving is the user's own torch call, not orinkit's
        torch.jit.save(torch.jit.trace(Affine(3.0), torch.zeros(1, 4)), str(path))
    with warnings.catch_warnings(record=True) as shown:
        # Python's own defaults, as edge-repo run from a shell shows warnings (pytest's capture would hide them).
        warnings.resetwarnings()
        for hidden in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", hidden)
        result = CliRunner().invoke(main, ["add", str(path), "--repo", str(tmp_path / "models"), "--create",
                                           "--input", "input__0:FP32:4", "--max-batch-size", "4"])
    assert result.exit_code == 0, result.output
    assert "Warning" not in result.output
    assert [f"{w.category.__name__}: {w.message}" for w in shown] == []


def test_python_model_with_declared_io_and_a_packed_environment(tmp_path):
    placed = add_model(
        tmp_path / "models", DATA / "repository" / "add_sub" / "1" / "model.py", name="add_sub",
        inputs=[TensorSpec.parse("INPUT0:FP32:4"), TensorSpec.parse("INPUT1:FP32:4")],
        outputs=[TensorSpec.parse("OUTPUT0:FP32:4"), TensorSpec.parse("OUTPUT1:FP32:4")],
        options=ModelOptions(max_batch_size=8, execution_env="$$TRITON_MODEL_DIRECTORY/env.tar.gz",
                             version_policy=VersionPolicy.parse("latest:2"), warmup=True),
    )
    config = placed.config
    assert config.backend == "python"
    assert config.instance_group[0].kind == config.instance_group[0].KIND_CPU
    assert config.parameters["EXECUTION_ENV_PATH"].string_value == "$$TRITON_MODEL_DIRECTORY/env.tar.gz"
    assert config.version_policy.latest.num_versions == 2
    warm = config.model_warmup[0]
    assert warm.batch_size == 1 and warm.inputs["INPUT0"].zero_data and list(warm.inputs["INPUT0"].dims) == [4]
    with pytest.raises(SignatureError, match="declares its inputs and outputs"):
        add_model(tmp_path / "again", DATA / "repository" / "add_sub" / "1" / "model.py", name="x")


def test_oneflow_saved_model_folder(tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "model.meta").write_text("stand-in OneFlow graph: OneFlow is not installable here")
    placed = add_model(tmp_path / "models", saved, name="of", runtime="oneflow",
                       inputs=[TensorSpec.parse("x:FP32:3x224x224")], outputs=[TensorSpec.parse("y:FP32:1000")])
    assert placed.config.backend == "oneflow"
    assert (tmp_path / "models" / "of" / "1" / "model" / "model.meta").is_file()
    with pytest.raises(UnsupportedArtifactError, match="--runtime oneflow"):
        add_model(tmp_path / "models", saved, name="of2")


def test_version_policies_and_batching_options(classifier_onnx, tmp_path):
    options = ModelOptions(dynamic_batching=True, preferred_batch_sizes=(2, 4), max_queue_delay_us=500,
                           version_policy=VersionPolicy.parse("specific:1,3"))
    config = add_model(tmp_path, classifier_onnx, runtime="python-onnxruntime", options=options).config
    assert list(config.dynamic_batching.preferred_batch_size) == [2, 4]
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    assert list(config.version_policy.specific.versions) == [1, 3]
    assert VersionPolicy.parse("all").served([1, 2, 3]) == [1, 2, 3]
    assert VersionPolicy.parse("latest:2").served([1, 2, 3]) == [2, 3]



def test_decoupled_and_sequence_options_write_triton_s_schedulers(tmp_path):
    running_sum = DATA / "client_models" / "running_sum.py"
    runner = CliRunner()
    result = runner.invoke(main, ["add", str(running_sum), "--repo", str(tmp_path), "--create", "--input",
                                  "X:INT32:1", "--output", "SUM:INT32:1", "--output", "STEP:INT32:1",
                                  "--max-batch-size", "4", "--sequence", "--sequence-strategy", "oldest",
                                  "--correlation-type", "STRING"])
    assert result.exit_code == 0, result.output
    config = read_config(tmp_path / "running_sum" / "config.pbtxt")
    assert config.WhichOneof("scheduling_choice") == "sequence_batching"
    batching = config.sequence_batching
    assert batching.WhichOneof("strategy_choice") == "oldest" and batching.max_sequence_idle_microseconds == 10**7
    controls = {c.name: c.control[0] for c in batching.control_input}
    assert sorted(controls) == ["CORRID", "END", "START"]
    assert list(controls["START"].int32_false_true) == [0, 1] and controls["CORRID"].data_type == mc.TYPE_STRING
    count_stream = DATA / "client_models" / "count_stream.py"
    result = runner.invoke(main, ["add", str(count_stream), "--repo", str(tmp_path), "--input", "N:INT32:1",
                                  "--input", "DELAY_MS:INT32:1", "--output", "VALUE:INT32:1", "--decoupled"])
    assert result.exit_code == 0, result.output
    assert read_config(tmp_path / "count_stream" / "config.pbtxt").model_transaction_policy.decoupled
    stray = runner.invoke(main, ["add", str(count_stream), "--repo", str(tmp_path), "--name", "c2", "--input",
                                 "N:INT32:1", "--output", "VALUE:INT32:1", "--sequence-idle-us", "5"])
    assert stray.exit_code == 2 and "only apply with --sequence" in stray.output


@pytest.mark.parametrize("options, text", [
    (dict(decoupled=True), "decoupled responses need a model that sends them itself"),
    (dict(sequence=SequenceBatching(), dynamic_batching=True), "either a sequence batcher or dynamic batching"),
])
def test_scheduler_options_that_do_not_apply_are_refused(classifier_onnx, tmp_path, options, text):
    with pytest.raises(SignatureError, match=text):
        add_model(tmp_path / "models", classifier_onnx, runtime="onnxruntime_onnx", options=ModelOptions(**options))


def test_sequence_controls_are_not_inputs(tmp_path):
    with pytest.raises(SignatureError, match=r"control tensors \['START'\] are also declared as inputs"):
        add_model(tmp_path, DATA / "client_models" / "running_sum.py", inputs=[TensorSpec.parse("X:INT32:1"),
                  TensorSpec.parse("START:INT32:1")], outputs=[TensorSpec.parse("SUM:INT32:1")],
                  options=ModelOptions(max_batch_size=4, sequence=SequenceBatching()))
    with pytest.raises(SignatureError, match="repeat a name"):
        SequenceBatching(start="CORRID")


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        ({"runtime": "tensorrt_plan"}, UnsupportedArtifactError, "cannot be placed as tensorrt_plan"),
        ({"options": ModelOptions(tensorrt_fp16=True), "runtime": "python-onnxruntime"}, SignatureError,
         "applies to onnxruntime_onnx"),
        ({"options": ModelOptions(dynamic_batching=True, preferred_batch_sizes=(16,))}, SignatureError,
         "exceed max_batch_size 8"),
        ({"name": ".hidden"}, Exception, "cannot be a folder Triton loads"),
    ],
)
def test_bad_requests_are_refused_and_nothing_is_written(classifier_onnx, tmp_path, kwargs, error, text):
    with pytest.raises(error, match=text):
        add_model(tmp_path / "models", classifier_onnx, **kwargs)
    assert not (tmp_path / "models").exists() or list((tmp_path / "models").iterdir()) == []
    assert [p.name for p in tmp_path.iterdir() if "staging" in p.name] == []


def test_an_existing_model_is_never_overwritten(classifier_onnx, tmp_path):
    add_model(tmp_path, classifier_onnx)
    before = (tmp_path / "classifier" / "config.pbtxt").read_text()
    with pytest.raises(ModelExistsError, match="edge-repo deploy classifier"):
        add_model(tmp_path, classifier_onnx, options=ModelOptions(max_batch_size=2))
    assert (tmp_path / "classifier" / "config.pbtxt").read_text() == before


def test_a_failure_midway_leaves_no_model_and_no_staging(classifier_onnx, tmp_path):
    with pytest.raises(Exception, match="does not exist"):
        add_model(tmp_path / "models", classifier_onnx, extra_files=[tmp_path / "missing.txt"])
    assert list(tmp_path.iterdir()) == [], "neither the model nor the repository its add started is left"


def test_cli_add_prints_the_runtime_choice_and_errors_exit_4(classifier_onnx, tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["add", str(classifier_onnx), "--repo", str(tmp_path), "--dynamic-batching",
                                  "--preferred-batch-size", "4", "--version-policy", "latest:1"])
    assert result.exit_code == 0, result.output
    assert "as python-onnxruntime" in result.output and "runtime: the server's backends" in result.output
    again = runner.invoke(main, ["add", str(classifier_onnx), "--repo", str(tmp_path)])
    assert again.exit_code == 4 and "already exists" in again.output
    bad = runner.invoke(main, ["add", str(classifier_onnx), "--repo", str(tmp_path), "--name", "b",
                               "--version-policy", "newest"])
    assert bad.exit_code == 4 and "version policy 'newest' is not understood" in bad.output
    bad_spec = runner.invoke(main, ["add", str(DATA / "repository" / "add_sub" / "1" / "model.py"), "--repo",
                                    str(tmp_path), "--name", "p", "--input", "x:FP32", "--output", "y:FP32:4"])
    assert bad_spec.exit_code == 4 and "is not NAME:DTYPE:DIMS" in bad_spec.output


def test_signature_specs_parse_and_refuse():
    assert TensorSpec.parse("image:FP16:3x360x640") == TensorSpec("image", "FP16", (3, 360, 640))
    assert TensorSpec.parse("n:INT64:scalar").dims == ()
    assert TensorSpec.parse("t:BYTES:-1").dims == (-1,)
    with pytest.raises(FormatError, match="unknown dtype 'FP8'"):
        TensorSpec.parse("x:FP8:1")
    with pytest.raises(FormatError, match="dims"):
        TensorSpec("x", "FP32", (0,))
    assert np.dtype(np.float16).name == "float16"


def test_cli_parameters_reach_the_config(tmp_path):
    runner = CliRunner()
    args = ["add", str(DATA / "repository" / "add_sub" / "1" / "model.py"), "--repo", str(tmp_path), "--name", "p",
            "--input", "x:FP32:4", "--output", "y:FP32:4", "--parameter", "top_k=4", "--parameter", "mode=fast"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    config = read_config(tmp_path / "p" / "config.pbtxt")
    assert {k: v.string_value for k, v in config.parameters.items()} == {"top_k": "4", "mode": "fast"}
    bad = runner.invoke(main, [*args[:-4], "--name", "q", "--parameter", "novalue"])
    assert bad.exit_code == 4 and "is not KEY=VALUE" in bad.output
