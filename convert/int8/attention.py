"""What the INT8 search knows about transformer-style nets (attention between MatMuls, LayerNorm): a first guess of
the nodes that stay out of INT8, recognised from the graph's structure (a Softmax between two MatMuls), never from
the model's name.

The guess is what ModelOpt's own defaults and TensorRT's INT8 guidance keep in high precision: the MatMuls inside
attention (Q·K^T and attention·V, both inputs activations), whatever reads a Q/DQ pair between them and the
Softmax (the scores quantized before the Softmax), LayerNorm's own nodes (LayerNormalization, or its decomposition:
ReduceMean, Sub, Pow, Sqrt, Div), the first compute node (it reads the raw input), and the nodes between the last
projection and an output (a classifier's or CTC head's logits quantized before their Softmax). It is judged as a
whole, and where it passes its nodes go back to INT8 in halving groups, as the detector's guess does
(:mod:`orinkit.convert.int8.detector`).

Measured on a published SVTR-style text recogniser (PP-OCRv4 rec: a PP-LCNetV3 backbone, two attention blocks,
a CTC head; ModelOpt 0.47): ModelOpt already keeps Q·K^T, attention·V and two MLP MatMuls out, and the attention
part is not where INT8 breaks the text: each of its MatMuls, the neck's convolutions and the head's projection
alone in INT8 changed no decoded line, while single backbone convolutions changed up to every line. There the
guess (12 nodes) misses like every node in INT8, and the search's ranking (each compute node's own error,
:mod:`orinkit.convert.int8.gate`) decides which backbone convolutions stay in FP16.
"""

from __future__ import annotations

from collections.abc import Sequence

from orinkit.convert.int8.qdq import COMPUTE_OPS, DEQUANTIZE, QUANTIZE, nodes_to_outputs

# Ops a value passes through unchanged in meaning between attention's MatMuls and its Softmax (scaling, masking,
# reshaping heads) and the Q/DQ pairs ModelOpt puts there.
PASS_THROUGH = frozenset({"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Cast", "Identity", "Mul",
                          "Div", "Add", "Sub", "Where", "Slice", QUANTIZE, DEQUANTIZE})
LAYER_NORM = frozenset({"LayerNormalization", "ReduceMean", "Sub", "Pow", "Sqrt", "Div"})
STEPS = 8  # hops from a Softmax to the MatMuls around it


def _maps(graph):
    producer = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    return producer, consumers


def _constant(name: str, producer, initializers) -> bool:
    """True when ``name`` comes from weights only (an initializer, a Constant, or a DQ of one)."""
    for _ in range(STEPS):
        if name in initializers:
            return True
        node = producer.get(name)
        if node is None:
            return False
        if node.op_type == "Constant":
            return True
        if node.op_type not in (DEQUANTIZE, QUANTIZE, "Cast", "Transpose", "Reshape", "Identity"):
            return False
        name = node.input[0]
    return False


def attention_blocks(model) -> list[tuple[str, list[str], list[str]]]:
    """Each Softmax that sits between a MatMul of two activations (the scores) and a MatMul reading its result:
    (its name, [the MatMuls on both sides], [the nodes walked between them and the Softmax])."""
    graph = model.graph
    producer, consumers = _maps(graph)
    initializers = {i.name for i in graph.initializer}
    blocks = []
    for softmax in (n for n in graph.node if n.op_type == "Softmax"):
        between, scores, node = [], None, softmax
        for _ in range(STEPS):  # upstream to the scores' MatMul
            node = producer.get(node.input[0]) if node.input else None
            if node is None:
                break
            if node.op_type == "MatMul":
                scores = node
                break
            if node.op_type not in PASS_THROUGH:
                break
            between.append(node.name)
        if scores is None or any(_constant(i, producer, initializers) for i in scores.input[:2]):
            continue
        readers, frontier = [], [softmax.output[0]]
        for _ in range(STEPS):  # downstream to the MatMul that weighs the values
            following = []
            for name in frontier:
                for consumer in consumers.get(name, []):
                    if consumer.op_type == "MatMul":
                        readers.append(consumer.name)
                    elif consumer.op_type in PASS_THROUGH:
                        between.append(consumer.name)
                        following.extend(consumer.output)
            frontier = following
            if readers or not frontier:
                break
        if readers:
            blocks.append((softmax.name, [scores.name, *readers], between))
    return blocks


def _source(name: str, producer) -> str:
    """The float tensor behind ``name``: through any Q/DQ pairs ModelOpt put on it."""
    for _ in range(STEPS):
        node = producer.get(name)
        if node is None or node.op_type not in (QUANTIZE, DEQUANTIZE):
            return name
        name = node.input[0]
    return name


def _layer_norms(graph, producer, consumers) -> list[str]:
    """LayerNormalization nodes, and decomposed ones: a ReduceMean whose result a Sub takes from its own input
    (x - mean(x); a plain mean, a pooling, is no LayerNorm), and the nodes of the op types LayerNorm is made of that
    follow it within a few hops (its square, the second mean, the root, the division)."""
    found = [n.name for n in graph.node if n.op_type == "LayerNormalization"]
    for start in (n for n in graph.node if n.op_type == "ReduceMean"):
        centred = [c for output in start.output for c in _readers(output, consumers)
                   if c.op_type == "Sub" and len(c.input) == 2
                   and _source(c.input[0], producer) == _source(start.input[0], producer)]
        if not centred:
            continue
        frontier, seen = [start], {start.name}
        for _ in range(STEPS):
            following = []
            for node in frontier:
                for output in node.output:
                    for consumer in consumers.get(output, []):
                        if consumer.name not in seen and consumer.op_type in LAYER_NORM | {QUANTIZE, DEQUANTIZE,
                                                                                           "Add", "Cast"}:
                            seen.add(consumer.name)
                            following.append(consumer)
            frontier = following
        found += [name for name in seen]
    return found


def _readers(name: str, consumers) -> list:
    """The nodes reading ``name``, through any Q/DQ pair on it."""
    found = []
    for node in consumers.get(name, []):
        if node.op_type in (QUANTIZE, DEQUANTIZE):
            found += _readers(node.output[0], consumers)
        else:
            found.append(node)
    return found


def is_attention_model(model) -> bool:
    return bool(attention_blocks(model))


def first_guess(model, units: Sequence[str]) -> tuple[str, ...]:
    """Among the quantized ``units`` of the Q/DQ ``model`` (empty when it has no attention block): attention's
    MatMuls and what lies between them and the Softmax, LayerNorm's nodes, the first compute node, and the nodes
    from the last projection to an output."""
    blocks = attention_blocks(model)
    if not blocks:
        return ()
    graph = model.graph
    producer, consumers = _maps(graph)
    quantized = set(units)
    guess = []
    first = next((n.name for n in graph.node if n.op_type in COMPUTE_OPS), None)
    if first is not None:
        guess.append(first)
    for _, matmuls, between in blocks:
        guess += matmuls + between
    guess += _layer_norms(graph, producer, consumers)
    guess += [node.name for node in nodes_to_outputs(graph)]
    order = {n.name: i for i, n in enumerate(graph.node)}
    chosen = {n for n in guess if n in quantized}
    return tuple(sorted(chosen, key=order.__getitem__))
