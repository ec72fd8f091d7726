"""What a model takes and returns, read once from the server, and inputs checked against it before sending."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from orinkit.client.errors import InvalidInputError
from orinkit.formats.tensors import TensorSpec, dims_fit


@dataclass(frozen=True)
class ModelInfo:
    name: str
    version: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    max_batch_size: int
    decoupled: bool = False  # any number of responses per request: served only over a stream
    stateful: bool = False  # under a sequence batcher: called through a sequence
    # The type of the CONTROL_SEQUENCE_CORRID control input ("UINT64", "STRING", ...); None when it has none.
    correlation_type: str | None = None
    # The config's parameters (key -> string_value): what a model tells its clients, e.g. a detector's class names.
    parameters: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_config(cls, config: Mapping, version: str | None) -> ModelInfo:
        def tensors(entries) -> tuple[TensorSpec, ...]:
            result = []
            for entry in entries:
                kind = entry["data_type"].removeprefix("TYPE_")
                dims = tuple(int(d) for d in entry.get("dims", ()))
                if "reshape" in entry and not entry["reshape"].get("shape"):
                    dims = ()
                result.append(TensorSpec(entry["name"], "BYTES" if kind == "STRING" else kind, dims))
            return tuple(result)

        sequence = config.get("sequence_batching")
        return cls(config["name"], version or "", tensors(config.get("input", ())),
                   tensors(config.get("output", ())), int(config.get("max_batch_size", 0)),
                   decoupled=bool(config.get("model_transaction_policy", {}).get("decoupled", False)),
                   stateful=sequence is not None, correlation_type=_correlation_type(sequence or {}),
                   parameters={str(key): str(value.get("string_value", "")) for key, value
                               in (config.get("parameters") or {}).items()})

    def input(self, name: str) -> TensorSpec | None:
        return next((t for t in self.inputs if t.name == name), None)


def _correlation_type(sequence: Mapping) -> str | None:
    for entry in sequence.get("control_input", ()):
        for control in entry.get("control", ()):
            if control.get("kind") == "CONTROL_SEQUENCE_CORRID":
                return control.get("data_type", "TYPE_UINT64").removeprefix("TYPE_")
    return None


def _cast(array: np.ndarray, tensor: TensorSpec) -> np.ndarray:
    """``array`` in the tensor's dtype when no value can change on the way; InvalidInputError otherwise."""
    target = np.dtype(tensor.numpy_dtype)
    source = array.dtype
    if tensor.dtype == "BYTES":
        if source.kind in "SUO":
            return array.astype(np.object_) if source.kind != "O" else array
        raise InvalidInputError(f"input '{tensor.name}' takes BYTES, got {source}", expected="BYTES",
                                given=str(source), hint="pass bytes or str in an object array")
    if source == target:
        return array
    allowed = (
        (source.kind == "f" and target.kind == "f")  # float64 → FP32/FP16: precision, not meaning, changes
        or (source.kind in "iub" and target.kind == "f")
        or (source.kind == "b" and target.kind == "b")
        or (source.kind in "iu" and target.kind in "iu" and _fits(array, target))
    )
    if not allowed:
        raise InvalidInputError(
            f"input '{tensor.name}' takes {tensor.dtype} ({target}), got {source}, which would not cast "
            "safely", expected=tensor.dtype, given=str(source), hint=f"pass {target} data",
        )
    return array.astype(target)


def _fits(array: np.ndarray, target: np.dtype) -> bool:
    if array.size == 0:
        return True
    limits = np.iinfo(target)
    return bool(array.min() >= limits.min and array.max() <= limits.max)


FORMS = ("auto", "sample", "batch")
# Plans kept per client: a camera loop sends one shape; a caller that varies shapes stops adding here.
KNOWN_SIGNATURES = 64


def signature(arrays: Sequence, form: str) -> tuple | None:
    """What the checks in ``prepare_inputs`` depend on when nothing needs casting: the form and each positional
    array's dtype and shape. None where the checks must run in full (non-arrays, object arrays, which are sized
    by content, and non-contiguous arrays, which are copied)."""
    key = [form]
    for array in arrays:
        if type(array) is not np.ndarray or array.dtype.hasobject or not array.flags.c_contiguous:
            return None
        key.append(array.dtype)
        key.append(array.shape)
    return tuple(key)


def passed_unchanged(info: ModelInfo, arrays: Sequence, prepared: Mapping) -> bool:
    """Whether ``prepare_inputs`` sent every input as given (no cast, no copy, all of them positional): then the
    same dtypes and shapes pass the same checks, and a later call may skip them."""
    if len(arrays) != len(info.inputs):
        return False
    for tensor, array in zip(info.inputs, arrays):
        sent = prepared[tensor.name]
        if sent.dtype != array.dtype or sent.ctypes.data != array.ctypes.data:
            return False
    return True


def prepare_inputs(info: ModelInfo, arrays: Sequence, named: Mapping,
                   form: str = "auto") -> tuple[dict[str, np.ndarray], bool]:
    """Map positional (config order) and named inputs, cast and check them; True when a batch axis was added.

    ``form`` says what the arrays are for a model that batches: ``"sample"`` (one sample: the batch axis is
    added), ``"batch"`` (the leading axis is the batch) or ``"auto"`` (read from the shape, refused where both
    readings fit).

    A BYTES input also takes a bare bytes or str (one item: one sample where the per-sample dims are [1] or [-1],
    the batch axis added for a model that batches) and a list or tuple of them, kept item for item (trailing NUL
    bytes included). For dims [1] or [-1] a flat list of N items is a batch of N one-item samples for ``"batch"``,
    and for ``"auto"`` where nothing else fits (N > 1 with dims [1]).
    """
    if form not in FORMS:
        raise InvalidInputError(f"form '{form}' is not one of {', '.join(FORMS)}", hint="use infer_sample or "
                                "infer_batch")
    if form == "batch" and info.max_batch_size == 0:
        raise InvalidInputError(f"'{info.name}' does not batch (max_batch_size 0), so it takes no batch axis",
                                hint="send one request per sample with infer_sample")
    if len(arrays) > len(info.inputs):
        raise InvalidInputError(f"'{info.name}' takes {len(info.inputs)} inputs, got {len(arrays)} positional",
                                expected=len(info.inputs), given=len(arrays), hint="pass one array per input")
    values = {t.name: a for t, a in zip(info.inputs, arrays)}
    for name, array in named.items():
        if info.input(name) is None:
            raise InvalidInputError(f"'{info.name}' has no input '{name}'",
                                    hint=f"its inputs are {', '.join(t.name for t in info.inputs)}")
        if name in values:
            raise InvalidInputError(f"input '{name}' is given twice", hint="pass it positionally or by name")
        values[name] = array
    missing = [t.name for t in info.inputs if t.name not in values]
    if missing:
        raise InvalidInputError(f"'{info.name}' needs inputs {', '.join(missing)}", hint="pass every input")
    prepared, single = {}, None
    for tensor in info.inputs:
        value = values[tensor.name]
        text = tensor.dtype == "BYTES" and isinstance(value, (bytes, str, list, tuple))
        array = _cast(_text_array(tensor, value) if text else np.asarray(value), tensor)
        if info.max_batch_size > 0:
            if text and isinstance(value, (bytes, str)):
                is_single = _one_text_sample(tensor, value, form)
            elif text and form != "sample" and _texts_are_a_batch(tensor, array.shape, form):
                _check_batch(info, tensor, array.shape[0])
                array, is_single = array[:, None], False
            else:
                is_single = _is_single(info, tensor, array.shape, form)
            if is_single:
                array = array[None]
            if single is not None and single != is_single:
                raise InvalidInputError("some inputs have a batch axis and others do not",
                                        hint="give every input the same form, or call infer_sample / infer_batch")
            single = is_single
        elif not dims_fit(tensor.dims, array.shape):
            raise InvalidInputError(f"input '{tensor.name}' has shape {list(array.shape)}, the model takes "
                                    f"{list(tensor.dims)}", expected=list(tensor.dims), given=list(array.shape),
                                    hint="reshape the array")
        prepared[tensor.name] = np.ascontiguousarray(array)
    if info.max_batch_size > 0:
        batches = {a.shape[0] for a in prepared.values()}
        if len(batches) > 1:
            raise InvalidInputError(f"inputs have different batch sizes {sorted(batches)}",
                                    hint="give every input the same batch size")
    return prepared, bool(single)


# Per-sample dims of a BYTES input that takes one item per sample (an encoded image, a line of text), or any
# number of them: a bare bytes or str is one sample there.
ONE_ITEM_DIMS = ((1,), (-1,))


def _text_array(tensor: TensorSpec, value) -> np.ndarray:
    """A bytes or str (one item), or a list or tuple of them, as an object array of exactly those items.

    np.asarray would make a fixed-width bytes array, which drops an item's trailing NUL bytes (a binary payload
    may end in them) and reads one bytes object as a 0-d array that fits no per-sample shape."""
    if isinstance(value, (bytes, str)):
        if tensor.dims in ONE_ITEM_DIMS:
            array = np.empty(1, dtype=np.object_)
            array[0] = value
            return array
        if tensor.dims == ():
            return np.array(value, dtype=np.object_)
        raise InvalidInputError(
            f"input '{tensor.name}' takes {list(tensor.dims)} BYTES items per sample, got one {type(value).__name__} "
            "object", expected=list(tensor.dims), given=type(value).__name__,
            hint=f"pass an object array of that shape: np.array(items, dtype=object).reshape({list(tensor.dims)})")
    try:
        array = np.array(value, dtype=np.object_)
    except ValueError:
        array = None
    if array is None or not all(isinstance(item, (bytes, str)) for item in array.flat):
        raise InvalidInputError(f"input '{tensor.name}' takes BYTES, and the {type(value).__name__} given holds "
                                "items that are not bytes or str (or rows of different lengths)", expected="BYTES",
                                hint="pass bytes or str items, in a list or an object array")
    return array


def _one_text_sample(tensor: TensorSpec, value, form: str) -> bool:
    """A bare bytes or str given to a batching model: one sample, the batch axis added."""
    if form == "batch":
        raise InvalidInputError(
            f"input '{tensor.name}' got one {type(value).__name__} object, which is one sample, not a batch",
            expected=[-1, *tensor.dims], given=type(value).__name__,
            hint="pass a list of them for a batch ([data] for a batch of one), or call infer_sample(data)")
    return True


def _texts_are_a_batch(tensor: TensorSpec, shape: tuple[int, ...], form: str) -> bool:
    """Whether a list of N bytes or str for a one-item-per-sample BYTES input is N samples of one item each.

    ``infer_batch`` always reads it so; a plain call where no other reading fits: N > 1 items for dims [1]. One
    item for dims [1] is one sample (as an object array of shape [1] is), and N items for dims [-1] may be one
    sample of N items: that call is refused as ambiguous."""
    if len(shape) != 1 or tensor.dims not in ONE_ITEM_DIMS:
        return False
    return form == "batch" or (tensor.dims == (1,) and shape[0] > 1)


def _is_single(info: ModelInfo, tensor: TensorSpec, shape: tuple[int, ...], form: str) -> bool:
    """Whether ``shape`` is one sample of ``tensor`` (True) or a batch of them (False), for a batching model."""
    as_sample = dims_fit(tensor.dims, shape)
    as_batch = len(shape) == len(tensor.dims) + 1 and dims_fit(tensor.dims, shape[1:])
    per_sample = f"{list(tensor.dims)} per sample"
    if form == "sample":
        if not as_sample:
            raise InvalidInputError(f"input '{tensor.name}' has shape {list(shape)}, the model takes {per_sample}",
                                    expected=list(tensor.dims), given=list(shape), hint="reshape the array")
        return True
    if form == "batch":
        if not as_batch:
            raise InvalidInputError(f"input '{tensor.name}' has shape {list(shape)}, a batch of {per_sample} is "
                                    f"{[-1, *tensor.dims]}", expected=[-1, *tensor.dims], given=list(shape),
                                    hint="add the batch axis (array[None] for one sample), or call infer_sample")
        _check_batch(info, tensor, shape[0])
        return False
    # A leading dynamic dim makes the first axis readable as that dim or as a batch axis (the ONNX model's dims
    # include the batch, Triton's do not): the shape alone cannot say which the caller meant.
    if as_sample and tensor.dims and tensor.dims[0] == -1:
        raise InvalidInputError(
            f"input '{tensor.name}' of shape {list(shape)} is ambiguous: the model takes {per_sample} "
            f"({list(tensor.dims)} without the batch axis), so its first axis may be a batch or the sample's "
            f"own dynamic axis", expected=list(tensor.dims), given=list(shape),
            hint="call client.infer_sample(...) for one sample or client.infer_batch(...) for a batch")
    if as_sample:
        return True
    if as_batch:
        _check_batch(info, tensor, shape[0])
        return False
    raise InvalidInputError(
        f"input '{tensor.name}' has shape {list(shape)}, the model takes {per_sample} (optionally with a batch "
        f"axis of up to {info.max_batch_size})", expected=[-1, *tensor.dims], given=list(shape),
        hint="reshape the array")


def _check_batch(info: ModelInfo, tensor: TensorSpec, size: int) -> None:
    if size > info.max_batch_size or size < 1:
        raise InvalidInputError(
            f"input '{tensor.name}' has a batch of {size}, the model takes 1 to {info.max_batch_size}",
            expected=info.max_batch_size, given=size, hint="split the batch (map() does that for a stream of samples)")
