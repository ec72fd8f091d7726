"""The lane task kit (``orinkit.core.kits``): how video, the page and the gates learn the lane_detection ensemble.

A served model is a lane model when it answers ``lanes`` (points, [K, P, 2]), ``scores`` and ``count``, as
orinkit's lane ensemble does (``orinkit.lanes.repository``).
"""

from __future__ import annotations

from orinkit.core.kits import KitError, TaskKit

LANE_OUTPUTS = frozenset({"lanes", "scores", "count"})


class LaneKit(TaskKit):
    name = "lanes"
    metric = "orinkit.lanes.metrics:lane_agreement"

    def recognizes(self, info) -> bool:
        return LANE_OUTPUTS <= {t.name for t in info.outputs}

    def describe(self, info) -> str:
        return "lane detector"

    def adapter(self, info, **options):
        from orinkit.lanes.video import LaneAdapter

        unknown = set(options) - {"frame_format", "jpeg_quality"}
        if "track" in unknown:
            raise KitError(f"--track/--no-track applies to detectors, and '{info.name}' is a lane model",
                           hint="leave --track/--no-track out for a lane model")
        if unknown:
            raise KitError(f"{', '.join(sorted(unknown))} does not apply to a lane model",
                           hint="leave it out for lane_detection (tracking is for detectors)")
        return LaneAdapter(**options)


KIT = LaneKit()
