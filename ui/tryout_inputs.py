"""How a model takes an image, read from its config: the "Try" panel's :func:`image_input`.

What :func:`image_input` recognises, in the model's inputs less the sequence batcher's control inputs and the
optional ones (exactly one must remain):

* ``mode="bytes"``: a BYTES input of dims [1] or [-1] (orinkit's image-preprocess step, or an ensemble starting with
  it), or a UINT8 input of dims [-1] (or [1, -1] without batching: Triton's own preprocessing and DALI examples,
  whose clients send ``np.fromfile(image, dtype=np.uint8)``): the encoded upload is sent as it is, one element per
  file or one UINT8 per byte, and the server decodes it. Only PNG, JPEG, BMP, GIF and WebP files are sent (their
  first bytes say which); a UINT8 input is the page's reading of the config, and a model that fails on the file is
  reported as wanting something else;
* ``mode="tensor"``: a 3-dim FP16/FP32/FP64/UINT8 input with 1 or 3 channels first (CHW) or last (HWC); the config's
  ``format`` (FORMAT_NCHW / FORMAT_NHWC) decides where the dims alone cannot, else CHW. A model without batching
  whose dims are [1, C, H, W] (or [-1, ...]) is taken too, fed one image. A fixed H and W are resized to (bilinear
  unless the config says otherwise); a dynamic one (-1) takes the upload's own size, shrunk so the longer side is at
  most 1024 pixels, and with one side fixed the other follows the upload's aspect ratio.

How a tensor is made comes from the config's ``parameters`` under the keys of orinkit's image-preprocess step
(``color_order`` RGB/BGR/GRAY, ``scale``, ``mean``, ``std`` as comma-separated per-channel numbers,
``interpolation``); without any of them, the default is assumed and said in the result's notes: RGB (gray for one
channel), scale 1/255 for float inputs and 1 (raw 0..255) for UINT8, no mean or std.

Decoupled models (many responses per request) are not tried: :func:`image_input` gives None for them. A stateful
model (sequence batcher) is run as a sequence of one request.
"""

from __future__ import annotations

import math  # not numpy: the models panel reads every config here, in a page server that loads numpy only to try
from dataclasses import asdict, dataclass, field

TENSOR_DTYPES = ("FP16", "FP32", "FP64", "UINT8")
PREPROCESS_KEYS = ("color_order", "scale", "mean", "std", "interpolation")
INTERPOLATIONS = ("bilinear", "nearest", "bicubic")


@dataclass(frozen=True)
class ImageInput:
    """How a model takes an image. The fields after ``dtype`` say how a tensor is made (tensor mode only)."""

    input: str  # the input tensor's name
    mode: str  # "bytes" | "tensor"
    layout: str | None  # "CHW" | "HWC" for mode "tensor"
    width: int | None  # None: dynamic (or mode "bytes")
    height: int | None
    channels: int | None
    dtype: str  # Triton dtype: "BYTES", "FP32", "UINT8", ... (mode "bytes": BYTES, or UINT8 one per byte)
    color_order: str | None = None  # "RGB" | "BGR" | "GRAY"
    scale: float | None = None  # pixel (0..255) * scale, then - mean, / std
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    interpolation: str | None = None
    assumed: bool = False  # the pre-processing is the default, not read from the config's parameters
    leading_axis: bool = False  # the dims carry an axis of 1 before the image's or the bytes' (no batching)
    notes: tuple[str, ...] = field(default=(), compare=False)  # what was read or assumed, for the result

    def to_json(self) -> dict:
        data = asdict(self)
        data["mean"], data["std"], data["notes"] = list(self.mean), list(self.std), list(self.notes)
        return data


def _dims(entry: dict) -> list[int]:
    return [int(d) for d in entry.get("dims", ())]


def data_type(entry: dict) -> str:
    kind = str(entry.get("data_type", "")).removeprefix("TYPE_")
    return "BYTES" if kind == "STRING" else kind


def _parameters(config: dict) -> dict[str, str]:
    found = {}
    for key, value in (config.get("parameters") or {}).items():
        if key in PREPROCESS_KEYS:
            found[key] = str(value.get("string_value", "") if isinstance(value, dict) else value).strip()
    return found


def _per_channel(text: str, channels: int) -> tuple[float, ...] | None:
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        return None
    if len(values) == 3 and channels == 1 and len(set(values)) == 1:
        values = values[:1]  # the RGB default written for a gray image, as the image-preprocess step reads it
    if len(values) == 1 and channels == 3:
        values = values * 3
    return values if len(values) == channels and all(math.isfinite(v) for v in values) else None


def _preprocessing(config: dict, channels: int, dtype: str) -> dict:
    """The tensor-making fields of ImageInput, from the config's parameters or the documented default."""
    given = _parameters(config)
    notes = []
    order = given.get("color_order", "").upper() or ("GRAY" if channels == 1 else "RGB")
    if (order == "GRAY") != (channels == 1) or order not in ("RGB", "BGR", "GRAY"):
        notes.append(f"color_order '{given.get('color_order')}' does not fit {channels} channel(s): "
                     f"{'GRAY' if channels == 1 else 'RGB'} used")
        order = "GRAY" if channels == 1 else "RGB"
    scale = 1.0 if dtype == "UINT8" else 1 / 255
    if "scale" in given:
        try:
            scale = float(given["scale"])
        except ValueError:
            notes.append(f"scale '{given['scale']}' is not a number: {scale:.6g} used")
    mean, std = (0.0,) * channels, (1.0,) * channels
    for key, default in (("mean", mean), ("std", std)):
        if key in given:
            values = _per_channel(given[key], channels)
            if values is None or (key == "std" and 0.0 in values):
                notes.append(f"{key} '{given[key]}' is not {channels} usable number(s): {list(default)} used")
            elif key == "mean":
                mean = values
            else:
                std = values
    interpolation = given.get("interpolation", "bilinear").lower()
    if interpolation not in INTERPOLATIONS:
        notes.append(f"interpolation '{interpolation}' is unknown: bilinear used")
        interpolation = "bilinear"
    assumed = not any(key in given for key in ("color_order", "scale", "mean", "std"))
    if assumed:
        notes.append(f"pre-processing assumed (the config has no color_order/scale/mean/std parameters): {order}, "
                     f"scale {'1 (raw 0..255)' if scale == 1 else '1/255'}, no mean or std")
    else:
        notes.append(f"pre-processing from the config's parameters: {order}, scale {scale:.6g}, mean {list(mean)}, "
                     f"std {list(std)}")
    return {"color_order": order, "scale": scale, "mean": mean, "std": std, "interpolation": interpolation,
            "assumed": assumed, "notes": tuple(notes)}


def _tensor_layout(dims: list[int], entry: dict) -> str | None:
    chw, hwc = dims[0] in (1, 3), dims[2] in (1, 3)
    declared = {"FORMAT_NCHW": "CHW", "FORMAT_NHWC": "HWC"}.get(str(entry.get("format", "")))
    if declared == "CHW" and chw or declared == "HWC" and hwc:
        return declared
    # Both fit only for tiny or odd shapes ([3, 8, 3]); CHW is what ONNX and PyTorch vision models take.
    return "CHW" if chw else "HWC" if hwc else None


def examine(config: dict) -> tuple[ImageInput | None, str]:
    """:func:`image_input`'s answer and, when None, why (words for a message: "it has 2 inputs ...")."""
    if (config.get("model_transaction_policy") or {}).get("decoupled"):
        return None, "it is decoupled (it answers over a stream, which the panel does not read)"
    sequence = config.get("sequence_batching") or {}
    control = {c.get("name") for c in sequence.get("control_input", ())}
    entries = [e for e in config.get("input", ()) if e.get("name") not in control and not e.get("optional")]
    if len(entries) != 1:
        names = ", ".join(e.get("name", "?") for e in entries) or "none"
        return None, f"it takes {len(entries)} inputs ({names}), not one image"
    entry = entries[0]
    name, kind, dims = entry["name"], data_type(entry), _dims(entry)
    if kind == "BYTES":
        if dims in ([1], [-1]):
            return ImageInput(name, "bytes", None, None, None, None, "BYTES"), ""
        return None, f"its BYTES input '{name}' has dims {dims}, not [1] (one encoded image)"
    batching = int(config.get("max_batch_size", 0) or 0) > 0
    if kind == "UINT8" and (dims == [-1] or dims == [1, -1] and not batching):
        note = (f"the UINT8 {dims} input '{name}' is sent the file's bytes, as Triton's examples send an encoded "
                "image (np.fromfile(path, dtype=np.uint8))")
        return ImageInput(name, "bytes", None, None, None, None, "UINT8", leading_axis=len(dims) == 2,
                          notes=(note,)), ""
    leading = False
    if len(dims) == 4 and dims[0] in (1, -1) and not batching:
        dims, leading = dims[1:], True
    if len(dims) != 3:
        return None, f"its input '{name}' has dims {dims}, not an image's three (C, H, W or H, W, C)"
    if kind not in TENSOR_DTYPES:
        return None, f"its input '{name}' is {kind}; images are fed as {', '.join(TENSOR_DTYPES)}"
    layout = _tensor_layout(dims, entry)
    if layout is None:
        return None, f"its input '{name}' has dims {dims}: no axis of 1 or 3 channels first or last"
    channels, height, width = dims if layout == "CHW" else (dims[2], dims[0], dims[1])
    if height == 0 or width == 0 or height < -1 or width < -1:
        return None, f"its input '{name}' has dims {dims}, no usable height and width"
    fixed = {"width": width if width > 0 else None, "height": height if height > 0 else None}
    return ImageInput(name, "tensor", layout, channels=channels, dtype=kind, leading_axis=leading,
                      **fixed, **_preprocessing(config, channels, kind)), ""


def image_input(config: dict) -> ImageInput | None:
    """How the model of ``config`` (tritonclient's get_model_config(as_json=True)["config"]) takes an image; None
    when it takes none (or none the panel can feed). See the module's doc for what is recognised."""
    return examine(config)[0]
