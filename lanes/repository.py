"""The ``lane_detection`` ensemble laid out with orinkit's repository library.

    image (JPEG/PNG bytes) ─ lane_preprocess ─ pixels ─ lane_model ─ proposals ─ lane_postprocess ─ lanes, scores, count
                                   └──────────── original_size ────────────────────────┘
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from orinkit.lanes.postprocess import PostprocessOptions
from orinkit.repo.add import PlacedModel, add_model
from orinkit.repo.ensemble import add_ensemble
from orinkit.repo.layout import placing_together
from orinkit.repo.options import ModelOptions
from orinkit.repo.python_model import PythonModelSpec, add_python_model
from orinkit.repo.signature import Signature, TensorSpec
from orinkit.repo.steps import ImagePreprocess, add_step

ENSEMBLE, PRE, MODEL, POST = "lane_detection", "lane_preprocess", "lane_model", "lane_postprocess"
N_POINTS = 72


def preprocess_step(dtype: str = "FP32") -> ImagePreprocess:
    """LaneATT's input: BGR as cv2.imread gives it, resized to 640x360 (bilinear), divided by 255, CHW."""
    return ImagePreprocess(width=640, height=360, color_order="BGR", scale=1 / 255, dtype=dtype,
                           interpolation="bilinear")


def postprocess_spec(proposals_dtype: str, proposals_dims: tuple[int, int], options: PostprocessOptions,
                     max_batch_size: int) -> PythonModelSpec:
    """lane_postprocess: orinkit.lanes.triton_postprocess with orinkit.lanes.postprocess inlined (numpy only)."""
    k = options.top_k
    signature = Signature(
        (TensorSpec("PROPOSALS", proposals_dtype, proposals_dims), TensorSpec("ORIGINAL_SIZE", "INT32", (2,))),
        (TensorSpec("LANES", "FP32", (k, N_POINTS, 2)), TensorSpec("SCORES", "FP32", (k,)),
         TensorSpec("COUNT", "INT32", (1,))),
        max_batch_size)
    parameters = {"conf_threshold": repr(options.conf_threshold), "nms_threshold": repr(options.nms_threshold),
                  "top_k": str(k)}
    return PythonModelSpec("orinkit.lanes.triton_postprocess", signature, parameters)


def ensemble_spec() -> dict:
    return {
        "name": ENSEMBLE,
        "steps": [
            {"model": PRE, "inputs": {"IMAGE": "image"},
             "outputs": {"TENSOR": "pixels", "ORIGINAL_SIZE": "original_size"}},
            {"model": MODEL, "inputs": {"image": "pixels"}, "outputs": {"proposals": "proposals"}},
            {"model": POST, "inputs": {"PROPOSALS": "proposals", "ORIGINAL_SIZE": "original_size"},
             "outputs": {"LANES": "lanes", "SCORES": "scores", "COUNT": "count"}},
        ],
        "outputs": ["lanes", "scores", "count"],
    }


def build_lane_repository(
    repository: str | os.PathLike[str],
    model_artifact: str | os.PathLike[str],
    *,
    postprocess: PostprocessOptions | None = None,
    runtime: str | None = None,
    max_batch_size: int = 4,
    progress=lambda message: None,
) -> dict[str, PlacedModel | Path]:
    """Place the lane model (a plan, or an ONNX file with ``runtime``), the pre- and post-processing steps and
    the ensemble over them into ``repository``: all four, or, if any cannot be placed, none. A model with FP16
    input and output (``export_lane_onnx(..., fp16_io=True)``) gets FP16 pre-processing and post-processing."""
    with placing_together(Path(repository)) as staging:
        placed = _build(staging, model_artifact, postprocess or PostprocessOptions(), runtime, max_batch_size,
                        progress)
    return {key: (_moved(value, Path(repository)) if isinstance(value, PlacedModel) else Path(repository) / value.name)
            for key, value in placed.items()}


def _moved(placed: PlacedModel, repository: Path) -> PlacedModel:
    return replace(placed, path=repository / placed.name)


def _build(repository: Path, model_artifact, postprocess: PostprocessOptions, runtime, max_batch_size: int,
           progress) -> dict:
    batching = ModelOptions(max_batch_size=max_batch_size, dynamic_batching=True)
    model = add_model(repository, model_artifact, name=MODEL, runtime=runtime, options=batching)
    progress(f"placed {MODEL} as {model.runtime.value}" + (f" ({model.note})" if model.note else ""))
    dtype = "FP16" if model.config.input[0].data_type == mc.TYPE_FP16 else "FP32"
    proposals_dtype = "FP16" if model.config.output[0].data_type == mc.TYPE_FP16 else "FP32"
    pre = add_step(repository, preprocess_step(dtype), name=PRE, max_batch_size=max_batch_size)
    count, width = (int(d) for d in model.config.output[0].dims)
    post = add_python_model(repository, postprocess_spec(proposals_dtype, (count, width), postprocess,
                                                         max_batch_size), name=POST, options=batching)
    ensemble = add_ensemble(repository, ensemble_spec())
    progress(f"placed {PRE}, {POST} and the ensemble {ENSEMBLE}")
    return {"model": model, "preprocess": pre, "postprocess": post, "ensemble": ensemble}
