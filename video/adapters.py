"""How a model meets video frames: what a frame becomes as the model's inputs, and what its outputs become as an
answer, a JSON record and a drawing. ``adapter_for`` asks the task kits (``orinkit.core.kits``) for a model's
adapter and falls back to the generic :class:`ImageAdapter`: video/ knows no task of its own (lanes, detections),
so a new task is a new kit, not an edit here."""

from __future__ import annotations

from typing import Any

import numpy as np

from orinkit.video.frames import Frame


class Adapter:
    """The contract. ``size`` is the (width, height) the decoder should scale frames to, or None to keep the
    source's size; ``inputs`` are one frame's tensors, without a batch axis, as the pipeline passes them to the
    Client's ``submit`` (which tells a sample from a batch by the shapes)."""

    size: tuple[int, int] | None = None

    def inputs(self, frame: Frame) -> tuple:
        raise NotImplementedError

    def answer(self, outputs: Any, frame: Frame) -> tuple[Any, dict]:
        """The answer (any object sinks may draw) and its JSON-able record."""
        raise NotImplementedError

    def draw(self, image: np.ndarray, answer: Any) -> np.ndarray:
        """A BGR uint8 copy of ``image`` (the frame as decoded) with the answer drawn on it. Sinks call the
        adapter given to them (not each source's): what is drawn must come from ``answer`` alone."""
        return image

    def for_source(self, name: str) -> Adapter:
        """The adapter for the source called ``name``. The pipeline asks once per source before its first frame
        and answers that source's frames with it, in their order, on one thread: an adapter that keeps state
        across frames (a tracker) returns a copy of its own here, so that each camera has its own. Default: this
        adapter, which keeps none."""
        return self

    def summary(self) -> dict | None:
        """What this (source's) adapter has to say about the whole stream, JSON-able (a detector's distinct tracks
        per class), asked once at the end; None: nothing."""
        return None


# The command-line spelling of an adapter option, for the one-line refusal.
_FLAGS = {"track": "--track/--no-track"}

# A JSON line carries an output's values only up to this many; bigger ones (a detector's raw proposals) are
# summarised, so that a results file stays a log and not a dump.
RECORD_VALUES = 256


class ImageAdapter(Adapter):
    """Any model whose one input is an image: encoded bytes (JPEG; a model behind orinkit's image_preprocess step
    or an ensemble over it) or raw BGR pixels (UINT8 [H, W, 3], scaled to H x W by the decoder when fixed)."""

    def __init__(self, kind: str, size: tuple[int, int] | None = None, quality: int = 90, *,
                 output: str = "output") -> None:
        self.kind, self.size, self.quality, self.output = kind, size, quality, output

    def inputs(self, frame: Frame) -> tuple:
        if self.kind == "bytes":
            return (np.array([jpeg(frame.image, self.quality)], dtype=np.object_),)
        return (frame.image,)

    def answer(self, outputs: Any, frame: Frame) -> tuple[Any, dict]:
        named = outputs if isinstance(outputs, dict) else {self.output: outputs}
        return outputs, {name: _record(np.asarray(value)) for name, value in named.items()}


def _record(array: np.ndarray):
    if array.dtype == np.object_:
        values = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in array.reshape(-1).tolist()]
        return values[:RECORD_VALUES]
    if array.size <= RECORD_VALUES:
        return np.round(array.astype(np.float64), 4).tolist() if array.dtype.kind == "f" else array.tolist()
    finite = array[np.isfinite(array)] if array.dtype.kind == "f" else array
    return {"shape": list(array.shape), "dtype": str(array.dtype),
            "min": float(finite.min()) if finite.size else None, "max": float(finite.max()) if finite.size else None}


def jpeg(image: np.ndarray, quality: int = 90) -> bytes:
    """A BGR frame as JPEG bytes (Pillow; about 1 ms at 640x360 on this 2-core x86, where PNG costs 40-60 ms)."""
    import io

    from PIL import Image

    height, width = image.shape[:2]
    buffer = io.BytesIO()
    # Pillow reads the BGR buffer as it is: no reversed copy of the frame.
    Image.frombuffer("RGB", (width, height), np.ascontiguousarray(image), "raw", "BGR", 0, 1).save(
        buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def adapter_for(info, **options) -> Adapter:
    """The adapter for a model (``info``: the Client's ModelInfo): the adapter of the task kit that recognizes it
    (``orinkit.core.kits.kit_for``), with ``options`` (``track=`` for a detector); otherwise the generic
    :class:`ImageAdapter` from the signature, which takes no option."""
    from orinkit.core.kits import kit_for
    from orinkit.video.errors import UnsupportedSourceError

    kit = kit_for(info)
    if kit is not None:
        return kit.adapter(info, **options)
    if options:
        flags = ", ".join(_FLAGS.get(name, "--" + name.replace("_", "-")) for name in sorted(options))
        what = "applies to detectors" if "track" in options else "applies to task models (lanes, detectors)"
        raise UnsupportedSourceError(
            f"{flags} {what}, and '{info.name}' is none that an installed task kit recognizes",
            hint=f"leave {flags} out for this model (its outputs are written as they come)")
    if len(info.inputs) != 1:
        raise UnsupportedSourceError(
            f"'{info.name}' takes {len(info.inputs)} inputs; a video frame fills one",
            hint="serve a model (or an ensemble) whose one input is an image")
    tensor = info.inputs[0]
    output = info.outputs[0].name if info.outputs else "output"
    dims = tuple(tensor.dims)
    if tensor.dtype == "BYTES":
        return ImageAdapter("bytes", output=output)
    if tensor.dtype == "UINT8" and len(dims) == 3 and dims[2] == 3:
        size = (dims[1], dims[0]) if dims[0] > 0 and dims[1] > 0 else None
        return ImageAdapter("pixels", size, output=output)
    raise UnsupportedSourceError(
        f"'{info.name}' takes {tensor.dtype} {list(dims)}: orinkit cannot guess how it wants pixels normalised",
        hint="put orinkit's image step in front (edge-repo step image-preprocess, in an ensemble taking JPEG), or "
             "serve a model taking UINT8 [H, W, 3] BGR")
