"""NMS inside the TensorRT engine (``edge-convert --nms``): a raw-head detector's plan then answers boxes.

After the ONNX is parsed, :func:`add_nms` adds the decode glue (:mod:`orinkit.convert.trt.nms_decode`) and NMS,
and replaces the network's outputs with EfficientNMS-style ones, whichever way NMS was made:
``num_dets`` [B, 1] int32, ``det_boxes`` [B, K, 4] (x1 y1 x2 y2, input pixels), ``det_scores`` [B, K],
``det_classes`` [B, K] int32, zero past ``num_dets``.

Which way, per TensorRT (NVIDIA/TensorRT sources, branch named in each place):

* the ``EfficientNMS_TRT`` plugin (v1, an IPluginV2DynamicExt): registered by ``initLibNvInferPlugins`` on every
  branch from release/8.5 to release/11.1 (plugin/api/inferPlugin.cpp); deprecated from 10.12 (CHANGELOG.md
  10.12.0: "Deprecated ... EfficientNMS_TRT (version 1)"; release/11.1 efficientNMSPlugin.h: "Use INMSLayer
  instead"). Its ``class_agnostic`` attribute is absent on release/8.5 (the creator ignores unknown fields, so
  asking for it there would silently give class-aware NMS) and present from release/8.6;
* ``INMSLayer`` (``network.add_nms``): bound on every branch from release/8.5, but its int32 outputs need
  ICastLayer, which pyGraph.cpp binds from release/8.6. Its output is selected (batch, class, box) rows of a
  data-dependent count, so a scatter + TopK + gathers turn it into the padded per-image outputs above.

So: the plugin up to 10.11 (the well-trodden way on JetPack 5/6), INMSLayer from 10.12 and on 11.x (NVIDIA's
stated replacement), the other where one is missing, and a one-line refusal where neither can do what was asked.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from orinkit.convert.errors import ConvertError, EngineBuildError, NmsError
from orinkit.convert.trt.nms_decode import PREFIX, Glue, best_class_only, candidate_count, decode_head

DEFAULT_CONF, DEFAULT_IOU, DEFAULT_MAX_DET = 0.25, 0.7, 300
RAW_HEADS = ("yolov8", "yolov5", "yolox")
# Heads whose outputs are final boxes already: NMS in the engine would have nothing to do.
FINAL_HEADS = {"end2end": "is NMS-free (its outputs are final boxes)",
               "efficient_nms": "already ends in EfficientNMS-style outputs",
               "detr": "is a DETR-style set predictor that needs no NMS"}
OUTPUTS = ("num_dets", "det_boxes", "det_scores", "det_classes")
PLUGIN, LAYER = "EfficientNMS_TRT", "INMSLayer"
# ITopKLayer: "Currently only values of K up to 3840 are supported" (NvInfer.h, release/8.5 to release/11.1).
MAX_DET_LIMIT = 3840
_RELEASE = re.compile(r"^(\d+)\.(\d+)")


@dataclass(frozen=True)
class NmsSpec:
    """What NMS goes into the engine: the head it decodes and the thresholds (Ultralytics' predict defaults)."""

    head: str  # yolov8, yolov5 or yolox
    output: str  # the raw head's output tensor
    num_classes: int
    input_size: tuple[int, int] = (0, 0)  # (height, width) the engine takes
    strides: tuple[int, ...] = ()  # YOLOX grid strides
    score_threshold: float = DEFAULT_CONF
    iou_threshold: float = DEFAULT_IOU
    max_output_boxes: int = DEFAULT_MAX_DET
    class_agnostic: bool = False

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> NmsSpec:
        return cls(**{**data, "input_size": tuple(data.get("input_size", (0, 0))),
                      "strides": tuple(data.get("strides", ()))})

    def describe(self) -> str:
        return (f"score threshold {self.score_threshold:g}, IoU {self.iou_threshold:g}, at most "
                f"{self.max_output_boxes} boxes, {'class-agnostic' if self.class_agnostic else 'class-aware'}")


@dataclass(frozen=True)
class NmsPlan:
    """The spec the engine build takes, and the recognized head (an ``orinkit.detect.heads.Head``) the engine's
    boxes are judged with."""

    spec: NmsSpec
    head: Any = field(compare=False, repr=False)


# ---------------------------------------------------------------- options (no TensorRT needed)

def check_nms_options(options) -> None:
    """Refusals that need no model: thresholds out of range, NMS options without --nms, INT8 on DLA."""
    given = [flag for flag, value in (("--conf", options.nms_conf), ("--iou", options.nms_iou),
                                      ("--max-det", options.nms_max_det)) if value is not None]
    given += ["--agnostic"] if options.nms_agnostic else []
    if given and not options.nms:
        raise ConvertError(f"{', '.join(given)} shape{'s' if len(given) == 1 else ''} the NMS that --nms puts "
                           "into the engine", hint="add --nms, or drop them")
    if not options.nms:
        return
    conf, iou, max_det, _ = resolved(options)
    if not 0.0 <= conf < 1.0:
        raise NmsError(f"--conf {conf:g} is outside [0, 1)", hint="give a score threshold such as 0.25")
    if not 0.0 < iou <= 1.0:
        raise NmsError(f"--iou {iou:g} is outside (0, 1]", hint="give an IoU threshold such as 0.7")
    if not 1 <= max_det <= MAX_DET_LIMIT:
        raise NmsError(f"--max-det {max_det} is outside 1..{MAX_DET_LIMIT} (TensorRT's TopK limit)",
                       hint="give at most 3840 boxes per image, e.g. 300")
    if options.int8 and options.dla_core is not None:
        raise NmsError("--nms with --int8 on DLA: NMS cannot run on the DLA, and the DLA INT8 build calibrates "
                       "from a cache that has no ranges for the layers NMS adds",
                       hint="drop --nms (the Python NMS step serves), or build INT8 for the GPU (no --dla-core)")


def resolved(options) -> tuple[float, float, int, bool]:
    return (DEFAULT_CONF if options.nms_conf is None else float(options.nms_conf),
            DEFAULT_IOU if options.nms_iou is None else float(options.nms_iou),
            DEFAULT_MAX_DET if options.nms_max_det is None else int(options.nms_max_det),
            bool(options.nms_agnostic))


def recorded(options) -> dict | None:
    """The NMS request as the manifest and report record it (None without --nms)."""
    if not options.nms:
        return None
    conf, iou, max_det, agnostic = resolved(options)
    return {"score_threshold": conf, "iou_threshold": iou, "max_output_boxes": max_det, "class_agnostic": agnostic}


def _detect(module: str):
    """``orinkit.detect.<module>``, reached by name as orinkit.convert.detection does (no import statement of
    convert points at detect; tests/test_layers.py reads them)."""
    import importlib

    try:
        return importlib.import_module(f"orinkit.detect.{module}")
    except ImportError as exc:
        raise NmsError(f"--nms needs orinkit.detect, which does not import here: {exc}",
                       hint="reinstall orinkit, or drop --nms") from exc


def plan_nms(source, options, profiles=None) -> NmsPlan:
    """Recognize the detector in ``source`` and fix what NMS goes into its engine, or refuse in one line."""
    from pathlib import Path

    from orinkit.core.errors import OrinkitError

    name = Path(source).name
    try:
        # plan_nms runs on the source, before --task detect's head and names are written into the prepared model.
        spec = options.detector
        head = _detect("heads").recognize(str(source), head=spec.head if spec else None,
                                          labels=spec.labels if spec else None)
    except OrinkitError as exc:  # orinkit.detect's DetectError and its kinds
        raise NmsError(f"--nms puts NMS into a detector's engine, and {name} is not a detector orinkit "
                       f"recognizes: {exc.message}",
                       hint=exc.hint or "drop --nms, or name the head with --task detect --head KIND") from exc
    if head.kind in FINAL_HEADS:
        raise NmsError(f"--nms: {name} has a {head.kind} head, which {FINAL_HEADS[head.kind]}",
                       hint="drop --nms: the engine answers boxes as it is")
    if head.kind not in RAW_HEADS:
        raise NmsError(f"--nms: orinkit decodes {', '.join(RAW_HEADS)} heads in the engine, not {head.kind}",
                       hint="drop --nms; the Python NMS step serves")
    size = tuple(head.input_size)
    profile = (profiles or {}).get(head.input_name)
    if profile is not None and len(profile.opt) == 4:
        size = tuple(profile.opt[2:])
        if head.kind == "yolox" and tuple(profile.min[2:]) != tuple(profile.max[2:]):
            raise NmsError(f"--nms on YOLOX decodes a grid made for one input size, and the engine takes "
                           f"{list(profile.min[2:])} to {list(profile.max[2:])}",
                           hint="give one height and width (--shapes), or drop --nms")
    conf, iou, max_det, agnostic = resolved(options)
    spec = NmsSpec(head=head.kind, output=head.outputs[0], num_classes=int(head.num_classes),
                   input_size=(int(size[0]), int(size[1])), strides=tuple(head.strides), score_threshold=conf,
                   iou_threshold=iou, max_output_boxes=max_det, class_agnostic=agnostic)
    return NmsPlan(spec, head)


def not_built_note(spec: NmsSpec) -> str:
    return (f"--nms: NMS ({spec.describe()}) goes into the engine when it is built on the device (run edge-convert "
            "--nms there); until then the Python NMS step decodes these outputs")


# ---------------------------------------------------------------- the network (TensorRT)

def add_nms(trt: ModuleType, network, spec: NmsSpec, *, logger, progress=lambda message: None) -> dict:
    """Decode the head and add NMS to the parsed ``network``; its outputs become :data:`OUTPUTS`."""
    outputs = [network.get_output(i) for i in range(network.num_outputs)]
    head = next((t for t in outputs if t.name == spec.output), None)
    if head is None:
        raise NmsError(f"the parsed network has no output '{spec.output}' (it has {[t.name for t in outputs]})",
                       hint="check --head, or build without --nms")
    method, creator = choose_method(trt, network, spec, logger)
    glue = Glue(trt, network)
    boxes, scores = decode_head(glue, head, spec)
    if not spec.class_agnostic:  # (class-agnostic NMS keeps one class per box by itself)
        scores = best_class_only(glue, scores)
    if method == PLUGIN:
        results = _plugin_nms(glue, creator, boxes, scores, spec)
    else:
        results = _layer_nms(glue, boxes, scores, spec, candidate_count(spec, head))
    for tensor in outputs:  # the raw head (and any grid maps beside it): TensorRT drops what nothing reads now
        network.unmark_output(tensor)
    for name, tensor in zip(OUTPUTS, results):
        tensor.name = name
        network.mark_output(tensor)
    progress(f"NMS in the engine with {method} ({spec.describe()}); {glue.count} layers added")
    return {"method": method, "layers": glue.count, **spec.as_dict(), "outputs": list(OUTPUTS)}


def choose_method(trt: ModuleType, network, spec: NmsSpec, logger) -> tuple[str, Any]:
    version = str(trt.__version__)
    match = _RELEASE.match(version)
    release = (int(match[1]), int(match[2])) if match else (0, 0)
    creator = _plugin_creator(trt, logger)
    plugin_ok = creator is not None and (not spec.class_agnostic or "class_agnostic" in _field_names(creator))
    layer_ok = hasattr(network, "add_nms") and hasattr(network, "add_cast")
    if layer_ok and (release >= (10, 12) or not plugin_ok):
        return LAYER, None
    if plugin_ok:
        return PLUGIN, creator
    if creator is not None:
        raise NmsError(f"--agnostic on TensorRT {version}: its EfficientNMS_TRT has no class_agnostic attribute "
                       "(from 8.6 on) and its INMSLayer outputs need ICastLayer (from 8.6 on)",
                       hint="drop --agnostic for class-aware NMS, or drop --nms: the Python NMS step serves")
    raise NmsError(f"TensorRT {version} has neither the EfficientNMS_TRT plugin (not in its plugin registry) nor "
                   "INMSLayer with ICastLayer", hint="install libnvinfer-plugin from JetPack, or drop --nms: the "
                                                     "Python NMS step serves")


def _plugin_creator(trt: ModuleType, logger):
    # Standard plugins enter the registry through initLibNvInferPlugins (bound on every branch; under
    # EXPORT_ALL_BINDINGS on release/11.1, i.e. in the full bindings, not the lean ones).
    init = getattr(trt, "init_libnvinfer_plugins", None)
    if init is not None:
        init(logger, "")
    registry = trt.get_plugin_registry()
    # get_creator from release/10.0; get_plugin_creator is all release/8.5 has, deprecated in 10.0 and no longer
    # bound on release/11.1 (nor in the 11.4 bindings wheel).
    find = getattr(registry, "get_creator", None) or registry.get_plugin_creator
    return find(PLUGIN, "1", "")


def _field_names(creator) -> set[str]:
    fields = creator.field_names
    return {fields[i].name for i in range(len(fields))}


def _plugin_nms(glue: Glue, creator, boxes, scores, spec: NmsSpec) -> list:
    trt = glue.trt
    kinds = trt.PluginFieldType
    # Types as efficientNMSPlugin.cpp's createPlugin validates them (kFLOAT32 / kINT32); it reads the raw bytes,
    # so the numpy dtype must be the C type, not merely a number.
    values = {"score_threshold": (np.float32, kinds.FLOAT32, spec.score_threshold),
              "iou_threshold": (np.float32, kinds.FLOAT32, spec.iou_threshold),
              "max_output_boxes": (np.int32, kinds.INT32, spec.max_output_boxes),
              "background_class": (np.int32, kinds.INT32, -1), "score_activation": (np.int32, kinds.INT32, 0),
              "box_coding": (np.int32, kinds.INT32, 0), "class_agnostic": (np.int32, kinds.INT32,
                                                                        int(spec.class_agnostic))}
    known = _field_names(creator)
    arrays = {name: np.array([value], dtype) for name, (dtype, _, value) in values.items() if name in known}
    fields = trt.PluginFieldCollection([trt.PluginField(name, arrays[name], values[name][1]) for name in arrays])
    plugin = creator.create_plugin(f"{PREFIX}/efficient_nms", fields)
    if plugin is None:
        raise EngineBuildError(f"TensorRT {trt.__version__}'s EfficientNMS_TRT refused its attributes "
                               f"({spec.describe()})", hint="see the TensorRT errors above; drop --nms to use the "
                                                            "Python NMS step")
    layer = glue._made(glue.network.add_plugin_v2([boxes, scores], plugin), "efficient_nms")
    return [layer.get_output(i) for i in range(4)]


def _layer_nms(glue: Glue, boxes, scores, spec: NmsSpec, count: int | None) -> list:
    """INMSLayer, then its selected rows made into padded per-image outputs: the kept scores are scattered into a
    zero [B, N, C] map whose TopK over N x C is the best ``max_output_boxes`` of each image, as EfficientNMS orders
    them."""
    trt, network = glue.trt, glue.network
    classes = None
    if spec.class_agnostic:  # one score per box (its best class): INMSLayer then compares boxes of any class
        best = glue._made(_topk(trt, network, scores, 1, 2), "topk")
        scores, classes = best.get_output(0), best.get_output(1)
    width = 1 if spec.class_agnostic else spec.num_classes
    keep = spec.max_output_boxes
    # TopK cannot take more than its axis holds: a small head yields fewer candidates than max_det, and the rows
    # past them are padding (zeros), as EfficientNMS pads.
    top = min(keep, count * width) if count is not None else keep
    nms = glue._made(_add_nms(trt, network, boxes, scores, glue.const(np.array([keep], np.int32), ())), "nms")
    nms.bounding_box_format = trt.BoundingBoxFormat.CORNER_PAIRS
    nms.set_input(3, glue.const(np.array([spec.iou_threshold], np.float32), ()))
    nms.set_input(4, glue.const(np.array([spec.score_threshold], np.float32), ()))
    rows = glue.gather(nms.get_output(0), (0, 2, 1), 1)  # (batch, class, box) → (batch, box, class)
    kept = glue._made(network.add_gather_v2(scores, rows, trt.GatherMode.ND), "gather").get_output(0)
    zeros = glue.scalar(scores, 0.0, "PROD")
    dense = glue._made(network.add_scatter(zeros, rows, kept, trt.ScatterMode.ND), "scatter").get_output(0)
    best = glue._made(_topk(trt, network, glue.reshape(dense, (0, -1)), top, 1), "topk")
    det_scores, flat = best.get_output(0), best.get_output(1)  # [B, K]; flat = box * width + class
    # A kept score exceeds the threshold (>= 0), so a zero is padding.
    valid = glue.scalar(det_scores, 0.0, "GREATER", rank=2)
    valid_f = glue.cast(valid, trt.float32)
    num_dets = glue.cast(glue.reduce(valid_f, "SUM", 1), trt.int32)
    box = glue.scalar(flat, width, "FLOOR_DIV", rank=2)
    if spec.class_agnostic:
        label = glue.gather_rows(glue.reshape(classes, (0, -1)), box)
    else:
        label = glue.binary(flat, glue.scalar(box, width, "PROD", rank=2), "SUB")
    det_classes = glue.binary(label, glue.cast(valid, trt.int32), "PROD")
    det_boxes = glue.binary(glue.gather_rows(boxes, box), glue.reshape(valid_f, (0, 0, 1)), "PROD")
    if top < keep:
        det_boxes, det_scores, det_classes = (_pad(glue, t, keep - top) for t in (det_boxes, det_scores, det_classes))
    return [num_dets, det_boxes, det_scores, det_classes]


def _pad(glue: Glue, tensor, extra: int):
    """``extra`` zero rows after axis 1's (made from the tensor itself, so the dynamic batch needs no shapes)."""
    zeros = glue.scalar(glue.gather(tensor, [0] * extra, 1), 0, "PROD", rank=len(tuple(tensor.shape)))
    return glue.concat([tensor, zeros], 1)


def _modern(trt: ModuleType) -> bool:
    # release/10.14 deprecates the add_nms/add_topk forms without indices_type and binds the ones with it.
    match = _RELEASE.match(str(trt.__version__))
    return bool(match) and (int(match[1]), int(match[2])) >= (10, 14)


def _add_nms(trt: ModuleType, network, boxes, scores, limit):
    if _modern(trt):
        return network.add_nms(boxes, scores, limit, trt.int32)
    return network.add_nms(boxes, scores, limit)


def _topk(trt: ModuleType, network, tensor, k: int, axis: int):
    if _modern(trt):
        return network.add_topk(tensor, trt.TopKOperation.MAX, k, 1 << axis, trt.int32)
    return network.add_topk(tensor, trt.TopKOperation.MAX, k, 1 << axis)


# ---------------------------------------------------------------- judging the engine's boxes

NMS_MIN_F1 = 0.95  # the gate judged FP16/INT8 already: this catches a wrong glue (swapped axes, lost classes)


@dataclass
class NmsVerdict:
    passed: bool
    f1: float | None
    reference_boxes: int
    engine_boxes: int
    note: str = ""

    def lines(self) -> list[str]:
        if self.f1 is None:
            return [f"boxes: {self.note}"]
        return [f"boxes {'PASS' if self.passed else 'FAIL'}: F1 {self.f1:.3f} against the Python NMS of the FP32 "
                f"outputs ({self.engine_boxes} boxes from the engine, {self.reference_boxes} from Python; "
                f"pass >= {NMS_MIN_F1})"]

    def as_dict(self) -> dict:
        return asdict(self)


def judge_engine_boxes(plan: NmsPlan, fp32_outputs: list[dict], engine_outputs: list[dict], input_sizes) -> NmsVerdict:
    """The engine's boxes against ``orinkit.detect``'s decode + NMS of the FP32 ONNX outputs, sample by sample,
    matched per class at IoU >= 0.5."""
    post, Detections = _detect("postprocess"), _detect("detections").Detections
    match, Transform = _detect("metrics").match, _detect("preprocess").Transform
    spec = plan.spec
    options = post.NmsOptions(conf=spec.score_threshold, iou=spec.iou_threshold, max_det=spec.max_output_boxes,
                         agnostic=spec.class_agnostic)
    tp = fp = fn = reference_count = engine_count = 0
    for reference, engine, (height, width) in zip(fp32_outputs, engine_outputs, input_sizes):
        batch = len(engine["num_dets"])
        transforms = [Transform(scale=1.0, pad_x=0.0, pad_y=0.0, source_size=(width, height))] * batch
        expected = post.postprocess(plan.head, reference, transforms, options)
        for b, (truth, transform) in enumerate(zip(expected, transforms)):
            n = int(engine["num_dets"][b, 0])
            found = Detections(xyxy=transform.to_source(np.asarray(engine["det_boxes"][b, :n], np.float32)),
                               score=np.asarray(engine["det_scores"][b, :n], np.float32),
                               class_id=np.asarray(engine["det_classes"][b, :n], np.int32))
            hits, extra, missed = match(truth, found, 0.5)
            tp, fp, fn = tp + hits, fp + extra, fn + missed
            reference_count, engine_count = reference_count + len(truth), engine_count + n
    if reference_count == 0 and engine_count == 0:
        return NmsVerdict(True, None, 0, 0, "neither the engine nor the Python NMS found a box on these samples, "
                                            "so the NMS in the engine was not compared (give --data with images)")
    f1 = 2 * tp / (2 * tp + fp + fn)
    return NmsVerdict(f1 >= NMS_MIN_F1, f1, reference_count, engine_count)


def check_nms_engine(built, model, samples, plan: NmsPlan, *, benchmark: bool, stages, progress) -> tuple[dict, Any]:
    """Run the built engine on the gate's samples and judge its boxes (:func:`judge_engine_boxes`); benchmark it
    when asked. Returns the report's ``engine`` entry and the benchmark (or None)."""
    from dataclasses import asdict as as_dict

    from orinkit.convert.errors import AccuracyGateError
    from orinkit.convert.fp16.emulate import run
    from orinkit.convert.trt.runner import TrtRunner

    names = [o.name for o in model.graph.output]
    reference = [dict(zip(names, outputs)) for outputs in run(model, samples)]
    sizes = [tuple(sample[plan.head.input_name].shape[-2:]) for sample in samples]
    bench = None
    with TrtRunner(built.plan) as runner:
        verdict = judge_engine_boxes(plan, reference, [runner.infer(sample) for sample in samples], sizes)
        for line in verdict.lines():
            progress(f"  engine {line}")
        if not verdict.passed:
            quantized = built.int8_mode != "off"
            raise AccuracyGateError(
                f"the engine's boxes ({'INT8, ' if quantized else ''}NMS by {built.nms['method']}) miss those of the "
                "Python NMS on the FP32 outputs: " + "; ".join(verdict.lines()),
                hint="keep the nodes the INT8 gate named out of INT8 (--int8-exclude), or convert without --nms to "
                     "judge the raw outputs" if quantized else
                     "convert without --nms (the Python NMS step serves) and report the model")
        if benchmark:
            report = stages.run("benchmark the engine", lambda say: runner.benchmark(samples[0]))
            progress(report.summary())
            bench = as_dict(report)
    engine = {"tensorrt_version": built.tensorrt_version, "fp16_mode": built.fp16_mode, "int8_mode": built.int8_mode,
              "workspace_bytes": built.workspace, "attempts": [as_dict(a) for a in built.attempts],
              "nms": built.nms, "verdict": {"passed": verdict.passed, "boxes": verdict.as_dict()}}
    return engine, bench


def manifest_record(built_nms: dict):
    """The manifest's :class:`~orinkit.formats.manifest.NmsRecord` for a build's ``nms`` entry."""
    from orinkit.formats.manifest import NmsRecord

    return NmsRecord.from_dict(built_nms)
