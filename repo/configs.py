"""Model configs built from a signature and options, as Triton's ModelConfig message."""

from __future__ import annotations

import enum

from tritonclient.grpc import model_config_pb2 as mc

from orinkit.formats.dtypes import dtype
from orinkit.repo.errors import SignatureError
from orinkit.repo.options import ModelOptions, SequenceBatching
from orinkit.repo.signature import Signature, TensorSpec

RUNTIME_PARAMETER = "ORINKIT_RUNTIME"


class Runtime(enum.Enum):
    """How a model runs in Triton; the value is the name users pass (``--runtime``)."""

    TENSORRT_PLAN = "tensorrt_plan"
    ONNXRUNTIME = "onnxruntime_onnx"
    PYTHON_ONNXRUNTIME = "python-onnxruntime"  # an ONNX model run by onnxruntime inside the Python backend
    PYTORCH = "pytorch_libtorch"
    PYTHON_TORCHSCRIPT = "python-torchscript"  # a TorchScript model run by torch inside the Python backend
    PYTHON = "python"
    ONEFLOW = "oneflow"

    @property
    def platform(self) -> str | None:
        return self.value if self in (Runtime.TENSORRT_PLAN, Runtime.ONNXRUNTIME, Runtime.PYTORCH) else None

    @property
    def backend(self) -> str:
        """The folder this runtime needs in the server's backend directory."""
        return {
            Runtime.TENSORRT_PLAN: "tensorrt",
            Runtime.ONNXRUNTIME: "onnxruntime",
            Runtime.PYTORCH: "pytorch",
            Runtime.ONEFLOW: "oneflow",
        }.get(self, "python")

    @property
    def model_file(self) -> str:
        """The file (or folder, for OneFlow) Triton looks for in a version folder."""
        return {
            Runtime.TENSORRT_PLAN: "model.plan",
            Runtime.ONNXRUNTIME: "model.onnx",
            Runtime.PYTORCH: "model.pt",
            Runtime.ONEFLOW: "model",
        }.get(self, "model.py")

    @property
    def runs_on_cpu_only(self) -> bool:
        return self in (Runtime.PYTHON, Runtime.PYTHON_ONNXRUNTIME, Runtime.PYTHON_TORCHSCRIPT)

    @property
    def runner(self) -> str | None:
        """The shipped Python-backend model that runs this runtime's file, for the runtimes that need one."""
        return {Runtime.PYTHON_ONNXRUNTIME: "onnxruntime_runner",
                Runtime.PYTHON_TORCHSCRIPT: "torchscript_runner"}.get(self)


def runtime_of(config: mc.ModelConfig) -> Runtime | None:
    """The runtime a parsed config declares (orinkit's marker first: an ONNX model behind the Python backend)."""
    marker = config.parameters.get(RUNTIME_PARAMETER)
    if marker is not None and marker.string_value:
        try:
            return Runtime(marker.string_value)
        except ValueError:
            return None
    for runtime in Runtime:
        if runtime.platform and config.platform == runtime.platform:
            return runtime
    backend = config.backend or {"tensorrt_plan": "tensorrt", "onnxruntime_onnx": "onnxruntime",
                                 "pytorch_libtorch": "pytorch"}.get(config.platform, "")
    return {"tensorrt": Runtime.TENSORRT_PLAN, "onnxruntime": Runtime.ONNXRUNTIME, "pytorch": Runtime.PYTORCH,
            "python": Runtime.PYTHON, "oneflow": Runtime.ONEFLOW}.get(backend)


def _tensor(message, spec: TensorSpec) -> None:
    message.name = spec.name
    message.data_type = mc.DataType.Value(dtype(spec.dtype).config_name)
    if spec.dims:
        message.dims.extend(spec.dims)
    else:
        # Triton wants at least one dim: a scalar travels as [1] and is reshaped to [] for the model.
        message.dims.append(1)
        message.reshape.SetInParent()


def tensor_specs(tensors) -> tuple[TensorSpec, ...]:
    """Config tensors as specs (a scalar reshaped from [1] is a scalar again)."""
    return tuple(
        TensorSpec(t.name, mc.DataType.Name(t.data_type),
                   () if t.HasField("reshape") and not t.reshape.shape else tuple(t.dims))
        for t in tensors
    )


def signature_of(config: mc.ModelConfig) -> Signature:
    return Signature(tensor_specs(config.input), tensor_specs(config.output), config.max_batch_size)


def build_config(name: str, runtime: Runtime, signature: Signature, options: ModelOptions) -> mc.ModelConfig:
    if options.tensorrt_fp16 and runtime is not Runtime.ONNXRUNTIME:
        raise SignatureError(
            f"the TensorRT FP16 accelerator applies to onnxruntime_onnx models, not {runtime.value}",
            hint="drop --tensorrt-fp16, or place the ONNX model with --runtime onnxruntime_onnx",
        )
    if options.execution_env and runtime.backend != "python":
        raise SignatureError(
            f"an execution environment applies to Python-backend models, not {runtime.value}",
            hint="drop --execution-env",
        )
    if options.decoupled and runtime.backend != "python":
        raise SignatureError(
            f"decoupled responses need a model that sends them itself (a Python model), not {runtime.value}",
            hint="drop --decoupled",
        )
    if options.sequence is not None:
        clash = set(options.sequence.control_names) & {s.name for s in signature.inputs}
        if clash:
            raise SignatureError(
                f"sequence control tensors {sorted(clash)} are also declared as inputs",
                hint="leave them out of --input: the sequence batcher supplies them",
            )
    if options.dynamic_batching and signature.max_batch_size == 0:
        raise SignatureError(
            "dynamic batching needs a model that batches (max_batch_size > 0)",
            hint="export with a dynamic batch axis, or drop --dynamic-batching",
        )
    if any(size > signature.max_batch_size for size in options.preferred_batch_sizes):
        raise SignatureError(
            f"preferred batch sizes {list(options.preferred_batch_sizes)} exceed max_batch_size "
            f"{signature.max_batch_size}",
            hint="keep them at or below max_batch_size",
        )
    config = mc.ModelConfig(name=name, max_batch_size=signature.max_batch_size)
    if runtime.platform:
        config.platform = runtime.platform
    else:
        config.backend = runtime.backend
    if runtime.runner is not None:
        config.parameters[RUNTIME_PARAMETER].string_value = runtime.value
    for spec in signature.inputs:
        _tensor(config.input.add(), spec)
    for spec in signature.outputs:
        _tensor(config.output.add(), spec)

    kind = options.instance_kind
    if kind == "auto" and runtime.runs_on_cpu_only:
        kind = "KIND_CPU"
    if kind != "auto" or options.instance_count != 1:
        group = config.instance_group.add(count=options.instance_count)
        if kind != "auto":
            group.kind = mc.ModelInstanceGroup.Kind.Value(kind)

    if options.dynamic_batching:
        config.dynamic_batching.SetInParent()
        config.dynamic_batching.preferred_batch_size.extend(options.preferred_batch_sizes)
        config.dynamic_batching.max_queue_delay_microseconds = options.max_queue_delay_us

    if options.decoupled:
        config.model_transaction_policy.decoupled = True
    if options.sequence is not None:
        _sequence_batching(config.sequence_batching, options.sequence)

    policy = options.version_policy
    if policy is not None:
        if policy.kind == "latest":
            config.version_policy.latest.num_versions = policy.latest
        elif policy.kind == "all":
            config.version_policy.all.SetInParent()
        else:
            config.version_policy.specific.versions.extend(policy.versions)

    if options.warmup:
        warmup = config.model_warmup.add(name="orinkit_zeros", batch_size=1)
        for spec in signature.inputs:
            sample = warmup.inputs[spec.name]
            sample.data_type = mc.DataType.Value(dtype(spec.dtype).config_name)
            sample.dims.extend(max(d, 1) for d in spec.dims or (1,))
            sample.zero_data = True

    if options.tensorrt_fp16:
        accelerator = config.optimization.execution_accelerators.gpu_execution_accelerator.add(name="tensorrt")
        accelerator.parameters["precision_mode"] = "FP16"
    if options.execution_env:
        config.parameters["EXECUTION_ENV_PATH"].string_value = options.execution_env
    for key, value in options.parameters:
        config.parameters[key].string_value = value
    return config


def _sequence_batching(batching: mc.ModelSequenceBatching, sequence: SequenceBatching) -> None:
    batching.max_sequence_idle_microseconds = sequence.max_idle_us
    if sequence.strategy == "direct":
        batching.direct.SetInParent()
    else:
        batching.oldest.SetInParent()
    Control = mc.ModelSequenceBatching.Control
    for name, kind in ((sequence.start, Control.CONTROL_SEQUENCE_START), (sequence.end, Control.CONTROL_SEQUENCE_END),
                       (sequence.ready, Control.CONTROL_SEQUENCE_READY)):
        if name:
            control = batching.control_input.add(name=name).control.add(kind=kind)
            control.int32_false_true.extend([0, 1])
    if sequence.correlation_id:
        control = batching.control_input.add(name=sequence.correlation_id).control.add(
            kind=Control.CONTROL_SEQUENCE_CORRID)
        control.data_type = mc.DataType.Value(f"TYPE_{sequence.correlation_type}")
