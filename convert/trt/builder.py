"""ONNX → serialized TensorRT engine (a plan), on TensorRT 8.5/8.6, 10.x and 11.x.

Only the tensor-name API is used, so one code path serves every generation; the differences (network flags,
how FP16 is asked for) are decided from :func:`~orinkit.convert.trt.generation.generation`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from orinkit.convert.errors import ConvertError, DlaError, EngineBuildError, InputModelError, NmsError
from orinkit.convert.shapes import InputProfile, Shape
from orinkit.convert.trt.generation import DLA_HINT, dla_unavailable, generation
from orinkit.convert.trt.int8 import Int8Sources, cache_calibrator, dla_cache, int8_route, network_flags
from orinkit.convert.trt.log import capturing_logger
from orinkit.convert.trt.memory import available_memory
from orinkit.convert.trt.nms import NmsSpec, add_nms
from orinkit.convert.trt.precision import onnx_node_names, pin_fp32, pin_precision
from orinkit.core.files import atomic_write_bytes
from orinkit.core.optional import require

MIB = 1 << 20
WORKSPACE_CAP = 4 << 30
# How an out-of-memory build shows itself: Jetson builds often only say that no tactic fitted.
OOM_MARKERS = ("out of memory", "insufficient", "could not find any implementation", "cudaerrormemoryallocation",
               "outofmemory", "killed")


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    profiles: Mapping[str, InputProfile]  # consulted only for inputs that are dynamic in the parsed network
    fp16: bool = True
    keep_fp32: tuple[str, ...] = ()  # ONNX node names
    workspace: int | None = None  # bytes; None sizes it from free memory
    min_workspace: int = 64 << 20
    timing_cache: Path | None = None
    dla_core: int | None = None
    int8: Int8Sources | None = None  # the INT8 artifacts (orinkit.convert.int8.stage) when building INT8
    nms: NmsSpec | None = None  # NMS into the engine (orinkit.convert.trt.nms); its outputs replace the head's

    def __post_init__(self) -> None:
        if self.min_workspace <= 0 or (self.workspace is not None and self.workspace <= 0):
            raise ConvertError("workspace sizes must be positive", hint="give the workspace in bytes, e.g. 1073741824")
        if self.dla_core is not None and self.dla_core < 0:
            raise DlaError(f"DLA core {self.dla_core} does not exist", hint="DLA cores are numbered from 0")
        if self.nms is not None and self.int8 is not None and self.dla_core is not None:
            raise NmsError("NMS cannot go into a DLA INT8 engine: NMS does not run on the DLA, and the DLA INT8 "
                           "build calibrates from a cache with no ranges for the layers NMS adds",
                           hint="build INT8 for the GPU, or without NMS")


@dataclass(frozen=True)
class Attempt:
    workspace: int  # bytes
    ok: bool
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    plan: bytes
    generation: int
    tensorrt_version: str
    workspace: int
    attempts: tuple[Attempt, ...]
    fp16_mode: str  # "flag", "graph" or "off"
    int8_mode: str = "off"  # "strongly-typed", "explicit-flag", "calibration-cache" (orinkit.convert.trt.int8)
    fp32_layers: tuple[str, ...] = ()
    unmatched_fp32_nodes: tuple[str, ...] = ()
    profiles: dict[str, tuple[Shape, Shape, Shape]] = field(default_factory=dict)
    source: Path | None = None  # the ONNX file TensorRT parsed
    nms: dict | None = None  # how NMS went into the engine (method, thresholds, outputs); None without


def build_engine(onnx_path: Path, options: BuildOptions, *, fp16_onnx_path: Path | None = None,
                 free_memory: Callable[[], int] | None = None,
                 progress: Callable[[str], None] = lambda m: None) -> BuildResult:
    """Build a plan from ``onnx_path`` (or, where FP16 must be in the graph, from ``fp16_onnx_path``).

    On 8.5/10 FP16 is the builder flag and ``keep_fp32`` becomes layer precision constraints; TensorRT 11 is
    strongly typed and builds the FP16 graph as it is. Out-of-memory builds are retried with half the workspace
    down to ``options.min_workspace``.
    """
    trt = require("tensorrt")
    gen = generation(trt)
    version = str(trt.__version__)
    route = None
    if options.int8 is not None:
        route = int8_route(gen, version, dla=options.dla_core is not None, fp32_onnx=Path(onnx_path),
                           sources=options.int8)
    elif options.dla_core is not None:
        _check_dla_policy(gen, version, options)
    # Strongly typed: the graph's own types decide, and TensorRT refuses precision flags.
    fp16_mode = "graph" if route is not None and route.strongly_typed else _fp16_mode(
        trt, gen, version, options, fp16_onnx_path)
    source = route.source if route is not None else Path(fp16_onnx_path if fp16_mode == "graph" else onnx_path)
    if not source.is_file():
        raise InputModelError(f"{source} does not exist", hint="export the model to ONNX first")

    logger = capturing_logger(trt)
    builder = trt.Builder(logger)
    if options.dla_core is not None and builder.num_DLA_cores <= options.dla_core:
        raise DlaError(f"DLA core {options.dla_core} asked for, but this device has {builder.num_DLA_cores} DLA cores",
                       hint="Orin AGX and NX have cores 0 and 1, Orin Nano has none: leave out --dla-core there")
    network = builder.create_network(network_flags(trt, gen, route))
    progress(f"parsing {source.name} with TensorRT {version}" + (f" (INT8: {route.mode})" if route else ""))
    parser = _parse(trt, network, logger, source, version)
    nms = None
    if options.nms is not None:
        nms = add_nms(trt, network, options.nms, logger=logger, progress=progress)

    config = builder.create_builder_config()
    fp32_layers: tuple[str, ...] = ()
    unmatched: tuple[str, ...] = ()
    if fp16_mode == "flag":
        config.set_flag(trt.BuilderFlag.FP16)
        if options.keep_fp32:
            fp32_layers, unmatched = pin_fp32(trt, network, options.keep_fp32, onnx_node_names(source))
            if fp32_layers:
                config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
            if unmatched:
                progress(f"no TensorRT layer came from the FP32 nodes {', '.join(unmatched)}")
    if route is not None and not route.strongly_typed:
        config.set_flag(trt.BuilderFlag.INT8)
        if route.mode == "calibration-cache":
            progress("DLA INT8 is implicit here: the calibration cache carries the Q/DQ graph's scales")
            config.int8_calibrator = cache_calibrator(trt, dla_cache(options.int8.opset17, version))
            if options.int8.excluded:
                pinned, _ = pin_precision(trt, network, options.int8.excluded, onnx_node_names(source), trt.float16)
                if pinned:
                    config.set_flag(trt.BuilderFlag.PREFER_PRECISION_CONSTRAINTS)
    profiles = _add_profile(builder, config, network, options.profiles)
    if options.dla_core is not None:
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = options.dla_core
        config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
    if options.timing_cache is not None:
        _load_timing_cache(config, Path(options.timing_cache), progress)

    start = _start_workspace(options, free_memory, progress)
    plan, attempts = _build(trt, builder, network, config, logger, start, options.min_workspace, version, progress)
    del parser  # only now: it owns weights that the network points at until the build copies them
    if options.timing_cache is not None:
        atomic_write_bytes(options.timing_cache, bytes(config.get_timing_cache().serialize()))
    return BuildResult(plan=plan, generation=gen, tensorrt_version=version, workspace=attempts[-1].workspace,
                       attempts=tuple(attempts), fp16_mode=fp16_mode,
                       int8_mode=route.mode if route is not None else "off", fp32_layers=fp32_layers,
                       unmatched_fp32_nodes=unmatched, profiles=profiles, source=source, nms=nms)


def _check_dla_policy(gen: int, version: str, options: BuildOptions) -> None:
    # 11.4.1+ builds the FP16 graph strongly typed for the DLA, as it does for the GPU (no precision flags there).
    reason = dla_unavailable(version)
    if reason is not None:
        raise DlaError(f"TensorRT {version} cannot build for the DLA: {reason}", hint=DLA_HINT)
    if not options.fp16:
        raise DlaError("DLA runs FP16 or INT8 layers only, and FP16 is off",
                       hint="turn FP16 on, or leave out --dla-core to build for the GPU")


def _fp16_mode(trt: ModuleType, gen: int, version: str, options: BuildOptions, fp16_onnx_path: Path | None) -> str:
    if not options.fp16:
        return "off"
    if gen < 11 and hasattr(trt.BuilderFlag, "FP16"):
        return "flag"
    if fp16_onnx_path is None:
        raise EngineBuildError(
            f"TensorRT {version} has no FP16 builder flag: the FP16 ONNX graph is required on TensorRT 11",
            hint="pass the FP16 graph (fp16_onnx_path, written by edge-convert with the kept-FP32 nodes), "
                 "or build with FP16 off",
        )
    return "graph"


def _parse(trt: ModuleType, network, logger, source: Path, version: str):
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(source)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)] or logger.errors()
        raise EngineBuildError(
            f"TensorRT {version} cannot parse {source}: " + ("; ".join(errors) or "no error reported"),
            hint="check the model with onnx.checker; an operator this TensorRT lacks needs a newer JetPack, "
                 "a different opset, or a plugin",
        )
    return parser


def _add_profile(builder, config, network, given: Mapping[str, InputProfile]) -> dict:
    profile = builder.create_optimization_profile()
    used: dict[str, tuple[Shape, Shape, Shape]] = {}
    for index in range(network.num_inputs):
        tensor = network.get_input(index)
        name, declared = tensor.name, tuple(tensor.shape)
        if -1 not in declared:
            continue
        shapes = given.get(name)
        if shapes is None:
            example = "x".join(str(d if d > 0 else 1) for d in declared)
            raise EngineBuildError(
                f"input '{name}' has dynamic axes {list(declared)} and no optimization profile",
                hint=f"pass --shapes {name}:{example} for one shape, or --min-shapes/--opt-shapes/--max-shapes "
                     "for a range",
            )
        try:
            profile.set_shape(name, shapes.min, shapes.opt, shapes.max)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise EngineBuildError(f"TensorRT rejects the shapes of '{name}': {exc}",
                                   hint=f"keep the rank {len(declared)} and min <= opt <= max") from exc
        used[name] = (tuple(shapes.min), tuple(shapes.opt), tuple(shapes.max))
    # IBuilderConfig::addOptimizationProfile returns -1 for a profile that fails isValid() (e.g. opt below min),
    # which set_shape may let through; building on would fail later with a less telling error.
    if used and config.add_optimization_profile(profile) < 0:
        shown = "; ".join(f"'{n}' min {list(s[0])}, opt {list(s[1])}, max {list(s[2])}" for n, s in used.items())
        raise EngineBuildError(f"TensorRT rejects the optimization profile ({shown})",
                               hint="give every dynamic input shapes of one rank with min <= opt <= max")
    return used


def _load_timing_cache(config, path: Path, progress: Callable[[str], None]) -> None:
    data = path.read_bytes() if path.is_file() else b""
    try:
        cache = config.create_timing_cache(data)
        if cache is not None and config.set_timing_cache(cache, ignore_mismatch=False) is not False:
            return
    except (RuntimeError, ValueError, TypeError):
        pass
    # Another TensorRT or GPU wrote it, or it is damaged: it would only slow the build down or fail it.
    progress(f"timing cache {path} does not fit this TensorRT/GPU; starting a new one")
    config.set_timing_cache(config.create_timing_cache(b""), ignore_mismatch=False)


def _start_workspace(options: BuildOptions, free_memory: Callable[[], int] | None,
                     progress: Callable[[str], None]) -> int:
    if options.workspace is not None:
        return options.workspace
    free = int((free_memory or available_memory)())
    workspace = max(options.min_workspace, min(free // 2, WORKSPACE_CAP))
    progress(f"workspace {workspace // MIB} MiB ({free // MIB} MiB free)")
    return workspace


def _build(trt: ModuleType, builder, network, config, logger, workspace: int, minimum: int, version: str,
           progress: Callable[[str], None]) -> tuple[bytes, list[Attempt]]:
    attempts: list[Attempt] = []
    while True:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace)
        logger.clear()
        raised: Exception | None = None
        try:
            plan = builder.build_serialized_network(network, config)
        except Exception as exc:  # the bindings raise plain RuntimeError, among others
            plan, raised = None, exc
        if plan is not None:
            attempts.append(Attempt(workspace, True))
            return bytes(plan), attempts
        error = _failure_text(logger, raised)
        attempts.append(Attempt(workspace, False, error))
        if not _looks_like_oom(logger, raised):
            raise EngineBuildError(f"TensorRT {version} failed to build the engine: {error}",
                                   hint="see the errors above; check the model with onnx.checker and polygraphy")
        smaller = workspace // 2
        if smaller < minimum:
            tried = "; ".join(f"{a.workspace // MIB} MiB: {a.error}" for a in attempts)
            raise EngineBuildError(
                f"TensorRT {version} ran out of memory at every workspace size tried ({tried})",
                hint="free memory (stop tritonserver and other GPU users), lower --max-shapes, or add swap; "
                     "a smaller min_workspace lets the builder try further down",
            )
        progress(f"workspace {workspace // MIB} MiB failed ({_first_oom(logger, raised)}); "
                 f"retrying with {smaller // MIB} MiB")
        workspace = smaller


def _failure_text(logger, raised: Exception | None) -> str:
    texts = logger.errors() + ([f"{type(raised).__name__}: {raised}"] if raised is not None else [])
    if not texts:
        texts = [text for _, text in logger.messages[-3:]] or ["build_serialized_network returned None"]
    return "; ".join(texts)


def _decisive(logger, raised: Exception | None) -> list[str]:
    # Jetson builds warn about tactics skipped for memory even when they fail for another reason, so warnings
    # decide only when nothing was logged as an error.
    texts = logger.errors() + ([str(raised)] if raised is not None else [])
    return texts or [text for _, text in logger.messages]


def _looks_like_oom(logger, raised: Exception | None) -> bool:
    return bool(_first_oom(logger, raised))


def _first_oom(logger, raised: Exception | None) -> str:
    for text in _decisive(logger, raised):
        if any(marker in text.lower() for marker in OOM_MARKERS):
            return text if len(text) <= 160 else text[:157] + "..."
    return ""
