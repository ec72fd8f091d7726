"""The lane architectures by name: what training, the benchmarks and weight cards call them.

``r18`` is LaneATT-R18 as published (reference checkpoints load into it); ``lite`` is the architecture chosen by
measurement to train on a 2-core CPU (see :mod:`orinkit.lanes.lite` and the README's trade-off table); the others
are the candidates that table compares.
"""

from __future__ import annotations

from orinkit.lanes.errors import LaneInputError

# name → (class, keyword arguments); "backbone" for LaneATT, the LaneATTLite knobs for the others.
ARCHITECTURES: dict[str, tuple[str, dict]] = {
    "r18": ("LaneATT", {"backbone": "resnet18"}),
    "lite": ("LaneATTLite", {"width": 16, "anchor_feat_channels": 32, "key_dim": 32, "value_dim": 64,
                             "attention": "cells"}),
    "lite-w24": ("LaneATTLite", {"width": 24, "anchor_feat_channels": 32, "key_dim": 32, "value_dim": 64,
                                 "attention": "cells"}),
    "lite-w32": ("LaneATTLite", {"width": 32, "anchor_feat_channels": 32, "key_dim": 32, "value_dim": 64,
                                 "attention": "cells"}),
    "lite-imnorm": ("LaneATTLite", {"width": 16, "anchor_feat_channels": 32, "key_dim": 32, "value_dim": 64,
                                    "attention": "cells", "input_norm": "image"}),
    "lite-anchors": ("LaneATTLite", {"width": 16, "anchor_feat_channels": 32, "key_dim": 32, "value_dim": 64,
                                     "attention": "anchors"}),
}


def make_lane_model(arch: str, anchors=None):
    """A freshly initialised (random) model of architecture ``arch``, in train mode."""
    if arch not in ARCHITECTURES:
        raise LaneInputError(f"unknown lane architecture {arch!r}",
                             hint=f"use one of {', '.join(ARCHITECTURES)}")
    kind, arguments = ARCHITECTURES[arch]
    if kind == "LaneATT":
        from orinkit.lanes.model import LaneATT

        return LaneATT(anchors=anchors, **arguments)
    from orinkit.lanes.lite import LaneATTLite

    return LaneATTLite(anchors, **arguments)
