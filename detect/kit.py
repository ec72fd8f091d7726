"""The detection task kit (``orinkit.core.kits``): how video, the page and the gates learn a detector.

A served model is a detector when it is orinkit's detection ensemble (outputs ``boxes``, ``scores``, ``classes``,
``count``: ``edge-repo add-detector``), or a raw head orinkit recognizes from the served signature
(:func:`orinkit.detect.video.head_from_info`). Class names come from the config's ``names`` parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orinkit.core.kits import TaskKit

ENSEMBLE_OUTPUTS = frozenset({"boxes", "scores", "classes", "count"})


def is_ensemble(info) -> bool:
    return ENSEMBLE_OUTPUTS <= {t.name for t in info.outputs}


class DetectionKit(TaskKit):
    name = "detect"
    metric = "boxes"  # edge-convert --metric boxes: orinkit.detect.gate_metric, bound to the model

    def recognizes(self, info) -> bool:
        if is_ensemble(info):
            return True
        from orinkit.detect.video import head_from_info

        return head_from_info(info) is not None

    def names(self, info) -> tuple[str, ...]:
        from orinkit.detect.client import names_of

        return names_of(getattr(info, "parameters", {}) or {})

    def describe(self, info) -> str:
        names = self.names(info)
        if not names and not is_ensemble(info):
            from orinkit.detect.video import head_from_info

            head = head_from_info(info)
            names = head.names if head is not None else ()
        return f"detector, {len(names)} classes" if names else "detector"

    def adapter(self, info, **options):
        from orinkit.detect.video import DetectionAdapter

        return DetectionAdapter.for_model(info, **options)

    def tryout(self, info, outputs: Mapping[str, Any], image_size: tuple[int, int]) -> dict | None:
        """The detections of one uploaded image (boxes in its pixels): ``{"kind": "detections", "detections":
        [{"box", "score", "class_id", "class"}...], "names": [...], "image_size": [width, height]}``."""
        if not ENSEMBLE_OUTPUTS <= set(outputs):
            return None
        from orinkit.detect.client import detections_from

        names = self.names(info)
        found = detections_from(outputs, names)[0]
        return {"kind": "detections", "detections": found.to_records(), "names": list(names),
                "image_size": [int(image_size[0]), int(image_size[1])]}


KIT = DetectionKit()
