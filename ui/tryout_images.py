"""Pictures for the "Try" panel: uploads checked before decoding, turned into a model's tensor, outputs into PNG.

Kept apart from :mod:`orinkit.ui.tryout` so that the interface module reads as the page's contract.
"""

from __future__ import annotations

import io

import numpy as np

from orinkit.core.optional import require

# A dynamic height or width takes the upload's own size, shrunk (aspect kept) so its longer side is at most this:
# a 1024x1024 FP32 RGB tensor is 12 MiB, under the client's 64 MiB request limit with room to spare, while a 12 MP
# photo sent as is would be 144 MiB and refused.
DYNAMIC_MAX_SIDE = 1024


def pillow():
    """PIL.Image, or MissingExtraError naming the extra that brings Pillow."""
    return require("PIL.Image")


def open_checked(data: bytes, max_bytes: int, max_pixels: int, bad_image):
    """The upload opened lazily (header read, no pixel decoded) once its byte count and pixel count pass;
    ``bad_image(message, hint)`` builds the error otherwise. The caller closes the image."""
    Image = pillow()  # noqa: N806 - the module, named as Pillow's own documentation names it
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise bad_image(f"the upload is {type(data).__name__}, not image bytes", "pass the file's bytes")
    data = bytes(data)
    if not data:
        raise bad_image("the upload is empty", "choose a JPEG or PNG file")
    if len(data) > max_bytes:
        raise bad_image(f"the image is {len(data) / 2**20:.1f} MiB, above the limit of {max_bytes / 2**20:g} MiB",
                        "send a smaller file (a JPEG of the same picture is usually far smaller)")
    try:
        # open() reads the header only: the size is known before any pixel is decoded.
        image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError:
        # Pillow refuses at open() what claims more than twice its MAX_IMAGE_PIXELS: far past any sane limit.
        raise bad_image(f"the image claims far more than {max_pixels / 1e6:g} megapixels, the limit",
                        "downscale it before uploading") from None
    except Exception as exc:  # noqa: BLE001 - Pillow reports unreadable data with many exception types
        detail = "unrecognised format" if isinstance(exc, Image.UnidentifiedImageError) else str(exc) or "unreadable"
        raise bad_image(f"the upload is not an image Pillow can read ({detail}, {len(data)} bytes)",
                        "upload a JPEG, PNG, BMP or WebP file") from None
    width, height = image.size
    if width < 1 or height < 1 or width * height > max_pixels:
        image.close()
        raise bad_image(f"the image is {width}x{height} ({width * height / 1e6:.1f} megapixels), outside the "
                        f"limit of {max_pixels / 1e6:g} megapixels", "downscale it before uploading")
    return image


def decode(image, mode: str, bad_image):
    """Every pixel of ``image`` in Pillow ``mode`` ("RGB" or "L"); a truncated or corrupt file fails here."""
    try:
        return image.convert(mode)
    except Exception as exc:  # noqa: BLE001 - Pillow signals corrupt data with OSError, SyntaxError, ValueError...
        raise bad_image(f"the image cannot be decoded ({exc or type(exc).__name__})",
                        "upload the file again, or save it anew as PNG or JPEG") from None


def check_whole(data: bytes, bad_image) -> None:
    """Pillow's verify(): a cheap integrity pass (PNG chunk checksums, no pixels) for uploads the server decodes,
    so a damaged file fails here with BadImageError rather than as the server's error."""
    Image = pillow()  # noqa: N806
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
    except Exception as exc:  # noqa: BLE001 - as in decode()
        raise bad_image(f"the image is damaged ({exc or type(exc).__name__})",
                        "upload the file again, or save it anew as PNG or JPEG") from None


# What a model that decodes the file itself is sent: formats every image decoder reads (Pillow, OpenCV, DALI,
# torchvision), told by their first bytes.
ENCODED = ("PNG", "JPEG", "BMP", "GIF", "WebP")


def sniff(data: bytes) -> str | None:
    """The encoded format of ``data`` from its first bytes (one of :data:`ENCODED`), or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if data.startswith(b"BM") and len(data) >= 26:  # the file and info headers hold at least 26 bytes
        return "BMP"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "GIF"
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "WebP"
    return None


def target_size(spec, width: int, height: int) -> tuple[int, int]:
    """(width, height) to resize to: the model's fixed dims; a dynamic one follows the upload's aspect ratio."""
    if spec.width and spec.height:
        return spec.width, spec.height
    if spec.width:
        return spec.width, max(1, min(4 * DYNAMIC_MAX_SIDE, round(spec.width * height / width)))
    if spec.height:
        return max(1, min(4 * DYNAMIC_MAX_SIDE, round(spec.height * width / height))), spec.height
    shrink = min(1.0, DYNAMIC_MAX_SIDE / max(width, height))
    return max(1, round(width * shrink)), max(1, round(height * shrink))


_NUMPY = {"FP16": np.float16, "FP32": np.float32, "FP64": np.float64, "UINT8": np.uint8}


def to_tensor(image, spec, bad_image) -> np.ndarray:
    """What orinkit's image-preprocess step does, for a model fed the tensor directly: resize, channel order,
    ``(x * scale - mean) / std``, layout, dtype (UINT8 rounded and clipped to 0..255)."""
    Image = pillow()  # noqa: N806
    resampling = getattr(Image, "Resampling", Image)  # Image.Resampling appeared in Pillow 9.1
    filters = {"nearest": resampling.NEAREST, "bilinear": resampling.BILINEAR, "bicubic": resampling.BICUBIC}
    picture = decode(image, "L" if spec.color_order == "GRAY" else "RGB", bad_image)
    size = target_size(spec, *picture.size)
    if picture.size != size:
        picture = picture.resize(size, resample=filters.get(spec.interpolation, resampling.BILINEAR))
    pixels = np.asarray(picture, dtype=np.float32)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if spec.color_order == "BGR":
        pixels = pixels[:, :, ::-1]
    values = (pixels * np.float32(spec.scale) - np.asarray(spec.mean, np.float32)) / np.asarray(spec.std, np.float32)
    if spec.layout == "CHW":
        values = values.transpose(2, 0, 1)
    if spec.dtype == "UINT8":
        values = np.clip(np.rint(values), 0, 255)
    tensor = np.ascontiguousarray(values.astype(_NUMPY[spec.dtype]))
    return tensor[None] if spec.leading_axis else tensor


def png(pixels: np.ndarray) -> bytes:
    """An HxW or HxWx3 uint8 array as PNG bytes."""
    Image = pillow()  # noqa: N806
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels[:, :, 0] if pixels.ndim == 3 and pixels.shape[2] == 1 else pixels)
                    ).save(buffer, "PNG")
    return buffer.getvalue()
