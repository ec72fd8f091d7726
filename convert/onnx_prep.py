"""Load, validate and simplify an ONNX model: the FP32 source of truth every later stage works from."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

from orinkit.convert.errors import InputModelError
from orinkit.core.errors import ChildCrashedError
from orinkit.core.failpoints import reach
from orinkit.core.files import file_sha256
from orinkit.core.isolation import run_isolated
from orinkit.core.optional import require

# protobuf cannot serialise a message of 2 GiB or more; such models keep their weights as external data.
PROTOBUF_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class PreparedModel:
    path: Path
    source_sha256: str
    simplified: bool
    note: str  # why the model was not simplified, when it was not
    inputs: dict[str, tuple[int, ...]]  # declared shapes, -1 for dynamic axes
    outputs: tuple[str, ...]


def load_checked(path: str | os.PathLike[str]):
    """The model at ``path``, checked by onnx.checker and shape inference; InputModelError otherwise."""
    onnx = require("onnx")
    path = Path(path)
    if not path.is_file():
        raise InputModelError(f"{path} does not exist", hint="check the path to the .onnx file")
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # DecodeError for truncated or foreign files; the message varies by version
        raise InputModelError(
            f"{path} is not an ONNX model ({type(exc).__name__}: {exc})",
            hint="pass a complete .onnx file; re-export it if it was cut short",
        ) from exc
    if not model.graph.node and not model.graph.output:
        raise InputModelError(f"{path} holds no ONNX graph", hint="pass a complete .onnx file")
    try:
        onnx.checker.check_model(str(path) if path.stat().st_size > PROTOBUF_LIMIT else model)
        model = onnx.shape_inference.infer_shapes(model)
    except Exception as exc:  # onnx.checker.ValidationError, InferenceError
        raise InputModelError(f"{path} is not a valid ONNX model: {exc}", hint="fix or re-export the model") from exc
    return model


def name_nodes(model) -> None:
    """Give every node a unique name: FP32 node lists and TensorRT layer names refer to nodes by name."""
    seen: set[str] = set()
    for index, node in enumerate(model.graph.node):
        if not node.name or node.name in seen:
            node.name = f"{node.op_type}_{index}"
        seen.add(node.name)


def declared_inputs(model) -> dict[str, tuple[int, ...]]:
    initializers = {i.name for i in model.graph.initializer}
    return {
        i.name: tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1
                      for d in i.type.tensor_type.shape.dim)
        for i in model.graph.input if i.name not in initializers
    }


def simplify_file(source: str, destination: str) -> str:
    """Run in a child process: onnxsim on the model at ``source``, saved to ``destination``; "" on success,
    else why the model was kept as it is."""
    onnx = require("onnx")
    reach("onnxsim-crash", signal=signal.SIGSEGV)
    try:
        onnxsim = require("onnxsim")
        simplified, ok = onnxsim.simplify(onnx.load(source))
    except Exception as exc:  # onnxsim raises RuntimeError and many others on unsupported graphs
        return f"not simplified: onnxsim failed ({type(exc).__name__}: {str(exc)[:200]})"
    if not ok:
        return "not simplified: onnxsim's result did not match the original on its check"
    onnx.save(simplified, destination)
    return ""


def simplify(model, folder: Path) -> tuple[object, bool, str]:
    """onnxsim's simplified model, or the original with the reason it was kept. onnxsim runs in a child
    process: it is native code that can crash on unusual graphs, and then the model is kept unsimplified."""
    onnx = require("onnx")
    size = model.ByteSize()
    if size > PROTOBUF_LIMIT:
        return model, False, f"not simplified: the model is {size / 2**30:.1f} GiB, over protobuf's 2 GiB limit"
    source, destination = folder / ".unsimplified.onnx", folder / ".simplified.onnx"
    onnx.save(model, str(source))
    try:
        note = run_isolated("onnxsim", f"{__name__}:simplify_file", str(source), str(destination))
        return (model, False, note) if note else (onnx.load(str(destination)), True, "")
    except ChildCrashedError as exc:
        return model, False, f"not simplified: {exc.message}; the unsimplified model is used"
    except Exception as exc:  # noqa: BLE001 - whatever the child raised, the unsimplified model still serves
        why = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:200]
        return model, False, f"not simplified: onnxsim's process failed ({why}); the unsimplified model is used"
    finally:
        source.unlink(missing_ok=True)
        destination.unlink(missing_ok=True)


def save(model, path: Path) -> Path:
    onnx = require("onnx")
    large = model.ByteSize() > PROTOBUF_LIMIT
    onnx.save_model(model, str(path), save_as_external_data=large,
                    location=f"{path.name}.data" if large else None)
    return path


def prepare(source: str | os.PathLike[str], destination: Path, *, simplify_model: bool = True,
            check=lambda model: None, progress=lambda message: None) -> PreparedModel:
    """Validate ``source``, simplify it (unless told not to), name its nodes, and save it to ``destination``.
    ``check`` sees the validated model before the (slow) simplification, to fail fast on options that do not fit."""
    source = Path(source)
    model = load_checked(source)
    check(model)
    note = ""
    simplified = False
    if simplify_model:
        progress(f"  valid ONNX ({len(model.graph.node)} nodes); simplifying it with onnxsim")
        model, simplified, note = simplify(model, destination.parent)
    else:
        note = "not simplified: asked not to"
    name_nodes(model)
    save(model, destination)
    return PreparedModel(
        path=destination,
        source_sha256=file_sha256(source),
        simplified=simplified,
        note=note,
        inputs=declared_inputs(model),
        outputs=tuple(o.name for o in model.graph.output),
    )
