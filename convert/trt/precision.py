"""Keeping chosen ONNX nodes in FP32 inside an FP16 TensorRT 8.5/10 network (layer precision constraints).

TensorRT names a layer after the ONNX node it came from; when one node becomes several layers, the extra ones
get the node name plus a suffix (``/fc/Gemm_12``, ``/fc/Gemm/reshape``). A suffixed name can also be another
node's own name (torch exports ``/conv/Conv`` and ``/conv/Conv_1``), so a layer belongs to the longest node name
it extends, and a layer named exactly like a node belongs to that node alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import ModuleType

SEPARATORS = ("_", "/")


def onnx_node_names(path) -> list[str]:
    """The node names of an ONNX file, without loading its external weights."""
    import onnx

    return [node.name for node in onnx.load(str(path), load_external_data=False).graph.node if node.name]


def match_layers(layer_names: Iterable[str], keep: Sequence[str],
                 node_names: Iterable[str] = ()) -> dict[str, list[str]]:
    """For each node in ``keep``, the layer names that came from it (in network order)."""
    wanted = set(keep)
    nodes = set(node_names) | wanted
    matches: dict[str, list[str]] = {name: [] for name in keep}
    for layer in layer_names:
        if layer in nodes:
            if layer in wanted:
                matches[layer].append(layer)
            continue
        owner = _owner(layer, nodes)
        if owner in wanted:
            matches[owner].append(layer)
    return matches


def _owner(layer: str, nodes: set[str]) -> str | None:
    for end in range(len(layer) - 1, 0, -1):
        if layer[end] in SEPARATORS and layer[:end] in nodes:
            return layer[:end]
    return None


def pin_fp32(trt: ModuleType, network, keep: Sequence[str],
             node_names: Iterable[str] = ()) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Constrain the layers of ``keep``'s nodes to FP32; returns (pinned layer names, nodes without a layer)."""
    return pin_precision(trt, network, keep, node_names, trt.float32)


def pin_precision(trt: ModuleType, network, keep: Sequence[str], node_names: Iterable[str],
                  dtype) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Constrain the layers of ``keep``'s nodes to ``dtype`` (FP32 for the FP16 gate's nodes, FP16 for the INT8
    gate's on an implicitly quantized DLA build); returns (pinned layer names, nodes without a layer).

    Layers with no floating output (shape arithmetic, integer ops) are left alone: they have no FP16 form,
    and TensorRT rejects a float precision on them.
    """
    layers = [network.get_layer(i) for i in range(network.num_layers)]
    matches = match_layers([layer.name for layer in layers], keep, node_names)
    chosen = {name for names in matches.values() for name in names}
    floating = (trt.float32, trt.float16)
    pinned = []
    for layer in layers:
        if layer.name not in chosen:
            continue
        outputs = [i for i in range(layer.num_outputs) if layer.get_output(i).dtype in floating]
        if not outputs:
            continue
        layer.precision = dtype
        for index in outputs:
            layer.set_output_type(index, dtype)
        pinned.append(layer.name)
    unmatched = tuple(name for name, names in matches.items() if not names)
    return tuple(pinned), unmatched
