"""The calibration set (``--calib DIR|FILE.npz``) and the held-out samples the INT8 gate judges on.

An .npz holds one array per input, as ``--data`` does. A folder holds images: each is decoded with Pillow, turned
to the input's channels (1: grey, 3: RGB), resized to its height and width, laid out NCHW and scaled to 0..1, or
given to ``--calib-preprocess package.module:function`` (the model's own pre-processing: ``function(image,
shape)`` → array of that shape).

The gate never judges on a calibration sample: scales fitted to a sample flatter the model on it. With ``--data``
the gate's samples must share none with the calibration set; without it, a share of the calibration set is held
out for the gate (and not calibrated on).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orinkit.convert.errors import CalibrationDataError, SampleDataError
from orinkit.convert.samples import Sample, load_samples

# Fewer samples than this give entropy calibration too few activations to place a threshold (ModelOpt's and
# TensorRT's guides use hundreds; 32 is the least that gave stable scales on the models tried).
MIN_CALIBRATION = 32
HELD_OUT_SHARE = 0.2  # of the calibration set, judged on when --data is not given
MIN_HELD_OUT = 8
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp")


@dataclass(frozen=True)
class CalibrationSet:
    samples: list[Sample]  # calibration only
    held_out: list[Sample]  # the gate's samples: never calibrated on
    sha256: str  # of the calibration arrays, for the manifest
    source: str
    note: str = ""

    def stacked(self) -> dict[str, np.ndarray]:
        """One array per input, samples along axis 0 (batch-1 inputs: the batch axis is the sample axis)."""
        first = self.samples[0]
        return {name: np.concatenate([s[name] for s in self.samples]) if first[name].ndim
                else np.stack([s[name] for s in self.samples]) for name in first}


def digest(samples: Sequence[Sample]) -> str:
    hasher = hashlib.sha256()
    for sample in samples:
        for name in sorted(sample):
            hasher.update(name.encode())
            hasher.update(np.ascontiguousarray(sample[name]).tobytes())
    return hasher.hexdigest()


def _sample_key(sample: Sample) -> str:
    return digest([sample])


def load_calibration(path: Path, inputs: Mapping[str, tuple[np.dtype, tuple[int, ...]]], *,
                     held_out: Sequence[Sample] | None = None, preprocess: Callable | None = None,
                     min_samples: int = MIN_CALIBRATION,
                     progress: Callable[[str], None] = lambda m: None) -> CalibrationSet:
    """The calibration set at ``path`` for ``inputs`` (name → (dtype, opt shape)); ``held_out`` the gate's own
    samples (--data), else a share of the set is held out."""
    path = Path(path)
    if path.is_dir():
        samples = _images(path, inputs, preprocess, progress)
    elif path.is_file():
        try:
            samples = load_samples(path, inputs)
        except CalibrationDataError:
            raise
        except SampleDataError as exc:
            raise CalibrationDataError(f"--calib: {exc.message}", hint=exc.hint) from exc
    else:
        raise CalibrationDataError(f"--calib {path} does not exist",
                                   hint="give a folder of images or an .npz with one array per input")
    note = ""
    if held_out is None:
        count = max(MIN_HELD_OUT, int(len(samples) * HELD_OUT_SHARE))
        samples, held_out = samples[:-count], samples[-count:]
        note = f"the gate judges on {count} samples held out of the calibration set (give --data for your own)"
    else:
        seen = {_sample_key(s) for s in samples}
        shared = sum(_sample_key(s) in seen for s in held_out)
        if shared:
            raise CalibrationDataError(
                f"{shared} of the gate's {len(held_out)} --data samples are also in the calibration set: the gate "
                "would judge INT8 on samples its scales were fitted to", hint="give --data samples the --calib set "
                "does not hold, or leave out --data (a share of --calib is then held out)")
    if len(samples) < min_samples:
        raise CalibrationDataError(
            f"--calib {path} gives {len(samples)} calibration samples" + (" after holding out the gate's" if note
                                                                        else "") + f"; at least {min_samples} are "
            "needed", hint="add samples (a few hundred real inputs is best), or give --data for the gate so all of "
                           "--calib calibrates")
    return CalibrationSet(samples, list(held_out), digest(samples), str(path), note)


def _images(folder: Path, inputs, preprocess, progress, flag: str = "--calib") -> list[Sample]:
    if len(inputs) != 1:
        raise CalibrationDataError(f"{flag} {folder} is a folder of images, but the model has {len(inputs)} inputs",
                                   hint="give an .npz with one array per input")
    (name, (dtype, shape)), = inputs.items()
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise CalibrationDataError(f"{flag} {folder} holds no images ({', '.join(IMAGE_SUFFIXES[:4])}, ...)",
                                   hint="put the model's real inputs there as pictures, or give an .npz")
    if preprocess is None and (len(shape) != 4 or shape[1] not in (1, 3)):
        raise CalibrationDataError(
            f"input '{name}' has shape {list(shape)}, not NCHW with 1 or 3 channels: orinkit cannot turn pictures "
            "into it", hint="give --calib-preprocess package.module:function (the model's own pre-processing), or "
                            "an .npz")
    from orinkit.core.optional import require

    image_module = require("PIL.Image")
    samples = []
    for index, file in enumerate(files):
        if index % 64 == 0:
            progress(f"  reading {flag} images: {index}/{len(files)}")
        try:
            with image_module.open(file) as image:
                image.load()
                array = preprocess(image, shape) if preprocess else _default(image, shape)
        except (OSError, ValueError) as exc:
            raise CalibrationDataError(f"{flag} image {file} cannot be read ({exc})",
                                       hint="remove it or replace it with a valid picture") from exc
        array = np.asarray(array)
        if tuple(array.shape) != tuple(shape):
            raise CalibrationDataError(f"--calib-preprocess gave shape {list(array.shape)} for {file.name}, but "
                                       f"input '{name}' is {list(shape)}", hint="return an array of the input's shape")
        samples.append({name: array.astype(dtype, copy=False)})
    return samples


def picture_samples(folder: Path, inputs, *, progress=lambda message: None) -> list[Sample]:
    """--data DIR for a model that is no detector: each picture stretched to the input and scaled to 0..1."""
    try:
        return _images(folder, inputs, None, progress, flag="--data")
    except CalibrationDataError as exc:
        raise SampleDataError(exc.message, hint=exc.hint) from None


def _default(image, shape: tuple[int, ...]) -> np.ndarray:
    _, channels, height, width = shape
    image = image.convert("L" if channels == 1 else "RGB").resize((width, height))
    array = np.asarray(image, dtype=np.float32) / 255.0
    array = array[None] if channels == 1 else array.transpose(2, 0, 1)
    return array[None]


def save_npz(calibration: CalibrationSet, path: Path) -> Path:
    """The calibration arrays as ModelOpt's child reads them."""
    with open(path, "wb") as handle:
        np.savez(handle, **calibration.stacked())
    return path
