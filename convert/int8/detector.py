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
  the first misses the gate, and on a detector only when the first guess misses it too.
* The first guess (:func:`first_guess`) is what deployments keep in FP16 by hand: the first convolution (it reads
  the raw pixels), the head's last convolutions (the box branch's ``cv2.*.2``, the class branch's ``cv3.*.2``,
  the DFL: every compute node from which an output is reached without another compute node) and any quantized
  Sigmoid (Ultralytics' exporter keeps Sigmoid unquantized to keep the scores calibrated). Given the head, also
  the stem (the convolutions at stride 2 and 4, :func:`stem`), the box-regression branch (:func:`box_branch`)
  and the quantized nodes that are no convolution: the boxes metric asks for mAP50-95 >= 0.99 against FP32,
  and INT8 there moved the boxes (mAP50-95 0.89-0.95) where F1 at IoU 0.5 kept 0.98. Measured on the YOLOv8n
  (max calibration, 26 held-out frames): every node INT8, mAP50-95 0.907; the stem, the box branch and the
  non-compute nodes out of INT8, 1.000 (the stem and the box branch only, 0.976; the non-compute nodes and the
  stem only, 0.956); the neck alone, the backbone after stride 4 alone or the class branch alone in INT8 cost
  nothing (1.000). It is judged as a whole first, then its groups (:func:`guess_groups`) return to INT8 one at
  a time while the gate holds, and the groups that fail are halved while the budget lasts (on the YOLOv8n the
  class branch's last convolutions and the box branch's ``cv2.*.0`` and ``.1`` return: 10 of 64 out, mAP50-95
  1.000); the search takes over when the guess is not enough.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from orinkit.convert.int8.qdq import COMPUTE_OPS, nodes_to_outputs

# Heads whose score per candidate sits at a fixed place in the output, so that FP32 and INT8 rows compare
# one to one. NMS-inside heads (end2end, efficient_nms) sort their rows by score, DETR's are logits: those fall
# back to the gate's numeric ranking.
SCORED_HEADS = ("yolov8", "yolov5", "yolox")
# The boxes whose movement ranks nodes: what FP32 keeps at the gate's threshold less its tolerance (0.25 - 0.05).
CONFIDENT = 0.2


def method_order(head) -> tuple[str, ...]:
    """The calibration methods to try, in order, when --calib-method is not given."""
    return ("max", "entropy") if head is not None else ("entropy", "max")


def _rows(head, outputs: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The head's first output as float32 [B, ...] with fixed rows per candidate, or None for a head without them."""
    if head is None or head.kind not in SCORED_HEADS or not head.outputs:
        return None
    array = np.asarray(outputs[head.outputs[0]], dtype=np.float32)
    return array if array.ndim == 3 else None


def scores(head, outputs: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """Every candidate's class scores of one sample ([B, N, classes]), or None for a head without fixed rows."""
    array = _rows(head, outputs)
    if array is None:
        return None
    if head.kind == "yolov8":  # [B, 4 + nc, N]: already sigmoid, no objectness
        return array[:, 4:, :].transpose(0, 2, 1)
    return array[:, :, 4:5] * array[:, :, 5:]  # [B, N, 5 + nc]: objectness x class


def boxes(head, outputs: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """Every candidate's box of one sample as [B, N, 4] centre x, centre y, width, height in one unit per box
    (pixels; YOLOX's raw rows: cells, the grid offset cancelling in differences), or None for a head without fixed
    rows."""
    array = _rows(head, outputs)
    if array is None:
        return None
    if head.kind == "yolov8":
        return array[:, :4, :].transpose(0, 2, 1)
    if head.kind == "yolox":  # offsets in cells, log width and height in cells
        return np.concatenate([array[:, :, :2], np.exp(np.clip(array[:, :, 2:4], -20, 20))], axis=2)
    return array[:, :, :4]


def score_drift(head, names: Sequence[str], reference: Sequence[Sequence[np.ndarray]],
                candidate: Sequence[Sequence[np.ndarray]], confident: float = CONFIDENT) -> float | None:
    """The largest change between FP32 and INT8 over the samples (outputs per sample in ``names`` order) of any
    candidate's class score, or of a box FP32 scores ``confident`` or more, relative to the box's longer side (a
    box that moves by 5 % of its size loses the IoU thresholds of 0.9 and up, which mAP50-95 counts); None where
    the head has no fixed score rows."""
    worst = 0.0
    for ref, got in zip(reference, candidate):
        ref, got = dict(zip(names, ref)), dict(zip(names, got))
        a, b = scores(head, ref), scores(head, got)
        if a is None or b is None:
            return None
        difference = np.abs(np.nan_to_num(b, nan=np.inf) - a)
        worst = max(worst, float(difference.max()) if difference.size else 0.0)
        kept = a.max(axis=2) >= confident if a.size else np.zeros(a.shape[:2], bool)
        if kept.any():
            first, second = boxes(head, ref)[kept], boxes(head, got)[kept]
            size = np.maximum(first[:, 2:4].max(axis=1), 1e-6)
            moved = np.abs(np.nan_to_num(second, nan=np.inf) - first).max(axis=1) / size
            worst = max(worst, float(moved.max()))
    return worst


def first_guess(model, units: Sequence[str], head=None) -> tuple[str, ...]:
    """Among the quantized ``units`` of the Q/DQ ``model``: the first compute node, the compute nodes that reach a
    graph output through no other compute node (the head's last convolutions), quantized Sigmoids and, given the
    ``head``, its box-regression branch (:func:`box_branch`), its stem (:func:`stem`) and the quantized nodes that
    are no convolution. The nodes of :func:`guess_groups`, the first convolution first."""
    nodes = [n for group in guess_groups(model, units, head) for n in group]
    return tuple(nodes[-1:] + nodes[:-1]) if nodes and nodes[-1] == _first_compute(model.graph) else tuple(nodes)


def guess_groups(model, units: Sequence[str], head=None) -> list[tuple[str, ...]]:
    """The first guess in the groups the search returns to INT8 one at a time, least likely needed first (each
    node in one group only; empty groups left out). Whole groups first, because halving a group that is needed
    costs ~2 log2(n) evaluations: on the YOLOv8n measured, the 60 s budget ended while it halved the first group
    of 31 nodes (48 of 64 convolutions INT8) where six whole groups take six evaluations and the class branch's
    and the box branch's first convolutions return (54 of 64, mAP50-95 1.000)."""
    graph = model.graph
    quantized = set(units)
    first = _first_compute(graph)
    last = _last_compute(graph)
    sigmoids = [n.name for n in graph.node if n.op_type == "Sigmoid"]
    if head is None or head.kind not in SCORED_HEADS:
        groups = [[node.name for node in last] + sigmoids, [first]]
    else:
        branch = box_branch(model, head, last)
        ends = {node.name for node in last}
        groups = [[node.name for node in last if node.name not in branch],  # the class branch's last convs
                  sigmoids,
                  [n for n in branch if n not in ends],  # the box branch before its last convolutions
                  [n for n in branch if n in ends],  # cv2.*.2 and the DFL, YOLOX's reg_preds and obj_preds
                  stem(model),
                  # Quantized nodes that are no Conv/MatMul/Gemm (the Adds, Concats, pools ModelOpt gave Q/DQ
                  # pairs) cost the INT8 share nothing and moved the YOLOv8n's boxes: mAP50-95 0.976 with them
                  # INT8, 1.000 without.
                  [n.name for n in graph.node if n.name in quantized and n.op_type not in COMPUTE_OPS],
                  [first]]
    seen: set[str] = set()
    chosen = []
    for group in reversed(groups):  # a node in two groups stays with the later (more likely needed) one
        kept = tuple(n for n in dict.fromkeys(group) if n in quantized and n not in seen)
        seen.update(kept)
        chosen.append(kept)
    return [group for group in reversed(chosen) if group]


def stem(model, levels: int = 2) -> list[str]:
    """The convolutions that run at the input's first ``levels`` halvings (stride 2 and 4): they read the pixels
    and their INT8 error reaches every box. On the YOLOv8n measured, INT8 in its first six convolutions alone
    (``model.0`` to ``model.2``) cost mAP50-95 0.05; the 48 convolutions after them, box branch aside, nothing."""
    import onnx.numpy_helper

    graph = model.graph
    initial = {init.name for init in graph.initializer}
    # YOLOX's Focus halves with strided Slices (space to depth) before its first convolution
    # (only the Slices' step tensors are read: a Constant may hold a whole weight)
    named = {n.input[4] for n in graph.node if n.op_type == "Slice" and len(n.input) > 4}
    steps = {init.name: onnx.numpy_helper.to_array(init).ravel().tolist() for init in graph.initializer
             if init.name in named}
    steps.update({n.output[0]: onnx.numpy_helper.to_array(a.t).ravel().tolist() for n in graph.node
                  if n.op_type == "Constant" and n.output[0] in named for a in n.attribute if a.name == "value"})
    producer = {output: node for node in graph.node for output in node.output}
    halvings: dict[str, float] = {}

    def depth(tensor: str) -> float:
        node = producer.get(tensor)
        return 0 if node is None else halvings.get(node.name, 0)

    chosen = []
    for node in graph.node:  # ONNX nodes are in topological order
        inputs = [i for i in node.input if i and i not in initial]
        before = max((depth(i) for i in inputs[:1] if node.op_type == "Conv"), default=None)
        if before is None:
            before = max((depth(i) for i in inputs), default=0)
        strides = next((list(a.ints) for a in node.attribute if a.name == "strides"), [1])
        halved = 1.0 if node.op_type in ("Conv", "MaxPool", "AveragePool") and max(strides) >= 2 else 0.0
        if node.op_type == "Slice" and len(node.input) > 4 and max(steps.get(node.input[4], [1])) >= 2:
            halved = 0.5  # one axis of two: Focus slices the height, then the width
        halvings[node.name] = before + halved
        if node.op_type in COMPUTE_OPS and halvings[node.name] <= levels:
            chosen.append(node.name)
    return chosen


def _first_compute(graph) -> str | None:
    return next((n.name for n in graph.node if n.op_type in COMPUTE_OPS), None)


def _last_compute(graph) -> list:
    """The compute nodes from which a graph output is reached through no other compute node."""
    return [node for node in nodes_to_outputs(graph) if node.op_type in COMPUTE_OPS]


def _out_channels(node, weights: Mapping[str, tuple[int, ...]], producer) -> int | None:
    """A Conv's output channels, read from its weight (behind ModelOpt's DequantizeLinear where there is one)."""
    if node.op_type != "Conv" or len(node.input) < 2:
        return None
    name = node.input[1]
    while name not in weights and name in producer and producer[name].op_type in ("DequantizeLinear",
                                                                                    "QuantizeLinear"):
        name = producer[name].input[0]
    dims = weights.get(name)
    return int(dims[0]) if dims else None


def box_branch(model, head, last: Sequence | None = None) -> list[str]:
    """The compute nodes of ``head``'s box-regression branch: INT8 there moves every box by a few pixels, which
    keeps its boxes at IoU 0.5 (F1 0.98) and costs mAP50-95 (0.91-0.95 on the YOLOv8n and YOLOX measured).

    Its ends are the head's last convolutions that do not write class scores: YOLOv8's ``cv2.*.2`` (4 x reg_max
    channels) and the DFL, YOLOX's ``reg_preds`` (4 channels) and the ``obj_preds`` beside them (they read the same
    feature). From there the walk goes back through every compute node whose results feed the branch only, and
    stops at the feature the class branch shares (YOLOv8's ``cv2.*.0`` and ``.1`` join, the neck's outputs do
    not)."""
    if head is None or head.kind not in SCORED_HEADS:
        return []
    graph = model.graph
    producer = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    weights = {init.name: tuple(init.dims) for init in graph.initializer}
    last = list(_last_compute(graph) if last is None else last)
    classes = head.num_classes
    if head.kind == "yolov8":
        ends = [n for n in last if _out_channels(n, weights, producer) not in (None, classes)]
    else:  # YOLOX, v5: the 4 box channels, and the convolutions that read the same feature as them
        boxes = [n for n in last if _out_channels(n, weights, producer) == 4 and classes != 4]
        read = {n.input[0] for n in boxes}
        ends = boxes + [n for n in last if n not in boxes and n.input[0] in read
                        and _out_channels(n, weights, producer) == 1]
    branch = {n.name for n in ends}
    terminal = {n.name for n in last}

    def compute_consumers(tensor: str) -> set[str]:
        found, stack, seen = set(), [tensor], set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            for node in consumers.get(name, []):
                if node.op_type in COMPUTE_OPS:
                    found.add(node.name)
                else:
                    stack.extend(node.output)
        return found

    changed = True
    while changed:
        changed = False
        for node in graph.node:
            if node.op_type not in COMPUTE_OPS or node.name in branch or node.name in terminal:
                continue
            after = set().union(*(compute_consumers(o) for o in node.output))
            if after and after <= branch:
                branch.add(node.name)
                changed = True
    return [n.name for n in graph.node if n.name in branch]
