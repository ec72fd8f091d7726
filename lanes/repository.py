"""The ``lane_detection`` ensemble laid out with orinkit's repository library.

    image (JPEG/PNG bytes) ─ lane_preprocess ─ pixels ─ lane_model ─ proposals ─ lane_postprocess ─ lanes, scores, count
                                   └──────────── original_size ────────────────────────┘
"""

from __future__ import annotations

import os
from dataclasses import replace
from importlib import resources
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from orinkit.lanes.postprocess import PostprocessOptions
from orinkit.repo.add import PlacedModel, add_model
from orinkit.repo.layout import placing_together
from orinkit.repo.ensemble import add_ensemble
from orinkit.repo.options import ModelOptions
from orinkit.repo.signature import TensorSpec
from orinkit.repo.steps import ImagePreprocess, add_step

ENSEMBLE, PRE, MODEL, POST = "lane_detection", "lane_preprocess", "lane_model", "lane_postprocess"
N_POINTS = 72


def preprocess_step(dtype: str = "FP32") -> ImagePreprocess:
    """LaneATT's input: BGR as cv2.imread gives it, resized to 640x360 (bilinear), divided by 255, CHW."""
    return ImagePreprocess(width=640, height=360, color_order="BGR", scale=1 / 255, dtype=dtype,
                           interpolation="bilinear")


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
    postprocess: PostprocessOptions = PostprocessOptions(),
    runtime: str | None = None,
    max_batch_size: int = 4,
    progress=lambda message: None,
) -> dict[str, PlacedModel | Path]:
    """Place the lane model (a plan, or an ONNX file with ``runtime``), the pre- and post-processing steps and
    the ensemble over them into ``repository``: all four, or, if any cannot be placed, none. A model with FP16
    input and output (``export_lane_onnx(..., fp16_io=True)``) gets FP16 pre-processing and post-processing."""
    with placing_together(Path(repository)) as staging:
        placed = _build(staging, model_artifact, postprocess, runtime, max_batch_size, progress)
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
    k = postprocess.top_k
    with resources.as_file(resources.files("orinkit.lanes").joinpath("triton_postprocess.py")) as source:
        post = add_model(
            repository, source, name=POST,
            inputs=[TensorSpec("PROPOSALS", proposals_dtype, (count, width)),
                    TensorSpec("ORIGINAL_SIZE", "INT32", (2,))],
            outputs=[TensorSpec("LANES", "FP32", (k, N_POINTS, 2)), TensorSpec("SCORES", "FP32", (k,)),
                     TensorSpec("COUNT", "INT32", (1,))],
            options=replace(batching, parameters=(("conf_threshold", repr(postprocess.conf_threshold)),
                                                  ("nms_threshold", repr(postprocess.nms_threshold)),
                                                  ("top_k", str(k)))),
        )
    ensemble = add_ensemble(repository, ensemble_spec())
    progress(f"placed {PRE}, {POST} and the ensemble {ENSEMBLE}")
    return {"model": model, "preprocess": pre, "postprocess": post, "ensemble": ensemble}
