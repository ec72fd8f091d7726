"""What the INT8 search knows about object detectors: which calibration to try first, a first guess of the nodes
that stay out of INT8, and a continuous measure of how far INT8 moved the scores (to rank nodes by).

Why these, measured on a published YOLOv8n (Ultralytics export, real video frames, ModelOpt 0.47):

* Every convolution INT8 lost boxes because the class scores fell (by ~0.1 on average, up to 0.8 on a frame), so
  boxes dropped under the score threshold; the coordinates hardly moved. The boxes metric itself cannot rank
  nodes (one node in INT8 on one sample almost never loses a box), so nodes are ranked by how much they move the
  scores: :func:`score_drift`. On that model it put the three nodes that mattered (the first convolutions of the
  backbone) first of 88.
* Max calibration kept every box where entropy lost 9 of 56 on one set of photos (shared/notes/detection.md); on
  another set the two were close. Entropy clips the rare large activations, which is where a detector's
  confident scores come from, and max calibration is 2-3x faster to run: detectors try max first, the other
  models entropy (the classifiers measured keep their top-1 with it); the second method is calibrated only when
  the first misses the gate.
* The first guess (:func:`first_guess`) is what deployments keep in FP16 by hand: the first convolution (it reads
  the raw pixels), the head's last convolutions (the box branch's ``cv2.*.2``, the class branch's ``cv3.*.2``,
  the DFL: every compute node from which an output is reached without another compute node) and any quantized
  Sigmoid (Ultralytics' exporter keeps Sigmoid unquantized to keep the scores calibrated). It is judged as a
  whole first; the search takes over when it is not enough.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from orinkit.convert.int8.qdq import COMPUTE_OPS

# Heads whose score per candidate sits at a fixed place in the output, so that FP32 and INT8 rows compare
# one to one. NMS-inside heads (end2end, efficient_nms) sort their rows by score, DETR's are logits: those fall
# back to the gate's numeric ranking.
SCORED_HEADS = ("yolov8", "yolov5", "yolox")


def method_order(head) -> tuple[str, ...]:
    """The calibration methods to try, in order, when --calib-method is not given."""
    return ("max", "entropy") if head is not None else ("entropy", "max")


def scores(head, outputs: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """Every candidate's class scores of one sample ([B, N, classes]), or None for a head without fixed rows."""
    if head is None or head.kind not in SCORED_HEADS or not head.outputs:
        return None
    array = np.asarray(outputs[head.outputs[0]], dtype=np.float32)
    if array.ndim != 3:
        return None
    if head.kind == "yolov8":  # [B, 4 + nc, N]: already sigmoid, no objectness
        return array[:, 4:, :].transpose(0, 2, 1)
    return array[:, :, 4:5] * array[:, :, 5:]  # [B, N, 5 + nc]: objectness x class


def score_drift(head, names: Sequence[str], reference: Sequence[Sequence[np.ndarray]],
                candidate: Sequence[Sequence[np.ndarray]]) -> float | None:
    """The largest change of any candidate's class score between FP32 and INT8 over the samples (outputs per sample
    in ``names`` order); None where the head has no fixed score rows."""
    worst = 0.0
    for ref, got in zip(reference, candidate):
        a, b = scores(head, dict(zip(names, ref))), scores(head, dict(zip(names, got)))
        if a is None or b is None:
            return None
        difference = np.abs(np.nan_to_num(b, nan=np.inf) - a)
        worst = max(worst, float(difference.max()) if difference.size else 0.0)
    return worst


def first_guess(model, units: Sequence[str]) -> tuple[str, ...]:
    """Among the quantized ``units`` of the Q/DQ ``model``: the first compute node, the compute nodes that reach a
    graph output through no other compute node (the head's last convolutions), and quantized Sigmoids."""
    graph = model.graph
    quantized = set(units)
    producer = {output: node for node in graph.node for output in node.output}
    guess = []
    first = next((n.name for n in graph.node if n.op_type in COMPUTE_OPS), None)
    if first in quantized:
        guess.append(first)
    seen: set[str] = set()
    stack = [o.name for o in graph.output]
    while stack:
        node = producer.get(stack.pop())
        if node is None or node.name in seen:
            continue
        seen.add(node.name)
        if node.op_type in COMPUTE_OPS:
            guess.append(node.name)  # the last compute node on this path: the walk stops here
            continue
        stack.extend(i for i in node.input if i)
    guess += [n.name for n in graph.node if n.op_type == "Sigmoid"]
    return tuple(dict.fromkeys(n for n in guess if n in quantized))
