"""A plan's I/O and profiles read from the engine itself, where TensorRT is installed (8.5 or newer: tensor-name API).

The manifest beside a plan is the usual source; this reads the plan when there is none. TensorRT is imported on
call, so the package stays importable without it.
"""

from __future__ import annotations

import os
from pathlib import Path

from orinkit.formats.dtypes import from_tensorrt
from orinkit.formats.errors import ManifestError
from orinkit.formats.manifest import EngineManifest, ProfileShape
from orinkit.formats.tensors import TensorSpec


def describe_engine(plan: str | os.PathLike[str]) -> EngineManifest:
    """Read I/O and profiles from the plan itself, on a device with TensorRT (8.5 or newer: tensor-name API)."""
    from orinkit.core.optional import require

    trt = require("tensorrt")
    runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
    engine = runtime.deserialize_cuda_engine(Path(plan).read_bytes())
    if engine is None:
        raise ManifestError(
            f"{plan} does not load with TensorRT {trt.__version__} on this GPU",
            hint="plans are tied to the TensorRT version and GPU that built them: rebuild it here with edge-convert",
        )
    inputs, outputs = [], []
    for index in range(engine.num_io_tensors):
        name = engine.get_tensor_name(index)
        info = TensorSpec(name, from_tensorrt(engine.get_tensor_dtype(name)).triton,
                          tuple(engine.get_tensor_shape(name)))
        (inputs if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT else outputs).append(info)
    profiles = tuple(
        {t.name: ProfileShape(*(tuple(s) for s in engine.get_tensor_profile_shape(t.name, p))) for t in inputs}
        for p in range(engine.num_optimization_profiles)
    )
    return EngineManifest(inputs=tuple(inputs), outputs=tuple(outputs), profiles=profiles,
                          build={"tensorrt_version": trt.__version__})
