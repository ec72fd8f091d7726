"""Images as the servers' image steps take them: encoded bytes, read from a file or encoded from a BGR frame, and
checked against the step's limits before they are sent (the lane and detection clients share these).

Numpy and Pillow only, imported on first use: ``import orinkit.client`` stays light.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from orinkit.client.errors import InvalidInputError

# The same bounds as the server's image step (orinkit.repo.steps.ImagePreprocess): checked from the header first,
# so that an image the server would refuse is never uploaded.
MAX_IMAGE_BYTES = 16 << 20
MAX_PIXELS = 25_000_000
# Pillow's PNG costs 41 ms a 640x360 frame and 94 ms at 1280x720 here, JPEG at quality 90 3 ms and 10 ms: video
# frames go as JPEG; "png" sends the exact pixels.
FRAME_FORMATS = ("jpeg", "png")
JPEG_QUALITY = 90
NOT_AN_IMAGE_HINT = "send JPEG or PNG bytes, a path to such a file, or a BGR uint8 array"


def frame_format_name(frame_format) -> str | None:
    """``frame_format`` as one of :data:`FRAME_FORMATS` ("jpg" and any case accepted), or None when it is none of
    them (each caller raises its own error type, in its own words)."""
    value = str(frame_format).lower()
    value = "jpeg" if value == "jpg" else value
    return value if value in FRAME_FORMATS else None


def is_jpeg_quality(quality) -> bool:
    """Whether ``quality`` is an integer JPEG quality in 1..100 (True and False are not)."""
    import numpy as np

    return not isinstance(quality, bool) and isinstance(quality, (int, np.integer)) and 1 <= quality <= 100


def read_encoded(image) -> bytes | None:
    """``image``'s bytes when it is already encoded (bytes, or a file path read whole); None for anything else."""
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image)
    if isinstance(image, (str, os.PathLike)):
        try:
            return Path(image).read_bytes()
        except FileNotFoundError:
            raise InvalidInputError(f"no image file at {os.fspath(image)}", hint="check the path") from None
        except OSError as exc:
            raise InvalidInputError(f"cannot read the image file {os.fspath(image)}: {exc.strerror}",
                                    hint="check the path and its permissions") from None
    return None


def encode_bgr(array, frame_format: str = "jpeg", *, quality: int = JPEG_QUALITY, png_level: int = 6) -> bytes:
    """An HxWx3 uint8 BGR array (as cv2 and orinkit.video give) as JPEG (at ``quality``) or PNG bytes."""
    import numpy as np
    from PIL import Image

    height, width = array.shape[:2]
    # Pillow reads BGR rows itself: no reversed copy of the frame first.
    picture = Image.frombuffer("RGB", (width, height), np.ascontiguousarray(array), "raw", "BGR", 0, 1)
    buffer = io.BytesIO()
    if frame_format == "jpeg":
        picture.save(buffer, "JPEG", quality=quality)
    else:
        picture.save(buffer, "PNG", compress_level=png_level)
    return buffer.getvalue()


def check_image(data: bytes, *, max_bytes: int = MAX_IMAGE_BYTES, max_pixels: int = MAX_PIXELS, min_side: int = 1,
                size_hint: str = "downscale it on the camera side") -> None:
    """InvalidInputError, before anything is sent, for bytes that are no image, or too many bytes or pixels, or a
    side under ``min_side`` (read from the header only). The server refuses the same, in the same words."""
    from PIL import Image, UnidentifiedImageError

    if len(data) > max_bytes:
        raise InvalidInputError(f"the image is {len(data) / 2**20:.1f} MiB, above the limit of "
                                f"{max_bytes / 2**20:.0f} MiB", hint="send a JPEG, or raise max_image_bytes")
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    except UnidentifiedImageError:
        raise InvalidInputError(f"the bytes are not an image Pillow can read ({len(data)} bytes, unrecognised "
                                "format)", hint=NOT_AN_IMAGE_HINT) from None
    except Image.DecompressionBombError:
        width, height = max_pixels, 2  # Pillow refused it as a bomb: far over any sane limit
    except OSError as exc:
        raise InvalidInputError(f"the bytes are not an image Pillow can read ({len(data)} bytes: {exc})",
                                hint=NOT_AN_IMAGE_HINT) from None
    if width * height > max_pixels:
        raise InvalidInputError(f"the image is {width}x{height}, above the limit of {max_pixels / 1e6:g} megapixels",
                                hint=size_hint)
    if min(width, height) < min_side:
        raise InvalidInputError(f"the image is {width}x{height} pixels, below the smallest side of {min_side}",
                                hint="send the whole frame, not an empty crop")
