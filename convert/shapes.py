"""Input shapes in trtexec's syntax: ``--shapes input:1x3x360x640`` for static models, ``--min-shapes``,
``--opt-shapes`` and ``--max-shapes`` for dynamic axes (``name:AxBxC,other:DxE``).

A model that says its own size fills the dynamic axes nobody gave: an Ultralytics export with dynamic height and
width carries ``imgsz`` (``[320, 320]``, or one number) in its metadata, the size it was trained and exported at.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass

from orinkit.convert.errors import ShapeSpecError

_ITEM = re.compile(r"^(?P<name>.+?):(?P<dims>\d+(?:x\d+)*)$")
Shape = tuple[int, ...]
# A dynamic batch axis with no shapes given is built for batches 1..8, tuned for 1 (trtexec tunes for 1 too);
# edge-repo's default max_batch_size for such a model is the same 8, so the plan and its config agree.
DEFAULT_MAX_BATCH = 8


def parse_shapes(text: str | None, *, flag: str = "--shapes") -> dict[str, Shape]:
    """``"input:1x3x360x640,mask:1x360x640"`` → ``{"input": (1, 3, 360, 640), ...}``."""
    if not text:
        return {}
    shapes: dict[str, Shape] = {}
    for item in text.split(","):
        match = _ITEM.match(item.strip())
        if not match:
            raise ShapeSpecError(
                f"{flag} item '{item.strip()}' is not NAME:DIMS",
                hint=f"write it as trtexec does, e.g. {flag} input:1x3x360x640 (positive sizes joined by x)",
            )
        name, dims = match["name"], tuple(int(d) for d in match["dims"].split("x"))
        if 0 in dims:
            raise ShapeSpecError(f"{flag} gives '{name}' a zero-sized axis {dims}", hint="use sizes of 1 or more")
        if name in shapes:
            raise ShapeSpecError(f"{flag} names '{name}' twice", hint="give each input once")
        shapes[name] = dims
    return shapes


@dataclass(frozen=True)
class InputProfile:
    """min/opt/max shapes of one input (equal for a static shape)."""

    min: Shape
    opt: Shape
    max: Shape
    batch_default: bool = False  # a dynamic batch axis given no shapes: 1..max_batch, opt 1
    max_batch_asked: bool = False  # ... whose max_batch came from --max-batch, not the default
    size_from: str = ""  # where dynamic axes other than the batch got their size, when no shape was given

    def describe(self, name: str) -> str:
        def text(shape: Shape) -> str:
            return "x".join(map(str, shape)) if shape else "scalar"

        source = f" ({self.size_from})" if self.size_from else ""
        if self.static:
            return f"{name} {text(self.opt)}{source}"
        line = f"{name} min {text(self.min)}, opt {text(self.opt)}, max {text(self.max)}{source}"
        if self.batch_default and self.max_batch_asked:
            line += f" (dynamic batch: 1..{self.max[0]}, as --max-batch {self.max[0]} asked)"
        elif self.batch_default:
            line += (f" (dynamic batch: 1..{self.max[0]} by default; --max-batch N or "
                     "--min-shapes/--opt-shapes/--max-shapes to choose)")
        return line

    @property
    def static(self) -> bool:
        return self.min == self.opt == self.max


@dataclass(frozen=True)
class SizeDefault:
    """Sizes for an input's dynamic axes that the model itself gives (-1 where it gives none), and from where."""

    shape: Shape
    source: str


def metadata_sizes(model, inputs: Mapping[str, Shape]) -> dict[str, SizeDefault]:
    """Ultralytics' ``imgsz`` metadata as the height and width of the model's one NCHW image input (nothing for
    a model without it, or with several inputs: which one it meant would be a guess)."""
    props = {p.key: p.value for p in model.metadata_props}
    text = props.get("imgsz")
    images = [name for name, shape in inputs.items() if len(shape) == 4]
    if text is None or len(inputs) != 1 or len(images) != 1:
        return {}
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return {}
    size = [value, value] if isinstance(value, int) else list(value) if isinstance(value, (list, tuple)) else []
    if len(size) != 2 or not all(isinstance(v, int) and v > 0 for v in size):
        return {}
    name = images[0]
    return {name: SizeDefault((-1, -1, size[0], size[1]),
                              f"height and width {size[0]}x{size[1]} from the model's Ultralytics imgsz metadata; "
                              f"--shapes {name}:1x{inputs[name][1] if inputs[name][1] > 0 else 3}xHxW to choose")}


def _fill(declared: Shape, default: SizeDefault | None) -> Shape:
    """``declared`` with its dynamic axes past the batch taken from ``default`` where it has them."""
    if default is None or len(default.shape) != len(declared):
        return declared
    return tuple(d if d != -1 or i == 0 or default.shape[i] <= 0 else default.shape[i]
                 for i, d in enumerate(declared))


def _fits(declared: Shape, shape: Shape) -> bool:
    return len(declared) == len(shape) and all(d in (-1, s) for d, s in zip(declared, shape))


def resolve_profiles(
    inputs: Mapping[str, Shape],
    *,
    shapes: Mapping[str, Shape] | None = None,
    min_shapes: Mapping[str, Shape] | None = None,
    opt_shapes: Mapping[str, Shape] | None = None,
    max_shapes: Mapping[str, Shape] | None = None,
    max_batch: int | None = None,
    defaults: Mapping[str, SizeDefault] | None = None,
) -> dict[str, InputProfile]:
    """One profile per model input (``inputs``: name → declared shape, -1 for dynamic axes).

    A fully static input needs nothing; one whose only dynamic axis is the first (the batch) gets batches
    1..``max_batch`` (default :data:`DEFAULT_MAX_BATCH`), tuned for 1; other dynamic axes need ``shapes`` or all
    three of min/opt/max, or sizes the model gives itself (``defaults``: :func:`metadata_sizes`)."""
    if max_batch is not None and max_batch < 1:
        raise ShapeSpecError(f"--max-batch {max_batch} is below 1", hint="use 1 or more")
    shapes, min_shapes = dict(shapes or {}), dict(min_shapes or {})
    opt_shapes, max_shapes = dict(opt_shapes or {}), dict(max_shapes or {})
    named = {**shapes, **min_shapes, **opt_shapes, **max_shapes}
    unknown = sorted(set(named) - set(inputs))
    if unknown:
        raise ShapeSpecError(
            f"shapes name {', '.join(unknown)}, which the model does not have as inputs",
            hint=f"its inputs are {', '.join(inputs)}",
        )
    for name in named:
        if name in shapes and (name in min_shapes or name in opt_shapes or name in max_shapes):
            raise ShapeSpecError(f"'{name}' has both --shapes and --min/opt/max-shapes",
                                 hint="use --shapes for a static shape, or the three for a range")
    profiles: dict[str, InputProfile] = {}
    for name, declared in inputs.items():
        if name in shapes:
            profile = InputProfile(shapes[name], shapes[name], shapes[name])
        elif name in min_shapes or name in opt_shapes or name in max_shapes:
            missing = [f for f, m in (("--min-shapes", min_shapes), ("--opt-shapes", opt_shapes),
                                      ("--max-shapes", max_shapes)) if name not in m]
            if missing:
                raise ShapeSpecError(f"'{name}' lacks {', '.join(missing)}",
                                     hint="give min, opt and max shapes together")
            profile = InputProfile(min_shapes[name], opt_shapes[name], max_shapes[name])
        elif -1 not in (filled := _fill(declared, (defaults or {}).get(name))):
            source = defaults[name].source if filled != declared else ""
            profile = InputProfile(filled, filled, filled, size_from=source)
        elif filled[0] == -1 and -1 not in filled[1:]:
            top = DEFAULT_MAX_BATCH if max_batch is None else max_batch
            source = defaults[name].source if filled != declared else ""
            profile = InputProfile((1, *filled[1:]), (1, *filled[1:]), (top, *filled[1:]), batch_default=True,
                                   max_batch_asked=max_batch is not None, size_from=source)
        else:
            letters = iter("HWDEFG")
            example = "x".join(str(d) if d > 0 else ("1" if i == 0 else next(letters, "N"))
                               for i, d in enumerate(declared))
            raise ShapeSpecError(
                f"input '{name}' has dynamic axes beyond the batch {list(declared)} and no shape was given",
                hint=f"pass the sizes you will serve, e.g. --shapes {name}:{example} with the letters replaced by "
                     "sizes, or --min-shapes/--opt-shapes/--max-shapes for a range",
            )
        for label, shape in (("min", profile.min), ("opt", profile.opt), ("max", profile.max)):
            if not _fits(declared, shape):
                raise ShapeSpecError(
                    f"{label} shape {list(shape)} of '{name}' does not fit its declared shape {list(declared)}",
                    hint="keep the rank and the fixed axes; only -1 axes may vary",
                )
        if not all(a <= b <= c for a, b, c in zip(profile.min, profile.opt, profile.max)):
            raise ShapeSpecError(
                f"'{name}' needs min <= opt <= max on every axis, got {list(profile.min)}, {list(profile.opt)}, "
                f"{list(profile.max)}", hint="reorder the shapes",
            )
        profiles[name] = profile
    if max_batch is not None and not any(p.batch_default for p in profiles.values()):
        raise ShapeSpecError("--max-batch applies to inputs whose batch axis is dynamic and given no shapes; this "
                             "model has none", hint="drop --max-batch, or set the batch in --max-shapes")
    return profiles
