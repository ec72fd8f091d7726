"""Inputs for the accuracy gate: random samples within declared ranges, or the user's own (``--data file.npz``).

Every input gets a sample whatever its rank (a 0-d sample rate beside an audio tensor included) and whatever its
ONNX element type; each sample value is an ``np.ndarray`` (onnxruntime refuses numpy scalars).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from orinkit.convert.errors import SampleDataError, ShapeSpecError

Sample = dict[str, np.ndarray]
DEFAULT_RANGE = (0.0, 1.0)
_SUB_BYTE_INTEGERS = {"int2", "uint2", "int4", "uint4"}  # ml_dtypes' kinds numpy does not call integers


def input_dtypes(model) -> dict[str, np.dtype]:
    """The numpy dtype of every graph input that is not an initializer, for every ONNX element type (bfloat16 and
    the 8-, 4- and 2-bit types as ml_dtypes gives them, strings as object)."""
    from onnx import helper

    initializers = {i.name for i in model.graph.initializer}
    return {i.name: np.dtype(helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
            for i in model.graph.input if i.name not in initializers}


def is_integer(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.integer) or dtype.name in _SUB_BYTE_INTEGERS


def describe_default(name: str, dtype: np.dtype, shape: tuple[int, ...]) -> str | None:
    """What random samples give a non-float input by default, and how to give real values; None for floats."""
    what = "scalar" if not shape else "x".join(map(str, shape))
    if dtype == np.bool_:
        drawn = "random booleans"
    elif is_integer(dtype):
        drawn = f"random integers {DEFAULT_RANGE[0]:g}..{DEFAULT_RANGE[1]:g}"
    elif dtype.kind in "OSU":
        drawn = "random short strings"
    else:
        return None
    return (f"input '{name}' ({dtype.name}, {what}) gets {drawn}; give its real values with --data, or "
            f"--input-range {name}:LOW,HIGH (LOW = HIGH for one value)")


def parse_ranges(text: str | None) -> dict[str, tuple[float, float]]:
    """``"input:0,1;mask:0,255;sr:16000,16000"`` → {name: (low, high)}; LOW = HIGH gives that one value."""
    ranges = {}
    for item in filter(None, (text or "").split(";")):
        match = re.fullmatch(r"\s*(.+?):\s*(-?[\d.eE+-]+)\s*,\s*(-?[\d.eE+-]+)\s*", item)
        try:
            low, high = (float(match[2]), float(match[3])) if match else (math.nan, math.nan)
        except ValueError:
            low = high = math.nan
        if not low <= high:
            raise ShapeSpecError(f"--input-range item '{item}' is not NAME:LOW,HIGH with LOW <= HIGH",
                                 hint="write e.g. input:0,1")
        ranges[match[1]] = (low, high)
    return ranges


def _draw(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
    if dtype == np.bool_:
        return np.asarray(rng.random(size=shape) < 0.5)
    if is_integer(dtype):
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
        else:
            import ml_dtypes  # onnx's own dependency, which gives numpy its 4- and 2-bit types

            info = ml_dtypes.iinfo(dtype)
        first, last = max(math.ceil(low), int(info.min)), min(math.floor(high), int(info.max))
        if first > last:
            raise ShapeSpecError(f"the range {low:g}..{high:g} holds no {dtype.name} value",
                                 hint=f"give --input-range within {info.min}..{info.max}")
        return np.asarray(rng.integers(first, last, size=shape, endpoint=True)).astype(dtype)
    if dtype.kind in "OSU":
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz "))
        words = ["".join(rng.choice(letters, size=int(rng.integers(1, 12)))) for _ in range(math.prod(shape))]
        return np.array(words, dtype=object).reshape(shape)
    values = rng.uniform(low, high, size=shape)
    if dtype.kind == "c":
        values = values + 1j * rng.uniform(low, high, size=shape)
    return np.asarray(values).astype(dtype)


def random_samples(
    inputs: Mapping[str, tuple[np.dtype, tuple[int, ...]]],
    count: int,
    *,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    seed: int = 0,
) -> list[Sample]:
    """``count`` samples, uniform in each input's range (default [0, 1): images scaled to 1; integers 0..1,
    both ends included, so that an index stays within any table; booleans either way)."""
    unknown = sorted(set(ranges or {}) - set(inputs))
    if unknown:
        raise ShapeSpecError(f"ranges name {', '.join(unknown)}, which are not inputs",
                             hint=f"the inputs are {', '.join(inputs)}")
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(count):
        sample = {}
        for name, (dtype, shape) in inputs.items():
            low, high = (ranges or {}).get(name, DEFAULT_RANGE)
            sample[name] = _draw(rng, np.dtype(dtype), tuple(shape), low, high)
        samples.append(sample)
    return samples


def load_samples(path: str | os.PathLike[str], inputs: Mapping[str, tuple[np.dtype, tuple[int, ...]]]
                 ) -> list[Sample]:
    """Samples from an .npz holding one array per input name: the input's shape (one sample), with an extra
    leading axis (several), or, for an input shaped for batch 1, a batch of N (N samples of batch 1)."""
    path = Path(path)
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise SampleDataError(f"{path} is not a readable .npz file: {exc}", hint="save it with numpy.savez") from exc
    with archive:
        missing = sorted(set(inputs) - set(archive.files))
        if missing:
            raise SampleDataError(f"{path} lacks arrays for inputs {', '.join(missing)}",
                                  hint=f"save one array per input: {', '.join(inputs)}")
        stacked = {}
        for name, (dtype, shape) in inputs.items():
            given = archive[name]
            array = given
            if array.ndim == len(shape) and shape[:1] == (1,) and array.shape[1:] == tuple(shape[1:]):
                array = array[:, None]  # a batch of frames for a model tuned for batch 1: one sample per frame
            elif array.ndim == len(shape):
                array = array[None]
            if array.ndim != len(shape) + 1 or any(s not in (-1, a) for s, a in zip(shape, array.shape[1:])):
                raise SampleDataError(f"array '{name}' in {path} has shape {list(given.shape)}, but the input is "
                                      f"{list(shape)}", hint="match the input's shape, optionally with a leading "
                                      "sample axis")
            stacked[name] = array.astype(dtype, copy=False)
    counts = {len(a) for a in stacked.values()}
    if len(counts) != 1:
        raise SampleDataError(f"arrays in {path} hold different sample counts {sorted(counts)}",
                              hint="give every input the same number of samples")
    # ``array[i, ...]`` stays an ndarray for a 0-d input, where ``array[i]`` would be a numpy scalar.
    return [{name: array[i, ...] for name, array in stacked.items()} for i in range(counts.pop())]


def data_samples(path: str | os.PathLike[str], inputs: Mapping[str, tuple[np.dtype, tuple[int, ...]]], head=None,
                 progress=lambda message: None, notes: list[str] | None = None) -> list[Sample]:
    """--data: an .npz of prepared inputs, or a folder of pictures: a detector's (``head``) prepared as its family
    was trained (:mod:`orinkit.convert.detection`), another model's stretched to its input and scaled to 0..1."""
    if not Path(path).is_dir():
        return load_samples(path, inputs)
    if head is not None:
        from orinkit.convert import detection

        samples, note = detection.samples(head, inputs, None, Path(path))
        progress(f"  {note}")
        if notes is not None:
            notes.append(note)
        return samples
    from orinkit.convert.int8.calibration import picture_samples

    return picture_samples(Path(path), inputs, progress=progress)


def picture_preprocess(spec: str | None, head=None):
    """How a --calib picture becomes the input: --calib-preprocess ``spec``, else a detector's own preparation,
    else None (stretched and scaled to 0..1)."""
    from orinkit.convert.int8.options import load_preprocess

    given = load_preprocess(spec)
    if given is not None or head is None:
        return given
    from orinkit.convert import detection

    return detection.picture_preprocess(head)
