"""The text detector's box metric the INT8 benchmark judges PP-OCR's DBNet by (tests/text_boxes.py), on maps made
here: boxes, not pixels, decide."""

from __future__ import annotations

import numpy as np
from text_boxes import boxes_agree, text_boxes


def _map(*boxes, level: float = 0.9) -> np.ndarray:
    probability = np.zeros((1, 1, 64, 96), np.float32)
    for x0, y0, x1, y1 in boxes:
        probability[0, 0, y0:y1, x0:x1] = level
    return probability


def test_each_region_is_a_box_and_faint_or_thin_ones_are_not():
    probability = _map((4, 4, 40, 12), (50, 30, 90, 40))[0, 0]
    probability[50:52, 10:60] = 0.9  # 2 px tall: not a text line
    probability[55:62, 70:90] = 0.45  # above the binarisation threshold, below the box score
    assert text_boxes(probability) == [(4, 4, 40, 12), (50, 30, 90, 40)]


def test_a_mask_a_pixel_thicker_agrees_and_a_lost_or_merged_line_does_not():
    reference = [{"map": _map((4, 4, 40, 12), (50, 30, 90, 40))}]
    assert boxes_agree(reference, [{"map": _map((3, 3, 41, 13), (49, 29, 91, 41))}]) == 1.0
    assert boxes_agree(reference, [{"map": _map((4, 4, 40, 12))}]) == 2 / 3
    merged = _map((4, 4, 40, 12), (50, 30, 90, 40), (40, 8, 50, 32))  # a bridge joins the two lines
    assert boxes_agree(reference, [{"map": merged}]) == 0.0
    assert boxes_agree([{"map": _map()}], [{"map": _map()}]) == 1.0
