"""edge-convert as a library: ONNX (or torch) → validated, simplified FP32 ONNX → gated FP16 → TensorRT plan.

Everything is built in a staging folder beside the output folder and renamed into place at the end, so an
interrupted or failed run leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from orinkit.convert import detection
from orinkit.convert.detection import DetectorSpec
from orinkit.convert.errors import (
    AccuracyGateError,
    ConvertError,
    Fp16GraphError,
    StaleEngineError,
    TorchExportError,
)
from orinkit.convert.facts import current_facts
from orinkit.convert.fp16.criteria import Criterion
from orinkit.convert.fp16.emulate import run
from orinkit.convert.fp16.gate import GateOptions, GateReport, judge, run_gate
from orinkit.convert.fp16.repair import to_fp16
from orinkit.convert.fp16.task_metrics import parse_metric
from orinkit.convert.int8.gate import Int8Report
from orinkit.convert.onnx_prep import PreparedModel, declared_inputs, prepare
from orinkit.convert.preflight import check_options
from orinkit.convert.samples import (
    data_samples,
    describe_default,
    input_dtypes,
    picture_preprocess,
    random_samples,
)
from orinkit.convert.shapes import InputProfile, metadata_sizes, resolve_profiles
from orinkit.convert.stages import Stage, Stages, paced
from orinkit.convert.trt.nms import check_nms_engine, check_nms_options, manifest_record, not_built_note, plan_nms
from orinkit.convert.trt.nms import recorded as nms_recorded
from orinkit.core.files import atomic_write_text, building_directory
from orinkit.core.version import __version__
from orinkit.formats.engine import describe_engine
from orinkit.formats.manifest import EngineManifest, ProfileShape, write_manifest

Progress = Callable[[str], None]
FP32_ONNX, FP16_ONNX, PLAN, REPORT = "model.onnx", "model.fp16.onnx", "model.plan", "report.json"


@dataclass(frozen=True, kw_only=True)
class ConvertOptions:
    """Every knob of a conversion; the defaults are what ``edge-convert model.onnx`` does."""

    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    min_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    opt_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    max_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    max_batch: int | None = None  # a dynamic batch axis given no shapes: 1..max_batch (default 8)
    fp16: bool = True
    criterion: Criterion = Criterion()
    metric: str | None = None  # topk[:K][@OUTPUT], mask[:THR][@OUTPUT], argmax[:AXIS][@OUTPUT], lanes, or module:fn
    detector: DetectorSpec | None = None  # --task detect [--head KIND] [--labels FILE] (orinkit.convert.detection)
    min_agreement: float | None = None  # the metric's pass mark (default 0.99)
    gate_budget: float = 60.0  # seconds for the search of FP32 nodes
    keep_fp32: tuple[str, ...] = ()  # nodes kept in FP32 whatever the gate says
    replay: bool = False  # judge keep_fp32 as it is, no search: what a stale-engine rebuild does
    samples: int = 8
    data: Path | None = None
    input_ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    simplify: bool = True
    engine: bool | None = None  # None: build where TensorRT imports
    workspace: int | None = None  # bytes; None sizes it from free memory
    timing_cache: Path | None = None
    dla_core: int | None = None
    benchmark: bool = False
    seed: int = 0
    int8: bool = False  # ModelOpt's INT8 (Q/DQ), judged by the INT8 gate on held-out samples
    calib: Path | None = None  # a folder of images or an .npz: the calibration set
    calib_method: str | None = None  # entropy or max (None: the INT8 gate tries them)
    calib_preprocess: str | None = None  # package.module:function turning a picture into the input
    int8_exclude: tuple[str, ...] = ()  # nodes kept out of INT8 whatever the gate says
    calib_sha256: str | None = None  # a replayed build: the calibration set must be the one recorded
    int8_min_share: float | None = None  # least share of Conv/MatMul/Gemm nodes in INT8 (None: 0.5; 0: any)
    nms: bool = False  # NMS into the engine of a raw-head detector (orinkit.convert.trt.nms)
    nms_conf: float | None = None  # --conf, the score threshold (default 0.25)
    nms_iou: float | None = None  # --iou (default 0.7)
    nms_max_det: int | None = None  # --max-det, boxes per image (default 300)
    nms_agnostic: bool = False  # --agnostic: boxes of any class suppress each other

    def __post_init__(self) -> None:
        from orinkit.convert.int8.options import check_int8_options

        if self.samples < 1:
            raise ConvertError(f"--samples {self.samples} is below 1", hint="use 1 or more")
        check_int8_options(self)
        check_nms_options(self)
        if not self.fp16 and not self.int8 and (self.keep_fp32 or self.gate_budget != 60.0):
            raise ConvertError("--keep-fp32 and --gate-budget shape the FP16 gate, which --no-fp16 skips",
                               hint="drop them, or convert with FP16")
        parse_metric(self.metric, self.min_agreement)  # a bad spec fails now, not after the slow stages

    def gate_options(self) -> GateOptions:
        return GateOptions(criterion=self.criterion, metric=parse_metric(self.metric, self.min_agreement),
                           budget_s=self.gate_budget, keep_fp32=tuple(self.keep_fp32), search=not self.replay)

    def int8_gate_options(self) -> GateOptions:
        return GateOptions(criterion=self.criterion, metric=parse_metric(self.metric, self.min_agreement),
                           budget_s=self.gate_budget, keep_fp32=tuple(self.int8_exclude), search=not self.replay)

    def recorded(self) -> dict:
        """What shaped the plan, for the manifest: a stale-engine rebuild replays it (see verify.rebuild_plan)."""
        return {"int8": self.int8, "calib": None if self.calib is None else str(self.calib),
                "calib_method": self.calib_method, "calib_preprocess": self.calib_preprocess,
                "int8_exclude": list(self.int8_exclude), "int8_min_share": self.int8_min_share, "fp16": self.fp16,
                "criterion": self.criterion.as_dict(), "metric": self.metric,
                "min_agreement": self.min_agreement, "samples": self.samples, "seed": self.seed,
                "input_ranges": {k: list(v) for k, v in self.input_ranges.items()},
                "data": None if self.data is None else str(self.data), "simplify": self.simplify,
                "workspace_requested": self.workspace, "dla_core": self.dla_core,
                "timing_cache": None if self.timing_cache is None else str(self.timing_cache),
                "nms": nms_recorded(self)}


@dataclass
class ConvertResult:
    output: Path
    artifacts: dict[str, Path]
    stages: list[Stage]
    prepared: PreparedModel
    profiles: dict[str, InputProfile]
    gate: GateReport | None
    keep_fp32: tuple[str, ...]
    engine_built: bool
    notes: list[str]
    engine: dict | None = None
    benchmark: dict | None = None
    options: dict = field(default_factory=dict)
    int8: Int8Report | None = None
    nms: dict | None = None  # --nms: what was asked, and how it went into the engine (or that it will on the device)

    def report(self) -> dict:
        return {
            "shapes": {n: p.describe(n) for n, p in self.profiles.items()},
            "orinkit_version": __version__,
            "output": str(self.output),
            "artifacts": {k: str(v) for k, v in self.artifacts.items()},
            "stages": [asdict(s) for s in self.stages],
            "source_sha256": self.prepared.source_sha256,
            "simplified": self.prepared.simplified,
            "profiles": {n: asdict(p) for n, p in self.profiles.items()},
            "gate": None if self.gate is None else self.gate.as_dict(),
            "keep_fp32": list(self.keep_fp32),
            "engine_built": self.engine_built,
            "engine": self.engine,
            "benchmark": self.benchmark,
            "notes": self.notes,
            "options": self.options,
            "int8": None if self.int8 is None else self.int8.as_dict(),
            "nms": self.nms,
        }


def tensorrt_available() -> bool:
    import importlib

    try:
        importlib.import_module("tensorrt")
    except ImportError:
        return False
    return True


def _sample_inputs(prepared: PreparedModel, profiles, model, options: ConvertOptions, progress: Progress,
                   head=None, notes: list[str] | None = None):
    """The gate's samples, and with --int8 the calibration set (the gate's samples are then held out of it).
    A detector (``head``) given no samples is judged on real photos prepared as it was trained."""
    dtypes = input_dtypes(model)
    inputs = {name: (dtypes[name], profiles[name].opt) for name in prepared.inputs}
    if options.int8:
        from orinkit.convert.int8.calibration import load_calibration

        held_out = None if options.data is None else data_samples(options.data, inputs, head, progress, notes)
        calibration = load_calibration(options.calib, inputs, held_out=held_out, progress=progress,
                                       preprocess=picture_preprocess(options.calib_preprocess, head))
        if head is not None and head.input_name in inputs and options.calib_preprocess is None \
                and Path(options.calib).is_dir():
            note = (f"the --calib pictures are {detection.describe_preparation(head, inputs[head.input_name][1])}"
                    f" (as a {head.kind} model was trained; another scale: --calib-preprocess or an .npz)")
            progress(f"  {note}")
            if notes is not None:
                notes.append(note)
        if options.calib_sha256 is not None and calibration.sha256 != options.calib_sha256:
            raise StaleEngineError(f"the calibration set {options.calib} is not the one the plan was built with "
                                   f"(sha256 {calibration.sha256[:12]}… instead of {options.calib_sha256[:12]}…)",
                                   hint="restore the recorded calibration data, or convert again with edge-convert")
        if calibration.note:
            progress(f"  {calibration.note}")
        return calibration.held_out, calibration
    if options.data is not None:
        return data_samples(options.data, inputs, head, progress, notes), None
    if head is not None and not options.input_ranges:
        samples, note = detection.samples(head, inputs, options.samples)
        progress(f"  {note}")
        if notes is not None:
            notes.append(note)
        return samples, None
    for name, (dtype, shape) in inputs.items():
        note = None if name in options.input_ranges else describe_default(name, dtype, shape)
        if note:  # random integers or booleans rarely mean what the model expects (a sample rate, a length)
            progress(f"  {note}")
    return random_samples(inputs, options.samples, ranges=options.input_ranges, seed=options.seed), None


def _profiles_for(options: ConvertOptions, model=None):
    """name → declared shape ↦ the profiles; ``model`` (the source, whose metadata onnxsim may not keep) gives
    the sizes it states itself (Ultralytics' imgsz) for dynamic axes no option names."""
    def resolve(inputs):
        defaults = metadata_sizes(model, inputs) if model is not None else {}
        return resolve_profiles(inputs, shapes=options.shapes, min_shapes=options.min_shapes,
                                opt_shapes=options.opt_shapes, max_shapes=options.max_shapes,
                                max_batch=options.max_batch, defaults=defaults)

    return resolve


def _load_source(source: Path):
    """The source model's graph without its weights, for its inputs and metadata; None when unreadable."""
    import onnx

    try:
        return onnx.load(str(source), load_external_data=False)
    except Exception:  # noqa: BLE001 - prepare() reports an unreadable model with its own typed error
        return None


def _announce_shapes(model, options: ConvertOptions, progress: Progress) -> None:
    """The first line: the shapes the engine will take, defaults included (as trtexec prints its batch)."""
    if model is None or not model.graph.input:
        return
    profiles = _profiles_for(options, model)(declared_inputs(model))
    progress("shapes: " + "; ".join(p.describe(n) for n, p in profiles.items()))


def convert_onnx(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    options: ConvertOptions = ConvertOptions(),
    *,
    force: bool = False,
    progress: Progress = lambda message: None,
    earlier_stages: Sequence[Stage] = (),
) -> ConvertResult:
    """Convert the ONNX model at ``source`` into the folder ``output`` (created whole, or not at all)."""
    import onnx

    source, output = Path(source), Path(output)
    if output.exists() and not force:
        raise ConvertError(f"{output} already exists", hint="replace it with force=True (edge-convert --force), "
                           "or choose another output folder")
    build = tensorrt_available() if options.engine is None else options.engine
    engine_only = [flag for flag, given in (("--benchmark", options.benchmark), ("--dla-core", options.dla_core is not
                   None), ("--workspace", options.workspace is not None), ("--timing-cache", options.timing_cache
                   is not None)) if given]
    if engine_only and not build:
        why = "TensorRT is not installed here" if options.engine is None else "no engine is built (engine=False)"
        raise ConvertError(f"{', '.join(engine_only)} shape{'s' if len(engine_only) == 1 else ''} the TensorRT "
                           f"engine, and {why}", hint="drop them here, and run edge-convert with them on the device")
    gate_options = options.gate_options() if options.fp16 else None
    source_model = _load_source(source)
    # Before any work: --nms on a model that is no raw-head detector is refused in one line (an unreadable model is
    # left to prepare(), which says what is wrong with it).
    nms = plan_nms(source, options, _profiles_for(options, source_model)(declared_inputs(source_model))) \
        if options.nms and source_model is not None else None
    _announce_shapes(source_model, options, progress)
    stages = Stages(progress, len(earlier_stages) + 2 + (2 if options.fp16 else 0) + (1 if build else 0)
                    + int(options.benchmark) + int(options.int8), tuple(earlier_stages))
    notes: list[str] = []
    with building_directory(output) as staging:
        prepared = stages.run("validate and simplify the ONNX model", lambda say: prepare(
            source, staging / FP32_ONNX, simplify_model=options.simplify, progress=say,
            check=lambda loaded: check_options(loaded, options, _profiles_for(options, loaded))))
        if prepared.note:
            notes.append(prepared.note)
            progress(prepared.note)
        model = onnx.load(str(prepared.path))
        profiles = _profiles_for(options, source_model)(prepared.inputs)
        head = detection.recognize(prepared.path)
        samples, calibration = stages.run(
            "make the gate's input samples" + (" and the calibration set" if options.int8 else ""),
            lambda say: _sample_inputs(prepared, profiles, model, options,
                                       say if options.fp16 or build or options.int8 else lambda message: None,
                                       head=head, notes=notes))
        artifacts = {"fp32_onnx": output / FP32_ONNX}
        gate, keep = None, ()
        if options.fp16:
            gate = stages.run("FP16 accuracy gate (FP32 onnxruntime vs FP16 emulation)",
                              lambda say: run_gate(prepared.path, samples, gate_options, progress=say))
            _describe_gate(gate, progress)
            if not gate.passed:  # only a replay, which may not search, can end here
                raise AccuracyGateError(
                    f"the recorded FP32 nodes no longer make FP16 pass the {gate.decided_by}: "
                    + "; ".join(line for line in gate.final.lines() if "FAIL" in line),
                    report=gate, hint="convert again with edge-convert (a full run searches the nodes anew)")
            fp16_model, keep = stages.run("write the FP16 ONNX graph", lambda say: to_fp16(
                model, gate.keep_fp32, sample=samples[0], progress=say))
            onnx.save(fp16_model, str(staging / FP16_ONNX))
            artifacts["fp16_onnx"] = output / FP16_ONNX
        int8 = None
        if options.int8:
            from orinkit.convert.int8.report import DEFAULT_MIN_SHARE
            from orinkit.convert.int8.stage import INT8_ONNX, INT8_OPSET17_ONNX, run_int8

            int8 = stages.run("INT8: calibrate with ModelOpt, judge on held-out samples", lambda say: run_int8(
                prepared.path, staging, calibration, samples, options.int8_gate_options(),
                method=options.calib_method, high_precision="fp16" if options.fp16 else "fp32",
                min_share=DEFAULT_MIN_SHARE if options.int8_min_share is None else options.int8_min_share,
                fp16=gate.final if gate else None, progress=say))
            artifacts["int8_onnx"] = output / INT8_ONNX
            artifacts["int8_opset17_onnx"] = output / INT8_OPSET17_ONNX
        engine_info = bench = None
        if build:
            engine_info, bench = _build_and_check(stages, staging, prepared, model, profiles, samples, keep,
                                                  options, progress, maps=gate.maps if gate else (), int8=int8,
                                                  gate=gate, nms=nms)
            artifacts["plan"] = output / PLAN
            artifacts["manifest"] = output / (PLAN + ".manifest.json")
        else:
            written = "the FP32 and the gated FP16 ONNX" if options.fp16 else "the FP32 ONNX (--no-fp16: no FP16 graph)"
            written += " and the INT8 Q/DQ ONNX (TensorRT 10/11; opset 17 for 8.5)" if options.int8 else ""
            notes.append(f"TensorRT is not installed here: the artifacts are {written}; the engine is built on the "
                         "device (run edge-convert there)")
            progress(notes[-1])
            if nms is not None:
                notes.append(not_built_note(nms.spec))
                progress(notes[-1])
        nms_report = None if nms is None else {**nms.spec.as_dict(), "in_engine": build,
                                               "method": engine_info["nms"]["method"] if build else None}
        result = ConvertResult(output, artifacts, stages.done, prepared, profiles, gate, keep, build, notes,
                               engine_info, bench, options.recorded(), int8, nms_report)
        artifacts["report"] = output / REPORT
        atomic_write_text(staging / REPORT, json.dumps(result.report(), indent=2) + "\n")
        if output.exists():
            # --force: the old folder goes only once the new one is complete.
            old = output.with_name(f".{output.name}.replaced")
            os.rename(output, old)
            shutil.rmtree(old)
    return result


def _describe_gate(gate: GateReport, progress: Progress) -> None:
    for line in gate.final.lines():
        progress(f"  {line}")
    progress(f"  decided by the {gate.decided_by}")
    if gate.keep_fp32:
        progress(f"  kept in FP32: {len(gate.keep_fp32)} of {gate.nodes} nodes ({', '.join(gate.keep_fp32[:8])}"
                 f"{', …' if len(gate.keep_fp32) > 8 else ''}); {gate.fp16_fraction:.0%} in FP16")
    else:
        progress(f"  every one of the {gate.nodes} nodes runs in FP16")
    progress(f"  {gate.evaluations} evaluation(s) in {gate.seconds:.1f} s")
    for note in gate.notes:
        progress(f"  note: {note}")


def _engine_metric(options: ConvertOptions, fp32_path: Path, gate: GateReport | None, int8: Int8Report | None):
    """The task metric the engine is judged by: the one asked for, else the one the auto criterion chose for the
    emulation (boxes for a detector), bound to the model."""
    if options.metric is not None:
        return parse_metric(options.metric, options.min_agreement).bound(fp32_path)
    chosen = (int8.search.metric if int8 is not None else None) or (gate.metric if gate is not None else None)
    # INT8's pass mark for the auto-chosen boxes metric is its own (orinkit.convert.int8.gate.INT8_BOX_AGREEMENT)
    mark = int8.metric_mark if int8 is not None and int8.search.metric else None
    return None if chosen is None else parse_metric(chosen, mark).bound(fp32_path)


def _build_and_check(stages, staging, prepared, model, profiles, samples, keep, options, progress, maps=(),
                     int8=None, gate=None, nms=None):
    from orinkit.convert.trt.builder import BuildOptions, build_engine
    from orinkit.convert.trt.runner import TrtRunner

    sources = None
    if int8 is not None:
        from orinkit.convert.int8.stage import INT8_ONNX, INT8_OPSET17_ONNX
        from orinkit.convert.trt.int8 import Int8Sources

        sources = Int8Sources(staging / INT8_ONNX, staging / INT8_OPSET17_ONNX,
                              tuple(e.node for e in int8.excluded))
    build_options = BuildOptions(profiles=profiles, fp16=options.fp16, keep_fp32=tuple(keep),
                                 workspace=options.workspace, timing_cache=options.timing_cache,
                                 dla_core=options.dla_core, int8=sources, nms=nms.spec if nms else None)
    fp16_path = staging / FP16_ONNX if options.fp16 else None
    built = stages.run("build the TensorRT engine", lambda say: build_engine(
        prepared.path, build_options, fp16_onnx_path=fp16_path, progress=say))
    plan = staging / PLAN
    plan.write_bytes(built.plan)
    facts = current_facts()
    described = describe_engine(plan)
    manifest = EngineManifest(
        inputs=described.inputs,
        outputs=described.outputs,
        profiles=({name: ProfileShape(p.min, p.opt, p.max) for name, p in profiles.items()},),
        precision="int8" if int8 is not None else "fp16" if options.fp16 else "fp32",
        build={**facts.as_dict(), "tensorrt_version": built.tensorrt_version, "onnx_sha256": prepared.source_sha256,
               "keep_fp32": list(keep), "fp16_mode": built.fp16_mode, "workspace_bytes": built.workspace,
               **({} if int8 is None else {"int8_mode": built.int8_mode, "int8": {
                   "calibration_sha256": int8.calibration_sha256, "method": int8.method,
                   "calibration_samples": int8.calibration_samples,
                   "excluded": [e.node for e in int8.excluded], "min_share": int8.min_share,
                   "int8_share": round(int8.int8_share, 4)}}),
               "dla_core": options.dla_core, "orinkit_version": __version__, "options": options.recorded(),
               "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
    )
    if nms is not None:  # the engine answers boxes instead of the head's outputs: those are what is judged
        write_manifest(plan, replace(manifest, nms=manifest_record(built.nms)))
        return check_nms_engine(built, model, samples, nms, benchmark=options.benchmark, stages=stages,
                                progress=progress)
    write_manifest(plan, manifest)
    names = [o.name for o in model.graph.output]
    metric = _engine_metric(options, prepared.path, gate, int8)
    with TrtRunner(built.plan) as runner:
        engine_outputs = [[runner.infer(s)[n] for n in names] for s in samples]
        # The engine is judged as the emulation was: by the same dense maps the auto criterion chose there.
        verdict = judge(names, run(model, samples), engine_outputs, options.criterion, metric, maps)
        for line in verdict.lines():
            progress(f"  engine {line}")
        if not verdict.passed:
            raise AccuracyGateError(
                f"the {'INT8' if int8 is not None else 'FP16'} engine misses the gate on this device although the "
                "emulation met it: "
                + "; ".join(line for line in verdict.lines() if "FAIL" in line),
                hint="keep the nodes it names out of INT8 (--int8-exclude), or convert without --int8"
                if int8 is not None else "keep more nodes in FP32 (--keep-fp32), or convert with --no-fp16",
            )
        bench = None
        if options.benchmark:
            report = stages.run("benchmark the engine", lambda say: runner.benchmark(samples[0]))
            progress(report.summary())
            bench = asdict(report)
    engine = {"tensorrt_version": built.tensorrt_version, "fp16_mode": built.fp16_mode, "int8_mode": built.int8_mode,
              "workspace_bytes": built.workspace, "attempts": [asdict(a) for a in built.attempts],
              "verdict": {"passed": verdict.passed, "outputs": [asdict(m) for m in verdict.metrics],
                          "task": None if verdict.task is None else asdict(verdict.task),
                          "maps": [asdict(r) for r in verdict.maps]}}
    return engine, bench


def convert_torch(
    module,
    samples: Sequence,
    output: str | os.PathLike[str],
    options: ConvertOptions = ConvertOptions(),
    *,
    input_names: Sequence[str],
    output_names: Sequence[str] | None = None,
    dynamic_batch: bool = False,
    opset: int | None = None,
    force: bool = False,
    progress: Progress = lambda message: None,
) -> ConvertResult:
    """Export ``module`` (called on the torch tensors ``samples``) to ONNX, check it, then :func:`convert_onnx`.

    When no FP16 graph of the export works on onnxruntime, the other exporter's graph of the same module (TorchScript
    and dynamo build attention, for one, from different ops) is converted before FP16 is given up."""
    import tempfile

    from orinkit.convert.torch_export import DEFAULT_OPSET, export_torch

    def export(path: Path, exporter: str | None):
        what = "" if exporter is None else f" with the {exporter} exporter"
        progress(f"[torch] export to ONNX{what} and check it against torch on onnxruntime ...")
        started = time.perf_counter()
        with paced(progress, "[torch] exporting"):
            report = export_torch(module, samples, path, input_names=input_names, output_names=output_names,
                                  dynamic_batch=dynamic_batch, opset=opset or DEFAULT_OPSET, exporter=exporter)
        seconds = time.perf_counter() - started
        diffs = ", ".join(f"{n} {d:.2g}" for n, d in report.max_abs_diff.items())
        via = "" if exporter is None and report.exporter == "torchscript" else f" by the {report.exporter} exporter"
        why = " (the TorchScript one could not trace it)" if exporter is None and report.exporter == "dynamo" else ""
        progress(f"[torch] exported{via}{why} in {seconds:.2f} s (max abs diff vs torch: {diffs})")
        return report, Stage("export from torch", round(seconds, 3), f"{report.exporter}: {diffs}")

    with tempfile.TemporaryDirectory(prefix="orinkit-export-") as work:
        report, stage = export(Path(work) / "exported.onnx", None)
        try:
            return convert_onnx(report.path, output, options, force=force, progress=progress, earlier_stages=[stage])
        except Fp16GraphError as first:
            other = "dynamo" if report.exporter == "torchscript" else "torchscript"
            progress(f"[torch] {first.message}: converting the {other} exporter's graph of the module instead")
            try:
                report, stage = export(Path(work) / f"exported-{other}.onnx", other)
                return convert_onnx(report.path, output, options, force=force, progress=progress,
                                    earlier_stages=[stage])
            except (Fp16GraphError, TorchExportError) as second:
                raise Fp16GraphError(f"{first.message}; with the {other} exporter's graph: {second.message}",
                                     hint=first.hint) from second
