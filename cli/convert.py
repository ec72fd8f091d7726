"""``edge-convert``: an ONNX file (or a torch model) → FP32 ONNX, gated FP16 (and, with --int8, gated INT8 Q/DQ)
ONNX, and a TensorRT plan on the device."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click

from orinkit.cli.base import CommandError, OrinkitCommand
from orinkit.convert.detection import DetectorSpec
from orinkit.convert.errors import ConvertError, ShapeSpecError
from orinkit.convert.fp16.criteria import Criterion
from orinkit.convert.pipeline import (
    ConvertOptions,
    ConvertResult,
    convert_onnx,
    convert_torch,
)
from orinkit.convert.samples import parse_ranges
from orinkit.convert.shapes import parse_shapes
from orinkit.core.errors import OrinkitError
from orinkit.core.optional import require


def _torch_inputs(specs: tuple[str, ...]):
    torch = require("torch")

    names, tensors = [], []
    for spec in specs:
        match = re.fullmatch(r"(.+?):(\d+(?:x\d+)*)", spec)
        if not match:
            raise ShapeSpecError(f"--input '{spec}' is not NAME:DIMS", hint="write it like input:1x3x360x640")
        names.append(match[1])
        tensors.append(torch.rand(*(int(d) for d in match[2].split("x"))))
    if not names:
        raise ShapeSpecError("--torch needs at least one --input NAME:DIMS", hint="add --input input:1x3x360x640")
    return names, tensors


def _criterion(kind: str, max_range_error, min_cosine, atol, rtol) -> Criterion:
    if kind != "elementwise" and (atol is not None or rtol is not None):
        raise ConvertError("--atol/--rtol apply to the elementwise criterion only",
                           hint="add --criterion elementwise, or use --max-range-error")
    if kind == "elementwise" and max_range_error is not None:
        raise ConvertError("--max-range-error applies to the range criterion only",
                           hint="drop it, or use --criterion auto or range")
    if kind != "elementwise":
        return Criterion(kind=kind, min_cosine=min_cosine,
                         max_range_error=Criterion.max_range_error if max_range_error is None else max_range_error)
    return Criterion(kind="elementwise", atol=atol, rtol=rtol, min_cosine=min_cosine)


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in (text or "").split(",") if n.strip())


def _workspace(text: str) -> int | None:
    if text == "auto":
        return None
    if not text.isdigit() or int(text) < 1:
        raise ConvertError(f"--workspace '{text}' is not auto or a number of MiB", hint="write e.g. 2048 or auto")
    return int(text) << 20


def _check_repository(path: Path, create: bool, name: str) -> None:
    """Before any work, as edge-repo does: a --repo that does not exist is a typo unless --create says otherwise,
    and the model's name must be one Triton loads."""
    from orinkit.repo.errors import RepoError
    from orinkit.repo.layout import check_model_name

    check_model_name(name)
    if path.exists() and not path.is_dir():
        raise RepoError(f"--repo {path} is a file", hint="name the folder that holds one subfolder per model")
    if not path.exists() and not create:
        raise RepoError(f"the repository {path} does not exist",
                        hint="check the path, or pass --create to start a new repository there")


def _refuse_without_repo(*, create: bool, name: str | None, runtime: str) -> None:
    given = [flag for flag, on in (("--create", create), ("--name", name is not None),
                                   ("--runtime", runtime != "auto")) if on]
    if given:
        raise ConvertError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to --repo only",
                           hint="add --repo DIR, or drop them")


def _place(result: ConvertResult, repository: Path, name: str, runtime: str, echo) -> None:
    from orinkit.repo.add import add_model
    from orinkit.repo.deploy import deploy_version

    artifact = result.artifacts.get("plan") or result.artifacts["fp32_onnx"]
    if (repository / name / "config.pbtxt").is_file():
        deployed = deploy_version(repository, name, artifact, progress=echo)
        echo(f"deployed {artifact.name} as {name} version {deployed.version} in {repository}")
    else:
        placed = add_model(repository, artifact, name=name, runtime=None if "plan" in result.artifacts else runtime)
        echo(f"placed {artifact.name} as {name} ({placed.runtime.value}) in {repository}")
        if placed.note:
            echo(f"runtime: {placed.note}")


def _detector(task: str | None, head: str | None, labels: Path | None) -> DetectorSpec | None:
    if task is None and (head is not None or labels is not None):
        given = "--head" if head is not None else "--labels"
        raise ConvertError(f"{given} describes a detector and goes with --task detect",
                           hint=f"add --task detect (edge-convert model.onnx --task detect {given} ...)")
    return DetectorSpec(head, labels) if task == "detect" else None


@click.command(cls=OrinkitCommand)
@click.argument("model", required=False, type=click.Path(path_type=Path))
@click.option("--torch", "torch_factory", default=None,
              help="package.module:factory returning an nn.Module; the module is imported as python -m imports it: "
                   "from the current folder too, then from PYTHONPATH and the installed packages.")
@click.option("--input", "torch_inputs", multiple=True, help="--torch: NAME:DIMS of each input (repeatable).")
@click.option("--output-name", "output_names", multiple=True, help="--torch: name of each output (repeatable).")
@click.option("--dynamic-batch", is_flag=True, help="--torch: make axis 0 of every input and output dynamic.")
@click.option("--opset", type=int, default=None, help="--torch: ONNX opset (default 17).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Output folder (default: ./NAME.edge in the current folder, NAME being MODEL's file name without "
                   ".onnx; with --torch, --name, else the factory's module).")
@click.option("--force", is_flag=True, help="Replace an existing output folder (only once the new one is complete).")
@click.option("--shapes", default=None, help="Static input shapes, trtexec syntax: input:1x3x360x640[,…].")
@click.option("--min-shapes", default=None, help="Dynamic axes: smallest shapes.")
@click.option("--opt-shapes", default=None, help="Dynamic axes: shapes to tune for (and to sample the gate at).")
@click.option("--max-shapes", default=None, help="Dynamic axes: largest shapes.")
@click.option("--fp16/--no-fp16", default=True, show_default=True)
@click.option("--samples", type=int, default=8, show_default=True, help="Random inputs for the accuracy gate.")
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help=".npz with the gate's inputs, or a folder of pictures (a detector's prepared as it was trained).")
@click.option("--input-range", default=None, help="Random input ranges: input:0,1;other:-1,1 (default 0,1).")
@click.option("--max-batch", type=int, default=None,
              help="A dynamic batch axis given no shapes: build for batches 1..N (default 8).")
@click.option("--criterion", type=click.Choice(["auto", "range", "elementwise"]), default="auto", show_default=True,
              help="range: error relative to each output's range, and cosine; auto: range, but probability and "
                   "class maps by their masks and classes, and a detector by its boxes; elementwise: atol + "
                   "rtol·|fp32|.")
@click.option("--max-range-error", type=float, default=None,
              help=f"range: max |fp16 - fp32| / max |fp32| per output [default: {Criterion.max_range_error}].")
@click.option("--min-cosine", type=float, default=Criterion.min_cosine, show_default=True)
@click.option("--atol", type=float, default=None, help="elementwise: absolute tolerance [default: 0.01].")
@click.option("--rtol", type=float, default=None, help="elementwise: relative tolerance [default: 0.01].")
@click.option("--metric", default=None,
              help="Judge FP16 by the task instead: topk[:K][@OUTPUT], mask[:THR][@OUTPUT], argmax[:AXIS][@OUTPUT], "
                   "boxes[:CONF], lanes, or package.module:function (imported from the current folder too, as --torch "
                   "is).")
@click.option("--task", type=click.Choice(["detect"]), default=None,
              help="The model is an object detector: judged by its boxes, and refused in one line if its outputs "
                   "fit no head orinkit decodes (default: recognized when they fit one).")
@click.option("--head", type=click.Choice(["yolov8", "yolov5", "end2end", "yolox", "efficient_nms", "detr"]),
              default=None, help="--task detect: the head's kind where the graph cannot tell (refused if it does "
                                 "not fit); written into the converted model.")
@click.option("--labels", type=click.Path(path_type=Path), default=None,
              help="--task detect: class names (one a line, or a YAML/JSON list), written into the converted model.")
@click.option("--min-agreement", type=float, default=None, help="--metric: the agreement that passes [default: 0.99].")
@click.option("--gate-budget", type=float, default=60.0, show_default=True,
              help="Seconds the search for FP32 nodes may take; it ends with the best passing set found.")
@click.option("--keep-fp32", default=None, help="Nodes to keep in FP32 whatever the gate says (comma-separated).")
@click.option("--int8", is_flag=True,
              help="INT8 (ModelOpt's Q/DQ), calibrated on --calib and judged like FP16 on held-out samples.")
@click.option("--calib", type=click.Path(path_type=Path), default=None,
              help="--int8: calibration set, a folder of images or an .npz with one array per input.")
@click.option("--calib-method", type=click.Choice(["entropy", "max"]), default=None,
              help="--int8: how ModelOpt picks each range [default: chosen by the gate: a detector tries max "
                   "first, other models entropy, and the other one when the first misses the gate].")
@click.option("--calib-preprocess", default=None,
              help="--int8: package.module:function(image, shape) turning a --calib picture into the input.")
@click.option("--int8-exclude", default=None, help="--int8: nodes kept out of INT8 whatever the gate says.")
@click.option("--int8-min-share", type=float, default=None,
              help="--int8: the least share of Conv/MatMul/Gemm nodes in INT8 for a pass [default: 0.5]; 0 accepts "
                   "any INT8 result that meets the gate.")
@click.option("--nms", is_flag=True,
              help="Put NMS into the TensorRT engine of a YOLOv8/YOLO11, YOLOv5 or YOLOX detector (EfficientNMS "
                   "plugin or INMSLayer, per TensorRT version): it then answers num_dets, det_boxes, det_scores, "
                   "det_classes, and the Python NMS step is skipped. Without TensorRT here, it is recorded for the "
                   "build on the device.")
@click.option("--conf", "nms_conf", type=float, default=None, help="--nms: score threshold [default: 0.25].")
@click.option("--iou", "nms_iou", type=float, default=None, help="--nms: IoU threshold [default: 0.7].")
@click.option("--max-det", "nms_max_det", type=int, default=None, help="--nms: boxes per image [default: 300].")
@click.option("--agnostic", "nms_agnostic", is_flag=True,
              help="--nms: class-agnostic NMS (boxes of any class suppress each other).")
@click.option("--no-simplify", is_flag=True, help="Skip onnxsim.")
@click.option("--workspace", default="auto", show_default=True, help="TensorRT workspace in MiB, or auto.")
@click.option("--timing-cache", type=click.Path(path_type=Path), default=None, help="Timing cache file to reuse.")
@click.option("--dla-core", type=int, default=None, help="Build for this DLA core, with GPU fallback.")
@click.option("--benchmark", is_flag=True, help="Time the engine (throughput, latency percentiles).")
@click.option("--repo", "repository", type=click.Path(path_type=Path), default=None,
              help="Also place the result in this Triton model repository (it must exist, unless --create).")
@click.option("--create", is_flag=True, help="--repo: start a new repository if it does not exist yet.")
@click.option("--name", default=None, help="Model name in --repo (default: the model's name).")
@click.option("--runtime", type=click.Choice(["auto", "onnxruntime_onnx", "python-onnxruntime"]), default="auto",
              show_default=True, help="--repo without a plan: how the ONNX model runs.")
@click.option("--verify-engine", "verify_plan", type=click.Path(path_type=Path), default=None,
              help="Check that this plan matches the device and TensorRT; rebuild it from MODEL when not.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout (progress on stderr).")
def main(model, torch_factory, torch_inputs, output_names, dynamic_batch, opset, output, force, shapes, min_shapes,
         opt_shapes, max_shapes, fp16, samples, data, input_range, max_batch, criterion, max_range_error, min_cosine,
         atol, rtol, metric, task, head, labels, min_agreement, gate_budget, keep_fp32, int8, calib, calib_method,
         calib_preprocess, int8_exclude, int8_min_share, nms, nms_conf, nms_iou, nms_max_det, nms_agnostic,
         no_simplify, workspace, timing_cache, dla_core, benchmark, repository, create, name, runtime, verify_plan,
         as_json) -> None:
    """Convert MODEL (.onnx) or a --torch model: validate, simplify, gate FP16, and build a TensorRT plan."""
    echo = (lambda m: click.echo(m, err=True)) if as_json else click.echo
    try:
        if verify_plan is not None:
            _verify(verify_plan, model, echo)
            return
        if (model is None) == (torch_factory is None):
            raise ConvertError("give either MODEL (an .onnx file) or --torch package.module:factory",
                               hint="edge-convert model.onnx, or edge-convert --torch pkg.mod:build "
                                    "--input x:1x3x224x224")
        options = ConvertOptions(
            shapes=parse_shapes(shapes), min_shapes=parse_shapes(min_shapes, flag="--min-shapes"),
            opt_shapes=parse_shapes(opt_shapes, flag="--opt-shapes"),
            max_shapes=parse_shapes(max_shapes, flag="--max-shapes"), max_batch=max_batch, fp16=fp16,
            criterion=_criterion(criterion, max_range_error, min_cosine, atol, rtol), metric=metric,
            min_agreement=min_agreement, gate_budget=gate_budget,
            keep_fp32=_names(keep_fp32), samples=samples, data=data,
            input_ranges=parse_ranges(input_range), simplify=not no_simplify, workspace=_workspace(workspace),
            timing_cache=timing_cache, dla_core=dla_core, benchmark=benchmark, int8=int8, calib=calib,
            calib_method=calib_method, calib_preprocess=calib_preprocess, int8_exclude=_names(int8_exclude),
            int8_min_share=int8_min_share,
            nms=nms, nms_conf=nms_conf, nms_iou=nms_iou, nms_max_det=nms_max_det, nms_agnostic=nms_agnostic,
            detector=_detector(task, head, labels),
        )
        # A --torch factory's name is a verb (build, create): the output is named for the model (--name), else
        # for the module that holds the factory (mypkg.models:build -> models.edge).
        stem = model.stem if model is not None else name or torch_factory.partition(":")[0].rpartition(".")[2]
        if repository is not None:
            _check_repository(repository, create, name or stem)
        else:
            _refuse_without_repo(create=create, name=name, runtime=runtime)
        output = output or Path(f"{stem}.edge")
        if torch_factory is not None:
            from orinkit.convert.torch_export import load_factory

            names, tensors = _torch_inputs(torch_inputs)
            result = convert_torch(load_factory(torch_factory), tensors, output, options, input_names=names,
                                   output_names=list(output_names) or None, dynamic_batch=dynamic_batch,
                                   opset=opset, force=force, progress=echo)
        else:
            result = convert_onnx(model, output, options, force=force, progress=echo)
        echo(f"wrote {result.output}: " + ", ".join(p.name for p in result.artifacts.values()))
        if repository is not None:
            _place(result, repository, name or stem, runtime, echo)
        if as_json:
            click.echo(json.dumps(result.report(), indent=2))
    except OrinkitError as exc:
        raise CommandError(exc) from exc


def _verify(plan: Path, onnx: Path | None, echo) -> None:
    from orinkit.convert.verify import ensure_engine

    verdict, rebuilt = ensure_engine(plan, onnx, progress=echo)
    echo(verdict.describe())
    if rebuilt:
        echo(f"rebuilt {plan} from {onnx}")


if __name__ == "__main__":
    sys.exit(main())
