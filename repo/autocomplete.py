"""What tritonserver completes in a model's configuration before it judges the model, so that ``edge-repo check``
judges the configuration the server ends up with, not only the file on disk.

Two steps, as in Triton 2.51:

* the core fills name, backend, platform and default_model_filename from the folder and the first version folder's
  files (``AutoCompleteBackendFields`` in core's model_config_utils.cc); a missing config.pbtxt is an empty one
  unless the server runs with ``--disable-auto-complete-config``;
* the backend completes the rest: onnxruntime and tensorrt read inputs, outputs and max_batch_size from the model
  file; the Python backend calls the model's ``auto_complete_config``. Here that method is read, never run:
  literal ``set_max_batch_size``/``add_input``/``add_output``/``set_dynamic_batching`` calls are applied the way
  triton_python_backend_utils.ModelConfig applies them, with its refusals.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

# (backend, file, platform) in the order Triton tries them; a file must be a file, except ONNX (a folder is allowed).
_BY_FILE = (
    ("tensorrt", "model.plan", "tensorrt_plan"),
    ("onnxruntime", "model.onnx", "onnxruntime_onnx"),
    ("openvino", "model.xml", ""),
    ("pytorch", "model.pt", "pytorch_libtorch"),
    ("python", "model.py", ""),
)
_TENSORFLOW = (("model.savedmodel", "tensorflow_savedmodel", True), ("model.graphdef", "tensorflow_graphdef", False))
# Backends that read inputs, outputs and max_batch_size from the model file when the config leaves them out.
IO_FROM_MODEL_FILE = {"onnxruntime", "tensorrt", "tensorflow", "openvino"}


def _first_version_folder(folder: Path) -> Path | None:
    """Triton inspects only the first sub-folder in byte order (any sub-folder, numeric or not)."""
    subdirs = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    return folder / subdirs[0] if subdirs else None


def complete_backend_fields(config: mc.ModelConfig, folder: Path) -> str | None:
    """Fill ``config`` as the core does before loading; the reason the server gives up, or None."""
    if not config.name:
        config.name = folder.name
    version = _first_version_folder(folder)
    present = {p.name: p.is_dir() for p in version.iterdir()} if version is not None else {}
    auto = not config.platform and not config.default_model_filename and version is not None
    if not config.platform and config.backend in ("", "tensorflow"):
        for name, platform, is_dir in _TENSORFLOW:
            if config.default_model_filename == name or (auto and present.get(name) is is_dir):
                config.platform = platform
    if config.platform.startswith("tensorflow_"):
        config.backend = config.backend or "tensorflow"
        config.default_model_filename = config.default_model_filename or (
            "model.savedmodel" if config.platform == "tensorflow_savedmodel" else "model.graphdef")
        return None
    for backend, filename, platform in _BY_FILE:
        if not config.backend:
            named = (platform and config.platform == platform) or config.default_model_filename == filename
            found = auto and filename in present and (backend == "onnxruntime" or not present[filename])
            if named or found:
                config.backend = backend
        if config.backend == backend:
            config.platform = config.platform or platform
            config.default_model_filename = config.default_model_filename or filename
            return None
    if not (config.backend or config.platform or config.default_model_filename):
        # A custom backend named by the folder: "<anything>.<backend>".
        if "." not in folder.name:
            return (f"Triton cannot tell the backend: the config names none and "
                    f"{version.name + '/' if version else 'no version folder'} holds no model.py, model.onnx, "
                    "model.plan or model.pt")
        config.backend = folder.name.split(".", 1)[1]
        config.default_model_filename = f"model.{config.backend}"
    elif not (config.backend or config.platform):
        return (f"the config names no backend or platform, and Triton infers none from default_model_filename "
                f"'{config.default_model_filename}' (only from model.plan, model.onnx, model.pt or model.py)")
    return None


@dataclass
class PythonAutoComplete:
    """What a model.py's ``auto_complete_config`` does, as far as reading it tells."""

    max_batch_size: int | None = None
    dynamic_batching: bool = False
    inputs: list[dict] = field(default_factory=list)
    outputs: list[dict] = field(default_factory=list)
    resolved: bool = True  # False: some call's argument is not a literal, so the inputs/outputs are not all known


def _model_class(tree: ast.Module) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TritonPythonModel"), None)


def binds_model_class(tree: ast.Module) -> bool:
    """Whether the module (at its top level) may define TritonPythonModel; a star import might, so it counts."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "TritonPythonModel":
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" or (a.asname or a.name) == "TritonPythonModel" for a in node.names):
                return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "TritonPythonModel" for t in targets):
                return True
        if isinstance(node, (ast.If, ast.Try)):
            return True  # a conditional definition: do not guess
    return False


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def python_auto_complete(tree: ast.Module) -> PythonAutoComplete | None:
    """Read TritonPythonModel.auto_complete_config; None where the model does not define it."""
    cls = _model_class(tree)
    method = next((n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and n.name == "auto_complete_config"), None) if cls else None
    if method is None:
        return None
    found = PythonAutoComplete()
    names = {t.id: node.value for node in ast.walk(method) if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)}
    loops = {node.target.id: node.iter for node in ast.walk(method)
             if isinstance(node, ast.For) and isinstance(node.target, ast.Name)}
    for call, certain in _calls(method.body, certain=True):
        what, args = call.func.attr, call.args
        if what == "set_dynamic_batching":
            found.dynamic_batching = found.dynamic_batching or certain
        elif what == "set_max_batch_size" and args:
            value = _literal(args[0])
            if isinstance(value, int) and certain:
                found.max_batch_size = value
            else:
                found.resolved = False
        elif what in ("add_input", "add_output") and args:
            tensors = _tensor_literals(args[0], names, loops)
            if tensors is None:
                found.resolved = False
                continue
            for tensor in tensors:
                tensor["_certain"] = certain
            (found.inputs if what == "add_input" else found.outputs).extend(tensors)
    return found


def _calls(body: list[ast.stmt], *, certain: bool):
    """(method call, whether it surely runs) for each ``x.method(...)`` in ``body``. A call under an if, while, try,
    with or a nested function may not run: the upstream example adds an input only when the config lacks it, so a
    config declaring it otherwise is no conflict. A for loop's body counts as run (the loops read here go over
    literal lists)."""
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(statement, (ast.For, ast.AsyncFor)):
            yield from _expression_calls(statement.iter, certain)
            yield from _calls(statement.body + statement.orelse, certain=certain)
            continue
        blocks = [getattr(statement, f, None) or [] for f in ("body", "orelse", "finalbody")]
        blocks += [h.body for h in getattr(statement, "handlers", [])]
        if any(blocks):  # if, while, try, with: their own test runs, their blocks may not
            for head in (getattr(statement, "test", None), *getattr(statement, "items", [])):
                if head is not None:
                    yield from _expression_calls(head, certain)
            for block in blocks:
                yield from _calls(block, certain=False)
            continue
        yield from _expression_calls(statement, certain)


def _expression_calls(node: ast.AST, certain: bool):
    conditional = any(isinstance(n, (ast.IfExp, ast.BoolOp, ast.comprehension, ast.Lambda)) for n in ast.walk(node))
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
            yield call, certain and not conditional


def _tensor_literals(arg: ast.AST, names: dict, loops: dict) -> list[dict] | None:
    """The dict(s) an add_input/add_output argument stands for: a literal, or the loop variable over a list."""
    if isinstance(arg, ast.Name) and arg.id in loops:
        source = loops[arg.id]
        source = names.get(source.id, source) if isinstance(source, ast.Name) else source
        value = _literal(source)
        return value if isinstance(value, list) and all(isinstance(v, dict) for v in value) else None
    if isinstance(arg, ast.Name) and arg.id in names:
        arg = names[arg.id]
    value = _literal(arg)
    return [value] if isinstance(value, dict) else None


def apply_python_auto_complete(config: mc.ModelConfig, found: PythonAutoComplete) -> list[str]:
    """Complete ``config`` as the backend would; the refusals triton_python_backend_utils raises, as problems."""
    problems = []
    if found.max_batch_size is not None:
        if config.max_batch_size > found.max_batch_size:
            problems.append(f"the config sets max_batch_size {config.max_batch_size}, but auto_complete_config "
                            f"sets {found.max_batch_size}; the server refuses a larger one")
        else:
            config.max_batch_size = found.max_batch_size
    if found.dynamic_batching:
        if config.HasField("sequence_batching"):
            problems.append("the config sets sequence_batching, but auto_complete_config sets dynamic batching")
        elif not config.HasField("dynamic_batching"):
            config.dynamic_batching.SetInParent()
    for kind, tensors, declared in (("input", found.inputs, config.input), ("output", found.outputs, config.output)):
        for tensor in tensors:
            problems.extend(_merge_tensor(kind, tensor, declared))
    return problems


def _merge_tensor(kind: str, tensor: dict, declared) -> list[str]:
    name, dtype, dims = tensor.get("name"), tensor.get("data_type"), tensor.get("dims")
    if name is None or dtype is None or dims is None:
        return [f"auto_complete_config adds an {kind} without name, data_type or dims"]
    if dtype not in mc.DataType.keys():
        return [f"auto_complete_config gives {kind} '{name}' the unknown data_type '{dtype}'"]
    existing = next((t for t in declared if t.name == name), None)
    if existing is None:
        existing = declared.add(name=name)
    elif not tensor.get("_certain", True):
        return []  # a guarded add: the model may leave the config's own declaration alone
    elif existing.data_type != mc.TYPE_INVALID and mc.DataType.Name(existing.data_type) != dtype:
        return [f"{kind} '{name}' is {mc.DataType.Name(existing.data_type)} in the config but auto_complete_config "
                f"says {dtype}"]
    elif existing.dims and list(existing.dims) != list(dims):
        return [f"{kind} '{name}' has dims {list(existing.dims)} in the config but auto_complete_config says "
                f"{list(dims)}"]
    existing.data_type = mc.DataType.Value(dtype)
    del existing.dims[:]
    existing.dims.extend(dims)
    return []
