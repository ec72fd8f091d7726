"""trtexec-style shape strings and the profiles resolved from them."""

from __future__ import annotations

import pytest

from orinkit.convert.errors import ShapeSpecError
from orinkit.convert.samples import parse_ranges
from orinkit.convert.shapes import InputProfile, parse_shapes, resolve_profiles

DYNAMIC = {"input": (-1, 3, 360, 640)}


def test_parse_trtexec_syntax():
    assert parse_shapes("input:1x3x360x640,mask:1x360x640") == {"input": (1, 3, 360, 640), "mask": (1, 360, 640)}
    assert parse_shapes("") == {}
    assert parse_shapes("a/b:0:2x4") == {"a/b:0": (2, 4)}


@pytest.mark.parametrize("text, message", [
    ("input=1x3", "is not NAME:DIMS"),
    ("input:1x3x", "is not NAME:DIMS"),
    ("input:1,3", "is not NAME:DIMS"),
    ("input:0x3", "zero-sized axis"),
    ("input:1x3,input:2x3", "names 'input' twice"),
])
def test_malformed_shape_strings(text, message):
    with pytest.raises(ShapeSpecError, match=message) as info:
        parse_shapes(text)
    assert info.value.exit_code == 4 and info.value.hint


def test_static_and_dynamic_profiles():
    static = resolve_profiles({"x": (1, 4)})
    assert static == {"x": InputProfile((1, 4), (1, 4), (1, 4))} and static["x"].static
    assert resolve_profiles(DYNAMIC, shapes={"input": (2, 3, 360, 640)})["input"].opt == (2, 3, 360, 640)
    ranged = resolve_profiles(DYNAMIC, min_shapes={"input": (1, 3, 360, 640)}, opt_shapes={"input": (4, 3, 360, 640)},
                              max_shapes={"input": (8, 3, 360, 640)})
    assert ranged["input"] == InputProfile((1, 3, 360, 640), (4, 3, 360, 640), (8, 3, 360, 640))


@pytest.mark.parametrize("kwargs, message", [
    ({"shapes": {"image": (1, 3, 360, 640)}}, "name image, which the model does not have"),
    ({"shapes": {"input": (1, 3, 640, 360)}}, "does not fit its declared shape"),
    ({"shapes": {"input": (1, 3, 360)}}, "does not fit its declared shape"),
    ({"min_shapes": {"input": (1, 3, 360, 640)}}, "lacks --opt-shapes, --max-shapes"),
    ({"min_shapes": {"input": (8, 3, 360, 640)}, "opt_shapes": {"input": (4, 3, 360, 640)},
      "max_shapes": {"input": (8, 3, 360, 640)}}, "min <= opt <= max"),
    ({"shapes": {"input": (1, 3, 360, 640)}, "max_shapes": {"input": (1, 3, 360, 640)}}, "both --shapes and"),
])
def test_profiles_that_cannot_work(kwargs, message):
    with pytest.raises(ShapeSpecError, match=message):
        resolve_profiles(DYNAMIC, **kwargs)


def test_a_dynamic_batch_alone_defaults_to_1_to_8_tuned_for_1():
    profile = resolve_profiles(DYNAMIC)["input"]
    assert (profile.min, profile.opt, profile.max) == ((1, 3, 360, 640), (1, 3, 360, 640), (8, 3, 360, 640))
    assert profile.batch_default and "1..8 by default" in profile.describe("input")
    assert resolve_profiles(DYNAMIC, max_batch=2)["input"].max == (2, 3, 360, 640)
    given = resolve_profiles(DYNAMIC, shapes={"input": (2, 3, 360, 640)})["input"]
    assert not given.batch_default and given.describe("input") == "input 2x3x360x640"
    with pytest.raises(ShapeSpecError, match="--max-batch 0 is below 1"):
        resolve_profiles(DYNAMIC, max_batch=0)


def test_dynamic_axes_beyond_the_batch_need_shapes_and_the_hint_shows_letters():
    with pytest.raises(ShapeSpecError, match="dynamic axes beyond the batch") as info:
        resolve_profiles({"input": (-1, 3, -1, -1)})
    assert "--shapes input:1x3xHxW" in str(info.value)


def test_input_ranges():
    assert parse_ranges("input:0,1;mask:-1,1") == {"input": (0.0, 1.0), "mask": (-1.0, 1.0)}
    with pytest.raises(ShapeSpecError, match="LOW <= HIGH"):
        parse_ranges("input:1,0")
