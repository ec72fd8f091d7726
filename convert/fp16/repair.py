"""The FP16 graph's validation, and its repair: which nodes must stay FP32 for onnxruntime to take the graph.

The graph is validated in a child process (checker, strict shape inference, an onnxruntime session with its
optimisations and a run), because onnxruntime's optimiser has crashed on such graphs: 1.32 segfaults on
Cast(FP16) → Transpose → Cast(FP32) → MatMul, which the TorchScript export of an nn.TransformerEncoderLayer becomes
once its attention's input projection is kept in FP32.

When validation fails or crashes, the place is found from the graph's structure, not from error text: the shortest
failing prefix of the graph (in topological order) names its last node, and the original node it was made for is
kept in FP32. When that node is kept already, keeping it does not cure the failure (the crash sits where the
precisions meet, or in a fusion of several nodes), so a region around it stays FP32 instead: its neighbours joined
by floating tensors within a radius that doubles until that part of the graph validates, bisected back, after
which each of the region's nodes returns to FP16 unless the failure comes back. Only a failure that would need
every node in FP32 ends the conversion: then no FP16 graph of the model works on this onnxruntime.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from orinkit.convert.errors import Fp16GraphError
from orinkit.convert.fp16.convert import Fp16Graph, build_fp16, prefix_graph
from orinkit.convert.fp16.graphs import float_producers, float_tensors, onnx_module
from orinkit.convert.fp16.support import float32_only
from orinkit.convert.stages import paced
from orinkit.core.errors import ChildCrashedError
from orinkit.core.isolation import Worker
from orinkit.core.progress import Heartbeat

CHECK = "orinkit.convert.fp16.validate:check_file"
NO_FP16_HINT = "convert with --no-fp16, or report the model"


class _Checker:
    """Validation in a child process that is started again after it crashed."""

    def __init__(self, folder: Path, sample: dict | None) -> None:
        self.folder, self.sample, self.worker, self.count = folder, sample, None, 0

    def __call__(self, model) -> str | None:
        """None when ``model`` is valid, else why not ("crashed (SIGSEGV)" for a crash)."""
        onnx = onnx_module()
        self.count += 1
        path = self.folder / f"check-{self.count}.onnx"
        onnx.save(model, str(path))
        if self.worker is None:
            self.worker = Worker("onnxruntime (validating the FP16 graph)")
        try:
            return self.worker.call(CHECK, str(path), self.sample)
        except ChildCrashedError as exc:
            self.worker.close()
            self.worker = None
            return f"onnxruntime crashed ({exc.how})"
        except Exception as exc:  # noqa: BLE001 - whatever the check raised is a reason the graph is not valid
            return f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
        finally:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


def blame(built: Fp16Graph, check: Callable[[object], str | None], failure: str) -> tuple[int, str]:
    """The index of the node that ends the shortest failing prefix of ``built``, and why that prefix fails."""
    passing, failing = 0, len(built.model.graph.node)
    while failing - passing > 1:
        middle = (passing + failing) // 2
        why = check(prefix_graph(built, middle))
        if why is None:
            passing = middle
        else:
            failing, failure = middle, why
    return failing - 1, failure


def float_links(model) -> dict[str, set[str]]:
    """Each node's neighbours: the nodes that produce a floating tensor it reads, or read one it produces."""
    floats = float_tensors(model)
    producer = {name: node.name for node in model.graph.node for name in node.output if name}
    links: dict[str, set[str]] = {node.name: set() for node in model.graph.node}
    for node in model.graph.node:
        for name in node.input:
            if name in floats and producer.get(name, node.name) != node.name:
                links[node.name].add(producer[name])
                links[producer[name]].add(node.name)
    return links


def around(links: dict[str, set[str]], centre: str, radius: int) -> dict[str, int]:
    """The nodes at most ``radius`` links from ``centre``, with their distance."""
    distance = {centre: 0}
    frontier = [centre]
    for step in range(1, radius + 1):
        frontier = [m for n in frontier for m in sorted(links.get(n, ())) if m not in distance]
        if not frontier:
            break
        for node in frontier:
            distance.setdefault(node, step)
    return distance


class _Repair:
    """Finds what must stay FP32 for the FP16 graph of ``model`` to validate."""

    def __init__(self, model, keep: set[str], check: Callable[[object], str | None], beat: Heartbeat) -> None:
        self.model, self.keep, self.check, self.beat = model, keep, check, beat
        self.floating = set(float_producers(model))
        self.order = {node.name: index for index, node in enumerate(model.graph.node)}
        self.links = float_links(model)

    def validates_through(self, keep: set[str], last: int) -> bool:
        """Whether the FP16 graph keeping ``keep`` validates up to the original node at position ``last``."""
        built = build_fp16(self.model, keep)
        nodes = built.model.graph.node
        count = next((i for i, origin in enumerate(built.origins)
                      if origin is not None and self.order[origin] > last), len(nodes))
        return self.check(built.model if count == len(nodes) else prefix_graph(built, count)) is None

    def _cures(self, region: dict[str, int]) -> bool:
        return self.validates_through(self.keep | set(region), max(self.order[n] for n in region))

    def region(self, centre: str, failure: str) -> list[str]:
        """Nodes to keep in FP32 beside ``centre`` (kept already) so that the graph validates through them."""
        failing, radius = 0, 1
        while True:
            region = around(self.links, centre, radius)
            grown = len(region) > len(around(self.links, centre, failing))
            if not grown or self.keep | set(region) >= self.floating:
                which = "every node joined to it" if not grown else "every node of the model"
                raise Fp16GraphError(
                    f"the FP16 graph fails validation at {centre} ({failure[:300]}) unless {which} stays in FP32: "
                    "no FP16 graph of this model works on this onnxruntime", hint=NO_FP16_HINT)
            self.beat.status(f"validating the FP16 graph with the nodes within {radius} of {centre} in FP32")
            if self._cures(region):
                break
            failing, radius = radius, radius * 2
        while radius - failing > 1:
            middle = (failing + radius) // 2
            self.beat.status(f"validating the FP16 graph with the nodes within {middle} of {centre} in FP32")
            if self._cures(around(self.links, centre, middle)):
                radius = middle
            else:
                failing = middle
        region = {n: d for n, d in around(self.links, centre, radius).items() if n not in self.keep}
        for node in sorted(region, key=lambda n: (-region[n], -self.order[n])):  # farthest first
            if len(region) == 1:
                break  # the kept nodes alone fail: one of the region must stay
            trial = {n: d for n, d in region.items() if n != node}
            self.beat.status(f"validating the FP16 graph with {node} in FP16 again")
            if self._cures({**trial, centre: 0}):
                region = trial
        return sorted(region, key=self.order.__getitem__)


def to_fp16(model, keep_fp32: Iterable[str] = (), *, sample: dict | None = None, max_repairs: int = 16,
            progress: Callable[[str], None] = lambda message: None):
    """The FP16 graph of ``model`` keeping ``keep_fp32`` nodes in FP32; returns (model, nodes kept in FP32).

    Nodes ONNX types without float16 (:mod:`orinkit.convert.fp16.support`) and nodes the validation needs in
    FP32 are added to the kept ones (each named on ``progress``)."""
    keep = set(keep_fp32)
    known = {name: op for name, op in float32_only(model).items() if name not in keep}
    if known:
        kinds = sorted(set(known.values()))
        progress(f"  {len(known)} node(s) kept in FP32 because ONNX types their op without float16 "
                 f"({', '.join(kinds)}): {', '.join(list(known)[:6])}{', ...' if len(known) > 6 else ''}")
        keep.update(known)
    with tempfile.TemporaryDirectory(prefix="orinkit-fp16-check-") as folder, \
            paced(progress, "validating the FP16 graph") as beat:
        check = _Checker(Path(folder), sample)
        repair = _Repair(model, keep, check, beat)
        try:
            for _ in range(max_repairs + 1):
                built = build_fp16(model, keep)
                failure = check(built.model)
                if failure is None:
                    return built.model, tuple(n.name for n in model.graph.node if n.name in keep)
                beat.status("finding the node the FP16 graph fails at")
                index, why = blame(built, check, failure)
                culprit, at = built.origins[index], built.model.graph.node[index].name
                if culprit is None:
                    raise Fp16GraphError(f"the FP16 graph fails validation ({why[:300]}) at {at}, which no node "
                                         "kept in FP32 can fix", hint=NO_FP16_HINT)
                if culprit not in keep:
                    beat.say(f"  the FP16 graph fails at node {culprit} ({why[:200]}): keeping it in FP32")
                    keep.add(culprit)
                    if keep >= repair.floating:
                        raise Fp16GraphError(
                            f"the FP16 graph fails validation ({why[:300]}) until every node computing in floating "
                            "point is kept in FP32: no FP16 graph of this model works on this onnxruntime",
                            hint=NO_FP16_HINT)
                else:
                    beat.say(f"  the FP16 graph fails at {at} ({why[:200]}) with {culprit} in FP32 already: "
                             "looking for the region around it that must stay FP32")
                    region = repair.region(culprit, why)
                    beat.say(f"  keeping {len(region)} node(s) around {culprit} in FP32 too: {', '.join(region)}")
                    keep.update(region)
                beat.status("validating the FP16 graph")
        finally:
            check.close()
    raise Fp16GraphError(f"the FP16 graph still failed validation after {max_repairs} repairs (nodes or regions "
                         "kept in FP32)", hint=NO_FP16_HINT)
