"""Inputs for the accuracy gate: random samples within declared ranges, or the user's own (``--data file.npz``)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from orinkit.convert.errors import SampleDataError, ShapeSpecError

Sample = dict[str, np.ndarray]
DEFAULT_RANGE = (0.0, 1.0)


def parse_ranges(text: str | None) -> dict[str, tuple[float, float]]:
    """``"input:0,1;mask:0,255"`` → {name: (low, high)}."""
    ranges = {}
    for item in filter(None, (text or "").split(";")):
        match = re.fullmatch(r"\s*(.+?):\s*(-?[\d.eE+-]+)\s*,\s*(-?[\d.eE+-]+)\s*", item)
        if not match or float(match[2]) >= float(match[3]):
            raise ShapeSpecError(f"--input-range item '{item}' is not NAME:LOW,HIGH with LOW < HIGH",
                                 hint="write e.g. input:0,1")
        ranges[match[1]] = (float(match[2]), float(match[3]))
    return ranges


def random_samples(
    inputs: Mapping[str, tuple[np.dtype, tuple[int, ...]]],
    count: int,
    *,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    seed: int = 0,
) -> list[Sample]:
    """``count`` samples, uniform in each input's range (default [0, 1): images scaled to 1)."""
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
            values = rng.uniform(low, high, size=shape)
            sample[name] = (np.floor(values) if np.issubdtype(dtype, np.integer) else values).astype(dtype)
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
            array = archive[name]
            if array.ndim == len(shape) and shape[:1] == (1,) and array.shape[1:] == tuple(shape[1:]):
                array = array[:, None]  # a batch of frames for a model tuned for batch 1: one sample per frame
            elif array.ndim == len(shape):
                array = array[None]
            if array.ndim != len(shape) + 1 or any(s not in (-1, a) for s, a in zip(shape, array.shape[1:])):
                raise SampleDataError(f"array '{name}' in {path} has shape {list(array.shape)}, but the input is "
                                      f"{list(shape)}", hint="match the input's shape, optionally with a leading "
                                      "sample axis")
            stacked[name] = array.astype(dtype, copy=False)
    counts = {len(a) for a in stacked.values()}
    if len(counts) != 1:
        raise SampleDataError(f"arrays in {path} hold different sample counts {sorted(counts)}",
                              hint="give every input the same number of samples")
    return [{name: array[i] for name, array in stacked.items()} for i in range(counts.pop())]
