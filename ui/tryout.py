"""The library under the device page's "Try" panel: which models take an image, and one image run through one.

:func:`image_input` reads from a model's config how it takes an image (or that it takes none); :func:`try_image`
checks the upload (bytes and pixel count from the header, before anything is decoded), prepares it, runs one
inference, and reads the outputs as the answer the page draws: the task kit that recognizes the model first
(:mod:`orinkit.ui.tasks`: a detector's boxes), else :mod:`orinkit.ui.tryout_answers`, which says how each generic
kind is recognised.

See :mod:`orinkit.ui.tryout_inputs` for what :func:`image_input` recognises and how a tensor is made.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field

import numpy as np

from orinkit.client.errors import InferenceFailedError, InvalidInputError
from orinkit.formats.dtypes import dtype as lookup_dtype
from orinkit.ui import tasks
from orinkit.ui import tryout_answers as answers
from orinkit.ui import tryout_images as images
from orinkit.ui.errors import UiError
from orinkit.ui.tryout_inputs import ImageInput, data_type, examine, image_input

KINDS = ("detections", "classes", "lanes", "image", "tensor")
IMAGE_INPUT_HINT = ("try a model whose one input is an encoded image file (BYTES [1], or UINT8 [-1] one byte per "
                    "element) or a 1- or 3-channel image tensor (CHW or HWC)")


class TryError(UiError):
    """Base of the "Try" panel's own errors (the client's errors reach the caller as they are)."""


class NotAnImageModelError(TryError):
    """The model takes no image, or takes one in a way the panel cannot feed."""


class BadImageError(TryError):
    """The upload is not an image, is damaged, or is over the byte or pixel limit."""


class UnknownOutputError(TryError, KeyError):
    """TryResult.npy was asked for an output the result does not hold (a KeyError too, for ``except KeyError``)."""


def _bad_image(message: str, hint: str) -> BadImageError:
    return BadImageError(message, hint=hint)


@dataclass
class TryResult:
    model: str
    kind: str  # a task kit's kind ("detections", ...) | "classes" | "lanes" | "image" | "tensor"
    latency_ms: float  # the inference call only, measured by the client
    answer: dict  # JSON-ready; by kind
    arrays: dict[str, np.ndarray]  # every raw output, for .npy download
    notes: list[str]  # assumptions made in pre-processing, how the answer was read
    dtypes: dict[str, str] = field(default_factory=dict)  # Triton dtype per output (numpy's name when unknown)

    def _dtype(self, name: str) -> str:
        return self.dtypes.get(name) or _triton_dtype(self.arrays[name])

    def to_json(self) -> dict:
        return {"model": self.model, "kind": self.kind, "latency_ms": float(self.latency_ms), "answer": self.answer,
                "outputs": [{"name": n, "shape": [int(d) for d in a.shape], "dtype": self._dtype(n)}
                            for n, a in self.arrays.items()],
                "notes": list(self.notes)}

    def npy(self, name: str) -> bytes:
        """The output ``name`` as a .npy file. BYTES outputs are saved as fixed-width bytes ('S'), so the file loads
        without pickle (np.load's default refuses pickled object arrays)."""
        if name not in self.arrays:
            raise UnknownOutputError(f"the result of '{self.model}' has no output '{name}'",
                                     hint=f"its outputs are {', '.join(self.arrays) or 'none'}")
        array = self.arrays[name]
        if array.dtype == np.object_:
            array = np.array([v if isinstance(v, bytes) else str(v).encode("utf-8") for v in array.reshape(-1)],
                             dtype=np.bytes_).reshape(array.shape)
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        return buffer.getvalue()


def try_image(client, image: bytes, *, config: dict, labels: dict[str, list[str]] | None = None,
              max_bytes: int = 16 << 20, max_pixels: int = 40_000_000, version: str = "") -> TryResult:
    """Run ``image`` (encoded bytes) through the model of ``client`` (an orinkit.client.Client) and read the answer.

    ``config`` is the model's config as JSON (``version`` the version it describes, "" the newest); ``labels`` maps
    an output's name to class labels. The task kit that recognizes the model reads the outputs first (a detector's
    boxes, :mod:`orinkit.ui.tasks`); the generic reading answers otherwise. Raises
    NotAnImageModelError (also when a model whose UINT8 [-1] input was sent the file fails on it), BadImageError
    (checked before decoding: bytes, then the header's pixel count; a file the model decodes itself must be PNG,
    JPEG, BMP, GIF or WebP), or the client's own errors (ModelNotFoundError, InvalidInputError, ...) as they come.
    """
    model = str(config.get("name") or client.model)
    spec, why = examine(config)
    if spec is None:
        raise NotAnImageModelError(f"model '{model}' takes no image: {why}", hint=IMAGE_INPUT_HINT)
    notes = list(spec.notes)
    encoded = None
    with images.open_checked(image, max_bytes, max_pixels, _bad_image) as picture:
        size = picture.size
        if spec.mode == "bytes":
            array, encoded = _encoded_file(bytes(image), picture.format, spec, model)
        else:
            array = images.to_tensor(picture, spec, _bad_image)
            if not (spec.width and spec.height):
                notes.append(f"the model's size is dynamic: fed at {images.target_size(spec, *size)} (width, height)")
    outputs = [o["name"] for o in config.get("output", ())]
    started = time.perf_counter()
    try:
        if config.get("sequence_batching") is not None:
            # A stateful model answers only inside a sequence: one request that both starts and ends it.
            with client.sequence() as sequence:
                result = sequence.end(outputs=outputs or None, **{spec.input: array})
            notes.append("the model is stateful: run as a sequence of one request")
        else:
            result = client.infer_sample(outputs=outputs or None, **{spec.input: array})
    except (InvalidInputError, InferenceFailedError) as exc:
        if spec.mode == "bytes" and spec.dtype == "UINT8":  # the input was only read as an encoded file
            raise _wants_something_else(model, spec, encoded, exc) from exc
        raise
    latency_ms = (time.perf_counter() - started) * 1000
    if not isinstance(result, dict):
        result = {(outputs or [o.name for o in client.info.outputs])[0]: result}
    arrays = {name: np.asarray(value) for name, value in result.items()}
    dtypes = {o["name"]: data_type(o) for o in config.get("output", ()) if o.get("name") in arrays}
    found = tasks.tryout(config, arrays, size, notes, version)
    kind, answer = found if found is not None else _read(arrays, spec, size, labels, notes, dtypes)
    return TryResult(model, kind, latency_ms, answer, arrays, notes, dtypes)


def _encoded_file(data: bytes, format_name: str | None, spec: ImageInput, model: str) -> tuple[np.ndarray, str]:
    """The upload as the model's encoded-file input (one BYTES element, or one UINT8 per byte), and its format."""
    encoded = images.sniff(data)
    if encoded is None:
        raise BadImageError(f"the upload is a {format_name or 'kind of'} file, but '{model}' decodes the file itself "
                            f"and is sent only {', '.join(images.ENCODED)}, which image decoders all read",
                            hint="save the image as PNG or JPEG")
    images.check_whole(data, _bad_image)
    if spec.dtype == "UINT8":
        array = np.frombuffer(data, dtype=np.uint8)
        return (array[None] if spec.leading_axis else array), encoded
    return np.array([data], dtype=np.object_), encoded


def _wants_something_else(model: str, spec: ImageInput, encoded: str, exc) -> NotAnImageModelError:
    """The model refused or failed on the file given to its UINT8 input: that input is not an encoded image."""
    reason = next((line.strip() for line in exc.message.splitlines() if line.strip()), type(exc).__name__)
    dims = "[1, -1]" if spec.leading_axis else "[-1]"
    return NotAnImageModelError(
        f"'{model}' failed on the {encoded} file the page sent to its UINT8 {dims} input '{spec.input}', so that "
        f"input does not take an encoded image: {reason[:300]}",
        hint="it wants something else there (raw pixels, audio...), which the try panel cannot make; call the model "
             "with orinkit.client.Client")


def _triton_dtype(array: np.ndarray) -> str:
    if array.dtype.kind in "OSU":
        return "BYTES"
    try:
        return lookup_dtype(str(array.dtype)).triton
    except Exception:  # noqa: BLE001 - a dtype outside Triton's table: numpy's own name says enough
        return str(array.dtype)


def _read(arrays, spec: ImageInput, size: tuple[int, int], labels, notes: list[str], dtypes: dict[str, str]):
    """The first kind whose reading fits, in the order lanes, classes, image, tensor."""
    scale = None
    if spec.mode == "tensor":
        fed = images.target_size(spec, *size)
        scale = (size[0] / fed[0], size[1] / fed[1])
    found = answers.lanes(arrays, size, scale, notes)
    if found is not None:
        return "lanes", found
    found = answers.classes(arrays, labels, notes)
    if found is not None:
        return "classes", found
    found = answers.image(arrays, spec.layout, notes, images.png)
    if found is not None:
        return "image", found
    return "tensor", answers.tensor(arrays, {n: dtypes.get(n) or _triton_dtype(a) for n, a in arrays.items()}, notes)


__all__ = ["BadImageError", "ImageInput", "NotAnImageModelError", "TryError", "TryResult", "UnknownOutputError",
           "examine", "image_input", "try_image"]
