"""A wall-clock time drawn into a frame's pixels, so a test or a benchmark reads true capture→answer latency from the
video itself: the camera stamps ``time.time()`` when it makes a frame, the reader compares it with its own clock.

The stamp is a band across the top of the image: 2 rows of 40 square cells (16 px at 640x360), black for 0, white
for 1, holding the time in microseconds as 64 bits and a CRC-16 of them. Cells are placed in fractions of the
image's width and height, so the band reads back after any scaling (1280x720 → 320x180: 8 px cells) and after
H.264 at a live stream's bitrate. A read takes the middle of each cell only and refuses the frame when any cell is
not clearly black or white or the CRC does not match: a garbled frame gives None, never a wrong time.

numpy is imported inside the functions that use arrays: the test camera (tests/rtsp_camera.py) runs under the
system Python, which has GStreamer's bindings but no numpy, and loads this file to draw the same band.
"""

from __future__ import annotations

COLUMNS = 40
ROWS = 2
DATA_BITS = 64
CHECK_BITS = 16
CELL_HEIGHT = 2 / 45  # of the image height: square cells at 16:9
WHITE_ABOVE = 160  # a cell's mean must be this far from the middle grey to count as read
BLACK_BELOW = 95


def band_height(height: int) -> int:
    """The rows the stamp covers in an image ``height`` pixels high."""
    return _edges(height * CELL_HEIGHT, ROWS)[-1]


def band_bytes(t: float, width: int, height: int) -> bytes:
    """The stamp's rows for time ``t`` as packed BGR bytes (``band_height(height)`` rows of ``width`` pixels)."""
    bits = _bits(t)
    xs = _edges(width / COLUMNS, COLUMNS)
    ys = _edges(height * CELL_HEIGHT, ROWS)
    rows = []
    for r in range(ROWS):
        cells = bits[r * COLUMNS:(r + 1) * COLUMNS]
        line = b"".join((b"\xff" if bit else b"\x00") * (3 * (xs[c + 1] - xs[c])) for c, bit in enumerate(cells))
        rows.append(line * (ys[r + 1] - ys[r]))
    return b"".join(rows)


def stamp(image, t: float) -> None:
    """Draw time ``t`` (seconds, ``time.time()``) into the top rows of ``image`` (HxWx3 uint8 BGR), in place."""
    import numpy as np

    height, width = image.shape[:2]
    rows = band_height(height)
    image[:rows] = np.frombuffer(band_bytes(t, width, height), np.uint8).reshape(rows, width, 3)


def read_stamp(image) -> float | None:
    """The time stamped into ``image`` (HxWx3 uint8 BGR, at any size), or None when the band is not intact."""
    import numpy as np

    height, width = image.shape[:2]
    xs = _edges(width / COLUMNS, COLUMNS)
    ys = _edges(height * CELL_HEIGHT, ROWS)
    if xs[1] - xs[0] < 2 or ys[1] - ys[0] < 2:
        return None
    grey = image[:ys[-1]].astype(np.float32).mean(axis=2) if image.ndim == 3 else image[:ys[-1]].astype(np.float32)
    bits = []
    for r in range(ROWS):
        y0, y1 = _middle(ys[r], ys[r + 1])
        for c in range(COLUMNS):
            x0, x1 = _middle(xs[c], xs[c + 1])
            level = float(grey[y0:y1, x0:x1].mean())
            if level >= WHITE_ABOVE:
                bits.append(1)
            elif level <= BLACK_BELOW:
                bits.append(0)
            else:
                return None
    value = _number(bits[:DATA_BITS])
    if _number(bits[DATA_BITS:DATA_BITS + CHECK_BITS]) != _crc16(value.to_bytes(8, "big")):
        return None
    return value / 1e6


def _bits(t: float) -> list[int]:
    value = int(round(t * 1e6)) & (2**DATA_BITS - 1)
    check = _crc16(value.to_bytes(8, "big"))
    number = (value << CHECK_BITS) | check
    total = DATA_BITS + CHECK_BITS
    return [(number >> (total - 1 - i)) & 1 for i in range(total)] + [0] * (ROWS * COLUMNS - total)


def _number(bits: list[int]) -> int:
    value = 0
    for bit in bits:
        value = (value << 1) | bit
    return value


def _edges(cell: float, count: int) -> list[int]:
    # The same rounding here and in every reader: a cell's pixels are the ones whose start falls inside it.
    return [int(i * cell + 0.5) for i in range(count + 1)]


def _middle(start: int, end: int) -> tuple[int, int]:
    # The inner half of a cell: its borders blur into the neighbours under scaling and H.264's deblocking.
    quarter = (end - start) / 4
    return int(start + quarter + 0.5), max(int(end - quarter + 0.5), int(start + quarter + 0.5) + 1)


def _crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc
