"""The detection ensemble "encoded image in, detections out", laid out with orinkit's repository library.

    image (JPEG/PNG bytes) ─ <name>_preprocess ─ pixels ─ <name>_model ─ raw outputs ─ <name>_postprocess ─ boxes,
                                   └──────────────── transform ───────────────────────────────┘   scores, classes, count

The image step letterboxes as the model was trained (orinkit.detect.preprocess_for), the post step decodes and runs
class-aware NMS (orinkit.detect.postprocess, inlined: numpy only on the server), or only maps boxes back when the
engine has NMS inside (``edge-convert --nms``). The class names travel in the ensemble's config (parameter
``names``, JSON), where ``Client(url, name).info.parameters`` and :class:`~orinkit.detect.client.RemoteDetector`
read them.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from orinkit.detect.errors import DetectInputError
from orinkit.detect.heads import Head, recognize
from orinkit.detect.labels import check_count, load_labels
from orinkit.detect.postprocess import NmsOptions
from orinkit.detect.preprocess import Preprocess, preprocess_for
from orinkit.repo.add import PlacedModel, add_model
from orinkit.repo.ensemble import EnsembleSpec, build_ensemble_config, repository_configs
from orinkit.repo.layout import new_model_folder, placing_together
from orinkit.repo.options import ModelOptions
from orinkit.repo.pbtxt import CONFIG_NAME, write_config
from orinkit.repo.python_model import PythonModelSpec, add_python_model
from orinkit.repo.signature import Signature, TensorSpec
from orinkit.repo.steps import ImagePreprocess, add_step

# An image under this many pixels a side is a caller's mistake (a 1x1 tracking pixel, an empty crop): refused with
# a message rather than letterboxed into a 640x640 grey square that holds nothing.
MIN_SIDE = 8
_CONFIG_TYPES = {mc.TYPE_FP32: "FP32", mc.TYPE_FP16: "FP16", mc.TYPE_INT32: "INT32", mc.TYPE_INT64: "INT64",
                 mc.TYPE_FP64: "FP64"}


def step_names(name: str) -> dict[str, str]:
    return {"preprocess": f"{name}_preprocess", "model": f"{name}_model", "postprocess": f"{name}_postprocess",
            "ensemble": name}


def resolve_head(model_artifact: str | os.PathLike[str], head: Head | str | None = None,
                 labels=None) -> Head:
    """The head of ``model_artifact``: ``head`` itself when it is a :class:`Head`; read from an ONNX graph (``head``
    a kind forces it); for a plan built with ``edge-convert --nms``, the EfficientNMS-style outputs its manifest
    records. ``labels`` (a file or a list) names the classes."""
    if isinstance(head, Head):
        if labels is None:
            return head
        names = load_labels(labels)
        check_count(names, head.num_classes, "the labels")
        return replace(head, names=names, num_classes=head.num_classes or len(names))
    artifact = Path(model_artifact)
    if artifact.suffix.lower() == ".onnx":
        return recognize(artifact, head=head, labels=labels)
    if artifact.suffix.lower() == ".plan":
        return _plan_head(artifact, head, labels)
    raise DetectInputError(f"{artifact.name} is not an ONNX file or a TensorRT plan",
                           hint="give the detector's .onnx (or the .plan edge-convert built from it)")


def _plan_head(plan: Path, kind: str | None, labels) -> Head:
    from orinkit.formats.manifest import read_manifest

    manifest = read_manifest(plan)
    record = manifest.nms
    if record is None:
        # A plan keeps no metadata, but its manifest has every tensor's shape: enough to recognize a head by.
        return recognize(_shapes_only(manifest), head=kind, labels=labels)
    if kind not in (None, "efficient_nms"):
        raise DetectInputError(f"{plan.name} has NMS inside (EfficientNMS-style outputs), not a {kind} head",
                               hint="leave --head out for this plan")
    image = manifest.inputs[0]
    names = load_labels(labels) if labels is not None else ()
    if names:
        check_count(names, record.num_classes, "the labels")
    count = record.num_classes or len(names)
    return Head(kind="efficient_nms", input_name=image.name, input_size=_plan_size(manifest),
                outputs=tuple(record.outputs), num_classes=count, names=names or tuple(map(str, range(count))))


def _plan_size(manifest) -> tuple[int, int]:
    """The plan's input height and width: its own, or, where they are dynamic, its first profile's optimum."""
    image = manifest.inputs[0]
    size = tuple(image.dims[-2:])
    if min(size) > 0 or not manifest.profiles or image.name not in manifest.profiles[0]:
        return size
    return tuple(manifest.profiles[0][image.name].opt[-2:])


def _shapes_only(manifest):
    """An ONNX model with no nodes, only the plan's inputs and outputs (dynamic sizes named, the image input at its
    profile's optimum): what recognize() reads."""
    from onnx import helper

    from orinkit.formats.dtypes import dtype

    def value(tensor, dims):
        shape = [d if d > 0 else f"{tensor.name}_{i}" for i, d in enumerate(dims)]
        return helper.make_tensor_value_info(tensor.name, dtype(tensor.dtype).onnx, shape)

    image, *others = manifest.inputs
    inputs = [value(image, (*image.dims[:-2], *_plan_size(manifest)))] + [value(t, t.dims) for t in others]
    outputs = [value(t, t.dims) for t in manifest.outputs]
    return helper.make_model(helper.make_graph([], "plan", inputs, outputs))


def image_step(preprocess: Preprocess, dtype: str) -> ImagePreprocess:
    height, width = preprocess.size
    return ImagePreprocess(width=width, height=height, color_order=preprocess.channels.upper(),
                           scale=preprocess.scale, dtype=dtype, interpolation="bilinear", resize=preprocess.mode,
                           centre=preprocess.centre, pad=preprocess.pad, min_side=MIN_SIDE)


def postprocess_spec(head: Head, preprocess: Preprocess, options: NmsOptions, model_outputs: dict[str, TensorSpec],
                     max_batch_size: int, *, found_only: bool = False) -> PythonModelSpec:
    """<name>_postprocess: orinkit.detect.triton_postprocess over the model's outputs (``model_outputs``: their
    specs as the model's config has them) and the image geometry. With ``max_batch_size`` 0 (a model with a fixed
    batch of 1) the dims are full shapes, batch axis included; ``found_only`` (one image, max_batch_size 0: a step
    of a BLS chain that stops when nothing is found) answers the boxes it kept only, [count, 4]."""
    if found_only and max_batch_size:
        raise DetectInputError("found_only answers one image's boxes: it needs max_batch_size 0",
                               hint="place the step without batching")
    one = () if max_batch_size > 0 else (1,)
    geometry = (TensorSpec("ORIGINAL_SIZE", "INT32", (*one, 2)) if preprocess.mode == "stretch"
                else TensorSpec("TRANSFORM", "FP32", (*one, 6)))
    per_image = (-1,) if found_only else (*one, options.max_det)
    signature = Signature(
        (*(model_outputs[name] for name in head.outputs), geometry),
        (TensorSpec("BOXES", "FP32", (*per_image, 4)), TensorSpec("SCORES", "FP32", per_image),
         TensorSpec("CLASSES", "INT32", per_image), TensorSpec("COUNT", "INT32", (*one, 1))),
        max_batch_size)
    parameters = {"head": json.dumps(head.as_dict()), "preprocess": json.dumps(preprocess.as_dict()),
                  "conf": repr(options.conf), "iou": repr(options.iou), "max_det": str(options.max_det),
                  "agnostic": "true" if options.agnostic else "false",
                  "found_only": "true" if found_only else "false"}
    return PythonModelSpec("orinkit.detect.triton_postprocess", signature, parameters)


def ensemble_spec(name: str, head: Head, preprocess: Preprocess) -> dict:
    steps = step_names(name)
    geometry = "ORIGINAL_SIZE" if preprocess.mode == "stretch" else "TRANSFORM"
    raw = {output: f"raw_{index}" for index, output in enumerate(head.outputs)}
    return {
        "name": name,
        "steps": [
            {"model": steps["preprocess"], "inputs": {"IMAGE": "image"},
             "outputs": {"TENSOR": "pixels", geometry: "geometry"}},
            {"model": steps["model"], "inputs": {head.input_name: "pixels"}, "outputs": raw},
            {"model": steps["postprocess"], "inputs": {**{o: t for o, t in raw.items()}, geometry: "geometry"},
             "outputs": {"BOXES": "boxes", "SCORES": "scores", "CLASSES": "classes", "COUNT": "count"}},
        ],
        "outputs": ["boxes", "scores", "classes", "count"],
    }


def build_detection_repository(
    repository: str | os.PathLike[str],
    model_artifact: str | os.PathLike[str],
    *,
    head: Head | str | None = None,
    labels=None,
    preprocess: Preprocess | None = None,
    options: NmsOptions | None = None,
    runtime: str | None = None,
    max_batch_size: int = 4,
    name: str = "detection",
    progress=lambda message: None,
) -> dict[str, PlacedModel | Path]:
    """Place the detector (an ONNX file, or a plan), its image and post-processing steps and the ensemble
    ``name`` over them into ``repository``: all four, or, if any cannot be placed, none. ``head`` (a Head, or a
    kind forcing it) and ``labels`` as :func:`resolve_head`; ``preprocess`` defaults to what the head's family was
    trained with; ``options``: NMS thresholds (Ultralytics' predict defaults)."""
    options = options or NmsOptions()
    if options.max_det < 1:
        raise DetectInputError(f"max_det {options.max_det} is below 1", hint="e.g. 300 (Ultralytics' default)")
    if max_batch_size < 1:
        raise DetectInputError(f"max_batch_size {max_batch_size} is below 1",
                               hint="the ensemble batches: use 1 or more")
    found = resolve_head(model_artifact, head, labels)
    preprocess = preprocess or preprocess_for(found)
    progress(f"head {found.kind}: input {found.input_name} {found.input_size[0]}x{found.input_size[1]}, "
             f"{found.num_classes} classes" + ("" if found.needs_nms else " (no NMS needed after the model)"))
    with placing_together(Path(repository)) as staging:
        placed = _build(staging, Path(model_artifact), found, preprocess, options, runtime, max_batch_size, name,
                        progress)
    return {key: (replace(value, path=Path(repository) / value.name) if isinstance(value, PlacedModel)
                  else Path(repository) / value.name) for key, value in placed.items()}


def _model_tensors(config: mc.ModelConfig) -> dict[str, TensorSpec]:
    return {t.name: TensorSpec(t.name, _CONFIG_TYPES.get(t.data_type, "FP32"), tuple(t.dims)) for t in config.output}


def _build(repository: Path, artifact: Path, head: Head, preprocess: Preprocess, options: NmsOptions, runtime,
           max_batch_size: int, name: str, progress) -> dict:
    steps = step_names(name)
    if _fixed_batch(artifact, head):
        # Ultralytics exports a fixed batch of 1 by default: the whole ensemble then takes one image a request.
        max_batch_size = 0
        progress("the model takes a fixed batch of 1: the ensemble answers one image a request")
    batching = ModelOptions(max_batch_size=max_batch_size, dynamic_batching=max_batch_size > 0)
    model = add_model(repository, artifact, name=steps["model"], runtime=runtime, options=batching)
    progress(f"placed {model.name} as {model.runtime.value}" + (f" ({model.note})" if model.note else ""))
    inputs = {t.name: t for t in model.config.input}
    if head.input_name not in inputs:
        raise DetectInputError(f"the model's inputs are {', '.join(inputs)}, not the head's {head.input_name}",
                               hint="check head= against the model")
    dtype = "FP16" if inputs[head.input_name].data_type == mc.TYPE_FP16 else "FP32"
    pre = add_step(repository, image_step(preprocess, dtype), name=steps["preprocess"], max_batch_size=max_batch_size)
    tensors = _model_tensors(model.config)
    missing = [o for o in head.outputs if o not in tensors]
    if missing:
        raise DetectInputError(f"the model has no output {', '.join(missing)} (its outputs: {', '.join(tensors)})",
                               hint="check head= against the model")
    post = add_python_model(repository, postprocess_spec(head, preprocess, options, tensors, max_batch_size),
                            name=steps["postprocess"], options=batching)
    ensemble = _add_ensemble(repository, ensemble_spec(name, head, preprocess), head.names)
    progress(f"placed {pre.name}, {post.name} and the ensemble {name}")
    return {"model": model, "preprocess": pre, "postprocess": post, "ensemble": ensemble}


def _fixed_batch(artifact: Path, head: Head) -> bool:
    """True for a model whose batch axis is fixed at 1; a fixed batch of more images is refused (every request
    would have to fill it)."""
    from orinkit.repo.artifacts import onnx_signature, plan_signature

    full = (onnx_signature if artifact.suffix.lower() == ".onnx" else plan_signature)(artifact)
    if full.max_batch_size > 0:
        return False
    image = full.input(head.input_name)
    batch = image.dims[0] if image is not None and image.dims else None
    if batch != 1:
        raise DetectInputError(f"{artifact.name} takes a fixed batch of {batch} images",
                               hint="export it with a dynamic batch (Ultralytics: dynamic=True) or with batch 1")
    return True


def _add_ensemble(repository: Path, spec: dict, names) -> Path:
    """add_ensemble, with the class names in the config: what a client reads to name the classes it gets."""
    ensemble = EnsembleSpec.from_dict(spec)
    config = build_ensemble_config(ensemble, repository_configs(repository))
    config.parameters["names"].string_value = json.dumps(list(names))
    with new_model_folder(repository, ensemble.name, hint="choose another --name") as staging:
        (staging / "1").mkdir()
        write_config(staging / CONFIG_NAME, config)
    return repository / ensemble.name
