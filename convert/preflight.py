"""Every option that names a part of the model, checked right after the model is loaded: a typo in an output or
node name, or ``--data`` that does not fit, is refused in a second instead of after onnxsim and the gate, and the
error names the closest real name."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from orinkit.convert.errors import ConvertError, MetricError, ShapeSpecError
from orinkit.convert.onnx_prep import declared_inputs, name_nodes
from orinkit.convert.samples import data_samples, input_dtypes, picture_preprocess
from orinkit.convert.shapes import InputProfile
from orinkit.core.optional import require

# The names name_nodes gives to the nodes of the simplified model (onnxsim's new nodes have none): a --keep-fp32
# taken from an earlier report may name one that the model as loaded does not have yet.
_GIVEN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*_\d+")
# --metric NAME[:ARGUMENT]@OUTPUT (topk:5@logits, mask@prob, ...) names an output (task_metrics' syntax).
_METRIC_OUTPUT = re.compile(r"[a-z]+(?::[^@]*)?@(.+)")


def closest(name: str, names: Iterable[str]) -> str:
    """The one of ``names`` most like ``name``, for a 'did you mean' hint."""
    names = list(names)
    found = difflib.get_close_matches(name, names, n=1, cutoff=0.0)
    return found[0] if found else ""


def check_options(model, options, profiles_for: Callable[[dict], dict[str, InputProfile]]) -> None:
    """Refuse ``options`` (:class:`~orinkit.convert.pipeline.ConvertOptions`) that do not fit the loaded ``model``."""
    if options.detector is not None:  # first: the head and names it writes are what the checks below read
        from orinkit.convert import detection

        detection.mark(model, options.detector)
    inputs = declared_inputs(model)
    profiles = profiles_for(inputs)
    unknown = sorted(set(options.input_ranges) - set(inputs))
    if unknown:
        raise ShapeSpecError(f"--input-range names {', '.join(unknown)}, which the model does not have as inputs",
                             hint=f"did you mean {closest(unknown[0], inputs)}? Its inputs are {', '.join(inputs)}")
    outputs = [o.name for o in model.graph.output]
    match = _METRIC_OUTPUT.fullmatch(options.metric or "")
    if match and match[1] not in outputs:
        raise MetricError(f"--metric {options.metric} names output '{match[1]}', which the model does not have",
                          hint=f"did you mean {closest(match[1], outputs)}? Its outputs are {', '.join(outputs)}")
    if options.keep_fp32 and not options.replay:  # a replay's names come from the simplified model's own report
        _check_nodes(model, options.keep_fp32, simplified=options.simplify)
    if options.data is not None or options.int8:
        from orinkit.convert import detection

        dtypes = input_dtypes(model)
        shaped = {name: (dtypes[name], profiles[name].opt) for name in inputs}
        pictures = options.data is not None and Path(options.data).is_dir()
        head = detection.recognize(model) if pictures or options.int8 else None
        held_out = data_samples(options.data, shaped, head) if options.data is not None else None
        if options.int8:  # too few samples, the wrong shape, or shared with --data: refused before onnxsim
            from orinkit.convert.int8.calibration import load_calibration

            load_calibration(options.calib, shaped, held_out=held_out,
                             preprocess=picture_preprocess(options.calib_preprocess, head))


def _check_nodes(model, wanted: Iterable[str], *, simplified: bool) -> None:
    named = require("onnx").ModelProto()
    named.CopyFrom(model)
    name_nodes(named)
    names = [node.name for node in named.graph.node]
    known = set(names)
    # Simplified, the model gets new nodes named like Gemm_3: such a name is judged once they exist (by the gate).
    unknown = [n for n in wanted if n not in known and not (simplified and _GIVEN_NAME.fullmatch(n))]
    if unknown:
        raise ConvertError(f"--keep-fp32 names {', '.join(unknown)}, which the model has no node called",
                           hint=f"did you mean {closest(unknown[0], names)}? The names are those of the report's "
                                "keep_fp32 list, or of the ONNX graph's nodes")
