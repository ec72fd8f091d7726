"""Triton Python-backend model: encoded images (BYTES) -> normalised NCHW tensors for a vision model.

Resizing stretches the image to the model's size (classifiers, LaneATT), or letterboxes it (detectors): scaled
to fit with its aspect kept, then padded (centred as Ultralytics pads, or top-left as YOLOX does); the letterbox
answers TRANSFORM [scale_x, scale_y, pad_x, pad_y, source width, source height] too, which post-processing needs
to map boxes back: ``source = (model - pad) / scale`` per axis.

Copied into a repository as ``<version>/model.py``, so it imports nothing from orinkit.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass

import numpy as np
from PIL import Image

# Image.Resampling appeared in Pillow 9.1; older Pillows in a Triton image keep the filters on Image itself.
_RESAMPLING = getattr(Image, "Resampling", Image)
_AFFINE = getattr(Image, "Transform", Image).AFFINE
_FILTERS = {
    "nearest": _RESAMPLING.NEAREST,
    "bilinear": _RESAMPLING.BILINEAR,
    "bicubic": _RESAMPLING.BICUBIC,
}
_DTYPES = {"FP32": np.float32, "FP16": np.float16}
# Bounds a request must meet before anything is decoded: on an 8 GB board a 12000x12000 PNG (430 MB decoded) or a
# stream of 100 MB uploads is an outage. 25 megapixels covers a 6K photo; Pillow's own bomb limit is 89 MP.
MAX_IMAGE_BYTES = 16 << 20
MAX_PIXELS = 25_000_000
_DEFAULTS = {
    "width": "224",
    "height": "224",
    "color_order": "RGB",
    "scale": "0.00392156862745098",
    "mean": "0,0,0",
    "std": "1,1,1",
    "dtype": "FP32",
    "interpolation": "bilinear",
    "max_image_bytes": str(MAX_IMAGE_BYTES),
    "max_pixels": str(MAX_PIXELS),
    "resize": "stretch",
    "centre": "true",
    "pad": "114",
    "min_side": "1",
}
RESIZES = ("stretch", "letterbox")
_ORIENTATION = 0x0112  # EXIF Orientation: how the stored pixels turn to stand upright
_T = getattr(Image, "Transpose", Image)
_TRANSPOSE = {2: _T.FLIP_LEFT_RIGHT, 3: _T.ROTATE_180, 4: _T.FLIP_TOP_BOTTOM, 5: _T.TRANSPOSE, 6: _T.ROTATE_270,
              7: _T.TRANSVERSE, 8: _T.ROTATE_90}
# 16-bit grayscale PNGs open as I;16: Pillow's convert() to L or RGB clips them (almost all white); kept as
# cv2.imread keeps them, the high byte. (16-bit RGB and RGBA PNGs already open as 8-bit RGB(A) in Pillow.)
_SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N")


@dataclass(frozen=True)
class Options:
    width: int = 224
    height: int = 224
    color_order: str = "RGB"  # channel order of the output; "BGR" matches what cv2.imread gives; "GRAY": one
    scale: float = 1 / 255
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)  # per output channel, in output channel order
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    dtype: str = "FP32"
    interpolation: str = "bilinear"
    max_image_bytes: int = MAX_IMAGE_BYTES
    max_pixels: int = MAX_PIXELS
    resize: str = "stretch"  # or "letterbox": aspect kept, padded with ``pad`` (0..255, before normalising)
    centre: bool = True  # letterbox: the image centred (Ultralytics) or at the top-left corner (YOLOX)
    pad: int = 114
    min_side: int = 1  # images with a side shorter than this are refused (a 1x1 "image" is a caller's mistake)


class BadImageError(ValueError):
    """Image bytes the step refuses: the caller's data, not the server's fault (INVALID_ARG to the client)."""


def _positive_int(key: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"parameter {key!r} must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"parameter {key!r} must be a positive integer, got {text!r}")
    return value


def _finite_float(key: str, text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"parameter {key!r} must be a number, got {text!r}") from None
    if not np.isfinite(value):
        raise ValueError(f"parameter {key!r} must be finite, got {text!r}")
    return value


def _per_channel(key: str, text: str, channels: int) -> tuple[float, ...]:
    parts = text.split(",")
    if len(parts) == 3 and channels == 1 and len(set(p.strip() for p in parts)) == 1:
        parts = parts[:1]  # the RGB default written for a gray image
    if len(parts) != channels:
        raise ValueError(f"parameter {key!r} needs {channels} comma-separated number(s) (one per channel), "
                         f"got {text!r}")
    return tuple(_finite_float(key, part) for part in parts)


def _choice(key: str, text: str, choices) -> str:
    value = text.strip()
    if value not in choices:
        raise ValueError(f"parameter {key!r} must be one of {', '.join(sorted(choices))}; got {text!r}")
    return value


def _flag(key: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false", "1", "0"):
        raise ValueError(f"parameter {key!r} must be true or false, got {text!r}")
    return value in ("true", "1")


def _pad_value(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if not 0 <= value <= 255:
        raise ValueError(f"parameter 'pad' must be an integer 0..255 (a pixel value), got {text!r}")
    return value


def options_from_parameters(parameters: dict) -> Options:
    """Options from a model config's ``parameters`` map (``{"width": {"string_value": "640"}, ...}``).

    Missing keys take their defaults; keys this model does not know are ignored, since Triton and other
    tools put their own entries (EXECUTION_ENV_PATH, ...) in the same map.
    """
    text = dict(_DEFAULTS)
    for key in _DEFAULTS:
        if key in parameters:
            text[key] = str(parameters[key].get("string_value", ""))
    color_order = _choice("color_order", text["color_order"].upper(), {"RGB", "BGR", "GRAY"})
    channels = 1 if color_order == "GRAY" else 3
    std = _per_channel("std", text["std"], channels)
    if 0.0 in std:
        raise ValueError(f"parameter 'std' must not contain 0, got {text['std']!r}")
    return Options(
        width=_positive_int("width", text["width"]),
        height=_positive_int("height", text["height"]),
        color_order=color_order,
        scale=_finite_float("scale", text["scale"]),
        mean=_per_channel("mean", text["mean"], channels),
        std=std,
        dtype=_choice("dtype", text["dtype"].upper(), _DTYPES.keys()),
        interpolation=_choice("interpolation", text["interpolation"].lower(), _FILTERS.keys()),
        max_image_bytes=_positive_int("max_image_bytes", text["max_image_bytes"]),
        max_pixels=_positive_int("max_pixels", text["max_pixels"]),
        resize=_choice("resize", text["resize"].lower(), RESIZES),
        centre=_flag("centre", text["centre"]),
        pad=_pad_value(text["pad"]),
        min_side=_positive_int("min_side", text["min_side"]),
    )


def _decode(data: bytes, options: Options) -> Image.Image:
    if len(data) > options.max_image_bytes:
        raise BadImageError(f"the image is {len(data) / 2**20:.1f} MiB, above the step's limit of "
                            f"{options.max_image_bytes / 2**20:.0f} MiB (parameter max_image_bytes)")
    try:
        # Not closed with `with`: closing an opened image frees its pixels, and the copy convert() made to outlive
        # it cost 2.5 ms of 4 at 640x427 (the bytes are in memory: nothing to release).
        image = Image.open(io.BytesIO(data))
        # open() reads only the header: the size is known before a single pixel is decoded.
        pixels = image.width * image.height
        if pixels > options.max_pixels:
            raise BadImageError(f"the image is {image.width}x{image.height} ({pixels / 1e6:.0f} megapixels), "
                                f"above the step's limit of {options.max_pixels / 1e6:g} (parameter max_pixels)")
        if min(image.width, image.height) < options.min_side:
            raise BadImageError(f"the image is {image.width}x{image.height} pixels, below the step's smallest "
                                f"side of {options.min_side} (parameter min_side)")
        if image.mode in ("I", "F"):
            raise BadImageError(f"the image has 32-bit {'integer' if image.mode == 'I' else 'float'} pixels, "
                                "whose range the step cannot know: send 8-bit (or 16-bit PNG) pixels")
        target = "L" if options.color_order == "GRAY" else "RGB"
        if image.mode in _SIXTEEN_BIT:
            # The high byte, as cv2.imread makes 8 bits of 16: decoded here, inside this try.
            converted = Image.fromarray((np.asarray(image, dtype=np.uint16) >> 8).astype(np.uint8), "L")
            converted = converted.convert(target) if target != "L" else converted
        elif image.mode == target:
            image.load()  # the full decode here, so truncated files fail inside this try
            converted = image
        else:
            converted = image.convert(target)
        orientation = image.getexif().get(_ORIENTATION, 1) if options.resize == "letterbox" else 1
        if orientation in _TRANSPOSE:
            # A detector's boxes are in the pixels the user sees: a phone photo upright, as cv2.imread and
            # orinkit.detect's Detector read it. (Stretching steps keep their old behaviour: as stored.)
            converted = converted.transpose(_TRANSPOSE[orientation])
        return converted
    except BadImageError:
        raise
    except Image.DecompressionBombError:
        raise BadImageError(f"the image has far more than {options.max_pixels / 1e6:g} megapixels, the step's limit "
                            "(parameter max_pixels)") from None
    except Image.UnidentifiedImageError:
        # Pillow's own message names only an anonymous BytesIO object.
        message = f"input is not an image Pillow can decode: unrecognised format ({len(data)} bytes)"
        raise BadImageError(message) from None
    except Exception as exc:  # noqa: BLE001 - Pillow signals corrupt data with many exception types
        raise BadImageError(f"input is not an image Pillow can decode: {exc}") from None


def letterbox_geometry(height: int, width: int, options: Options) -> tuple[float, int, int, int, int]:
    """Where an image of ``height`` x ``width`` lands in the letterbox: (scale, pad_x, pad_y, resized width,
    resized height). Centred, the size is rounded and the odd pixel goes bottom/right, as Ultralytics' LetterBox
    does; top-left, the size is floored, as YOLOX's preproc does (``int(w * r)``)."""
    scale = min(options.height / height, options.width / width)
    rounding = round if options.centre else math.floor
    new_width = min(options.width, max(1, int(rounding(width * scale))))
    new_height = min(options.height, max(1, int(rounding(height * scale))))
    if not options.centre:
        return scale, 0, 0, new_width, new_height
    return (scale, round((options.width - new_width) / 2 - 0.1), round((options.height - new_height) / 2 - 0.1),
            new_width, new_height)


def transforms(sizes: np.ndarray, options: Options) -> np.ndarray:
    """[B, 2] (height, width) source sizes -> [B, 6] FP32 (scale_x, scale_y, pad_x, pad_y, width, height) of the
    letterbox. Each axis's scale is its rounded size's (a side that rounds makes the two differ by up to half a
    pixel's worth; the gain alone would put boxes up to a tenth of a pixel off)."""
    rows = []
    for height, width in np.asarray(sizes).tolist():
        _, pad_x, pad_y, new_width, new_height = letterbox_geometry(int(height), int(width), options)
        rows.append((new_width / width, new_height / height, pad_x, pad_y, width, height))
    return np.asarray(rows, dtype=np.float32).reshape(-1, 6)


def _normalise(pixels: np.ndarray, options: Options, out: np.ndarray) -> None:
    """HWC uint8 ``pixels`` -> ``out`` (CHW, the output's dtype): reorder, ``(x * scale - mean) / std``."""
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if options.color_order == "BGR":
        pixels = pixels[:, :, ::-1]
    # Reordered while still uint8 and normalised in one pass into the float tensor: measured 0.8 ms at 640x360,
    # where float conversion, then reordering, then normalising took 22-39 ms (a video's frame budget).
    chw = np.ascontiguousarray(pixels.transpose(2, 0, 1))
    std = np.asarray(options.std, dtype=np.float32)[:, None, None]
    mean = np.asarray(options.mean, dtype=np.float32)[:, None, None]
    if out.dtype == np.float32:
        np.multiply(chw, np.float32(options.scale), out=out)
        if (mean != 0).any():
            out -= mean
        if (std != 1).any():
            out /= std
        return
    normalised = np.multiply(chw, np.float32(options.scale), dtype=np.float32)
    if (mean != 0).any():
        normalised -= mean
    if (std != 1).any():
        normalised /= std
    out[...] = normalised


def _pad_pixel(options: Options) -> np.ndarray:
    """The pad value after normalising, per output channel."""
    channels = 1 if options.color_order == "GRAY" else 3
    value = (np.float32(options.pad) * np.float32(options.scale) - np.asarray(options.mean, np.float32)) \
        / np.asarray(options.std, np.float32)
    return value.reshape(channels, 1, 1)


def _cv2():
    try:
        import cv2
    except ImportError:
        return None
    return cv2


_CV2 = _cv2()
_CV2_FLAGS = {"nearest": "INTER_NEAREST", "bilinear": "INTER_LINEAR", "bicubic": "INTER_CUBIC"}


def _resize_unfiltered(image: Image.Image, width: int, height: int, interpolation: str) -> np.ndarray:
    """HWC uint8 pixels resized without antialiasing, as detectors are trained (Ultralytics and YOLOX letterbox with
    cv2.INTER_LINEAR): cv2 itself where the server's Python has it (as orinkit.detect's Detector does in
    process), else Pillow's affine transform on cv2's sampling grid (Pillow's resize() blurs when it shrinks, its
    transform does not). Pillow truncates where cv2 rounds: within one level of cv2's pixels, 0.44 below them on
    average (measured); about as fast as Pillow's resize()."""
    if _CV2 is not None:
        return _CV2.resize(np.asarray(image), (width, height), interpolation=getattr(_CV2, _CV2_FLAGS[interpolation]))
    matrix = (image.width / width, 0.0, 0.0, 0.0, image.height / height, 0.0)
    return np.asarray(image.transform((width, height), _AFFINE, matrix, resample=_FILTERS[interpolation]))


def preprocess_into(data: bytes, options: Options, out: np.ndarray) -> tuple[int, int]:
    """One encoded image written into ``out`` ([channels, height, width]); returns (source height, width)."""
    image = _decode(data, options)
    original = (image.height, image.width)
    if options.resize == "stretch":
        # Pillow's bilinear/bicubic antialias when shrinking, unlike cv2.resize: models trained on cv2 input
        # may see slightly different pixels.
        resized = image.resize((options.width, options.height), resample=_FILTERS[options.interpolation])
        _normalise(np.asarray(resized), options, out)
        return original
    _, left, top, new_width, new_height = letterbox_geometry(image.height, image.width, options)
    if (new_width, new_height) != (image.width, image.height):
        pixels = _resize_unfiltered(image, new_width, new_height, options.interpolation)
    else:
        pixels = np.asarray(image)
    # Only the borders are filled with the pad: the image's own area is written once.
    pad = _pad_pixel(options).astype(out.dtype)
    out[:, :top], out[:, top + new_height:] = pad, pad
    out[:, top:top + new_height, :left], out[:, top:top + new_height, left + new_width:] = pad, pad
    _normalise(pixels, options, out[:, top:top + new_height, left:left + new_width])
    return original


def preprocess(data: bytes, options: Options) -> tuple[np.ndarray, tuple[int, int]]:
    """One encoded image -> ([channels, height, width] tensor, (original height, original width))."""
    channels = 1 if options.color_order == "GRAY" else 3
    tensor = np.empty((channels, options.height, options.width), dtype=_DTYPES[options.dtype])
    return tensor, preprocess_into(data, options, tensor)


def preprocess_batch(images: np.ndarray, options: Options) -> tuple[np.ndarray, np.ndarray]:
    """A [B, 1] object array of encoded images -> ([B, 3, height, width] tensor, [B, 2] INT32 sizes)."""
    images = np.asarray(images, dtype=object)
    if images.ndim != 2 or images.shape[1] != 1:
        raise ValueError(f"IMAGE must have shape [batch, 1], got {list(images.shape)}")
    channels = 1 if options.color_order == "GRAY" else 3
    tensor = np.empty((images.shape[0], channels, options.height, options.width), dtype=_DTYPES[options.dtype])
    sizes = np.empty((images.shape[0], 2), dtype=np.int32)
    for index, item in enumerate(images[:, 0]):
        if not isinstance(item, (bytes, bytearray, np.bytes_)):
            raise BadImageError(f"IMAGE[{index}] is {type(item).__name__}, not encoded image bytes")
        try:
            sizes[index] = preprocess_into(bytes(item), options, tensor[index])
        except BadImageError as exc:
            raise BadImageError(f"IMAGE[{index}]: {exc}") from None
    return tensor, sizes


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.options = options_from_parameters(config.get("parameters") or {})
        # Pillow's own guard, at this step's limit, for formats whose header understates what decoding makes.
        Image.MAX_IMAGE_PIXELS = self.options.max_pixels

    def execute(self, requests):
        import triton_python_backend_utils as pb_utils

        responses = []
        for request in requests:
            # A bad image fails only its own request: the others in this call are still answered.
            try:
                image = pb_utils.get_input_tensor_by_name(request, "IMAGE")
                if image is None:
                    raise ValueError("request has no IMAGE input")
                tensor, sizes = preprocess_batch(image.as_numpy(), self.options)
                outputs = [pb_utils.Tensor("TENSOR", tensor), pb_utils.Tensor("ORIGINAL_SIZE", sizes)]
                if self.options.resize == "letterbox":
                    outputs.append(pb_utils.Tensor("TRANSFORM", transforms(sizes, self.options)))
                responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
            except BadImageError as exc:
                error = pb_utils.TritonError(f"image_preprocess: {exc}", pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
            except Exception as exc:  # noqa: BLE001 - a failure of this request only, never of the model
                error = pb_utils.TritonError(f"image_preprocess: {exc}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses
