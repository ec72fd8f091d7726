"""A model's outputs read as the answer the "Try" panel draws: classes, lanes, an image, or a tensor summary.

Outputs are recognised by shape, dtype and (for ties only) name, never by the model's name, in this order:

* lanes: a float [K, P, 2] output (points, NaN past each lane's last, as orinkit's lane ensemble pads them) with a
  float [K] output (scores) and, optionally, an integer output of one value (the count);
* classes: a float [k] output next to an integer [k] one (scores and class ids, as orinkit's TopK step gives them,
  with its BYTES [k] LABELS when present; never beside a float [k, 4] output, a detector's boxes), or a single
  float vector of 2 or more finite values (scores, logits or probabilities);
* image: a [C, H, W] or [H, W, C] output with C 1 or 3 and H, W >= 8, UINT8, or float in [0, 1] or about [0, 255];
* tensor: anything else.

Every number in an answer is JSON-ready: NaN and infinities become null, and a note says so.
"""

from __future__ import annotations

import base64
import math

import numpy as np

TOP = 5
FIRST = 8
MIN_IMAGE_SIDE = 8
# A float image a little outside [0, 255] (a style-transfer net without a final clamp) is still an image, clipped.
FLOAT_IMAGE_SLACK = 5.0
# Probabilities add up to 1 within float rounding over many classes.
SUM_TOLERANCE = 1e-3


def number(value):
    """A JSON-ready number: int for integers, float for finite floats, None for NaN and infinities."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


def _vector(array: np.ndarray) -> np.ndarray | None:
    """``array`` as 1-D when it is one, also [1, n] and [n, 1] (a batch or keep-dims axis left by the model)."""
    if array.ndim == 1:
        return array
    if array.ndim == 2 and 1 in array.shape:
        return array.reshape(-1)
    return None


def _is_float(array: np.ndarray) -> bool:
    return array.dtype.kind == "f"


def _is_int(array: np.ndarray) -> bool:
    return array.dtype.kind in "iu"


def _prefer(names: list[str], *words: str) -> str | None:
    """The one name among ``names``, or the first holding one of ``words`` when there are several; else None."""
    if len(names) == 1:
        return names[0]
    for word in words:
        hits = [n for n in names if word in n.lower()]
        if len(hits) == 1:
            return hits[0]
    return None


# --- lanes ---------------------------------------------------------------------------------------------------


def lanes(arrays: dict[str, np.ndarray], image_size: tuple[int, int], scale: tuple[float, float] | None,
          notes: list[str]) -> dict | None:
    """``{"width", "height", "lanes": [{"score", "points"}]}`` or None. ``scale`` multiplies (x, y) when the points
    are in the model input's pixels (a tensor-fed model) instead of the upload's."""
    points_name = _prefer([n for n, a in arrays.items() if _is_float(a) and a.ndim == 3 and a.shape[2] == 2
                           and a.shape[1] >= 2], "lane", "point")
    if points_name is None:
        return None
    k = arrays[points_name].shape[0]
    score_name = _prefer([n for n, a in arrays.items() if n != points_name and _is_float(a) and a.shape == (k,)],
                         "score", "conf", "prob")
    if score_name is None:
        return None
    count_name = _prefer([n for n, a in arrays.items() if _is_int(a) and a.size == 1], "count", "num")
    points, scores = arrays[points_name], arrays[score_name]
    if count_name is not None:
        count = min(max(int(arrays[count_name].reshape(-1)[0]), 0), k)
    else:
        # Without a count, a lane is a row with any point (orinkit pads the unused rows with NaN only).
        count = int(np.isfinite(points).all(axis=2).any(axis=1).sum())
    if scale is not None:
        notes.append(f"lane points scaled by {scale[0]:.4g} x {scale[1]:.4g} from the model input's pixels to the "
                     "image's (assumed: the model saw the whole image resized)")
    found = []
    for row, score in zip(points[:count], scores[:count]):
        # The same rule as orinkit.lanes.client.lanes_from: a point with any NaN coordinate is padding.
        kept = row[~np.isnan(row).any(axis=1)].astype(np.float64)
        if scale is not None:
            kept = kept * scale
        found.append({"score": number(score), "points": [[number(x), number(y)] for x, y in kept]})
    width, height = image_size
    return {"width": width, "height": height, "lanes": found}


# --- classes -------------------------------------------------------------------------------------------------


def _label(labels: list[str] | None, index: int) -> str | None:
    return labels[index] if labels is not None and 0 <= index < len(labels) else None


def _labels_for(labels: dict[str, list[str]] | None, *names: str) -> list[str] | None:
    """The labels given for any of ``names``; a single list given under another name serves too (the page may
    key a TopK step's labels.txt by the step's output, which an ensemble renames)."""
    if not labels:
        return None
    for name in names:
        if name in labels:
            return list(labels[name])
    return list(next(iter(labels.values()))) if len(labels) == 1 else None


def _decode_labels(array: np.ndarray) -> list[str]:
    return [v.decode("utf-8", "replace") if isinstance(v, (bytes, np.bytes_)) else str(v) for v in array.reshape(-1)]


def _boxes_beside(arrays: dict[str, np.ndarray], k: int) -> str | None:
    """The name of a float [k, 4] output (also [1, k, 4]), or None."""
    for name, array in arrays.items():
        shape = array.shape[1:] if array.ndim == 3 and array.shape[0] == 1 else array.shape
        if _is_float(array) and shape == (k, 4):
            return name
    return None


def classes(arrays: dict[str, np.ndarray], labels: dict[str, list[str]] | None, notes: list[str]) -> dict | None:
    """``{"top": [{"index", "label", "score"}]}`` best first, or None."""
    vectors = {n: v for n, v in ((n, _vector(a)) for n, a in arrays.items()) if v is not None}
    floats = [n for n, v in vectors.items() if _is_float(v)]
    ints = [n for n, v in vectors.items() if _is_int(v)]
    pairs = [(s, i) for s in floats for i in ints if vectors[s].shape == vectors[i].shape and vectors[s].size]
    if pairs:
        boxes = _boxes_beside(arrays, vectors[pairs[0][0]].size)
        if boxes is not None:
            # Scores and class ids beside [k, 4] boxes are a detector's, not a classifier's top classes.
            notes.append(f"'{boxes}' holds boxes beside the scores and class ids: a detector that no task kit "
                         "recognizes (orinkit's detection ensemble is drawn), shown as tensors")
            return None
        scores_name = _prefer(sorted({s for s, _ in pairs}), "score", "prob", "conf")
        ids_name = _prefer(sorted({i for s, i in pairs if s == scores_name}), "class", "id", "index", "label")
        if scores_name is not None and ids_name is not None:
            scores, ids = vectors[scores_name], vectors[ids_name]
            given = [n for n, v in vectors.items() if v.dtype == np.object_ and v.shape == scores.shape]
            names = _decode_labels(vectors[given[0]]) if len(given) == 1 else None
            table = _labels_for(labels, ids_name, scores_name)
            order = np.argsort(-np.nan_to_num(scores.astype(np.float64), nan=-np.inf), kind="stable")[:TOP]
            notes.append(f"classes from '{scores_name}' (scores) and '{ids_name}' (class ids)")
            return {"top": [{"index": int(ids[j]), "score": number(scores[j]),
                             "label": names[j] if names is not None else _label(table, int(ids[j]))}
                            for j in order]}
    candidates = [n for n in floats if vectors[n].size >= 2 and np.isfinite(vectors[n]).all()
                  and not any(word in n.lower() for word in ("embed", "feature"))]
    if len(candidates) != 1 or any(a.size > 1 for n, a in arrays.items() if n != candidates[0]):
        return None
    name = candidates[0]
    values = vectors[name].astype(np.float64)
    if values.min() >= 0 and values.max() <= 1 and abs(values.sum() - 1) <= SUM_TOLERANCE * max(1, values.size / 100):
        probabilities = values
        notes.append(f"'{name}' holds probabilities (they sum to 1): shown as they are, no softmax")
    elif values.min() >= 0 and values.max() <= 1:
        probabilities = values
        notes.append(f"'{name}' holds scores in [0, 1] that do not sum to 1 (independent, e.g. sigmoid): shown as "
                     "they are, no softmax")
    else:
        # Subtracting the maximum keeps exp() finite without changing the result.
        exp = np.exp(values - values.max())
        probabilities = exp / exp.sum()
        notes.append(f"'{name}' holds logits (values outside [0, 1]): softmax applied to show probabilities")
    table = _labels_for(labels, name)
    if table is not None and len(table) != values.size:
        notes.append(f"{len(table)} labels for {values.size} classes: labels past the end are missing")
    order = np.argsort(-probabilities, kind="stable")[:TOP]
    return {"top": [{"index": int(j), "label": _label(table, int(j)), "score": float(probabilities[j])}
                    for j in order]}


# --- image ---------------------------------------------------------------------------------------------------


def _image_layout(shape: tuple[int, ...], prefer: str | None) -> str | None:
    chw = shape[0] in (1, 3) and min(shape[1:]) >= MIN_IMAGE_SIDE
    hwc = shape[2] in (1, 3) and min(shape[:2]) >= MIN_IMAGE_SIDE
    if chw and hwc:
        return prefer or "CHW"
    return "CHW" if chw else "HWC" if hwc else None


def image(arrays: dict[str, np.ndarray], prefer_layout: str | None, notes: list[str], png) -> dict | None:
    """``{"png_base64", "width", "height"}`` of the first output that is a picture, or None."""
    for name, array in arrays.items():
        if array.ndim == 4 and array.shape[0] == 1:
            array = array[0]
        if array.ndim != 3 or not (_is_float(array) or array.dtype == np.uint8):
            continue
        layout = _image_layout(array.shape, prefer_layout)
        if layout is None:
            continue
        hwc = array.transpose(1, 2, 0) if layout == "CHW" else array
        if array.dtype == np.uint8:
            pixels = hwc
        else:
            values = hwc.astype(np.float64)
            if not np.isfinite(values).all():
                continue
            low, high = float(values.min()), float(values.max())
            if low >= 0 and high <= 1:
                values = values * 255
                notes.append(f"'{name}' holds floats in [0, 1]: scaled by 255")
            elif low >= -FLOAT_IMAGE_SLACK and high <= 255 + FLOAT_IMAGE_SLACK:
                if low < 0 or high > 255:
                    notes.append(f"'{name}' runs from {low:.3g} to {high:.3g}: clipped to 0..255")
            else:
                continue
            pixels = np.clip(np.rint(values), 0, 255).astype(np.uint8)
        notes.append(f"image from '{name}' ({layout}, {pixels.shape[2]} channel{'s' * (pixels.shape[2] > 1)})")
        return {"png_base64": base64.b64encode(png(pixels)).decode("ascii"), "width": int(pixels.shape[1]),
                "height": int(pixels.shape[0])}
    return None


# --- tensor --------------------------------------------------------------------------------------------------


def tensor(arrays: dict[str, np.ndarray], dtypes: dict[str, str], notes: list[str]) -> dict:
    """``{"outputs": [{"name", "shape", "dtype", "min", "max", "mean", "first"}]}``: statistics over the finite
    values (null when there are none), the first 8 values in C order (null for NaN and infinities)."""
    summaries = []
    for name, array in arrays.items():
        flat = array.reshape(-1)
        entry = {"name": name, "shape": [int(d) for d in array.shape], "dtype": dtypes[name],
                 "min": None, "max": None, "mean": None}
        if array.dtype == np.object_ or array.dtype.kind in "SU":
            entry["first"] = _decode_labels(flat[:FIRST])
        else:
            numbers = flat.astype(np.float64) if array.dtype.kind != "b" else flat.astype(np.int64)
            finite = numbers[np.isfinite(numbers)] if _is_float(array) else numbers
            if finite.size:
                entry.update(min=number(finite.min()), max=number(finite.max()), mean=number(finite.mean()))
            if finite.size < numbers.size:
                notes.append(f"'{name}' holds {numbers.size - finite.size} NaN or infinite value(s): left out of "
                             "min/max/mean and shown as null")
            entry["first"] = [number(v) for v in flat[:FIRST]]
        summaries.append(entry)
    return {"outputs": summaries}
