"""The tracker: cost per frame at 50 objects, and identities kept on drawn scenes, against supervision's ByteTrack.

    python benchmarks/track.py [--frames 500] [--objects 50] [--scenes 8] [--scene-frames 60] [--size 640x480]

a. cost per frame: orinkit.detect.track.Tracker.update on a synthetic 1280x720 video of ``--objects`` boxes
   (20-80 px) moving at constant speeds with a little curvature, detector-like noise (jittered edges and scores,
   5 % missed, a stray box now and then; orinkit.detect.track_metrics.detector_like), ``--frames`` frames at
   30 fps: median and p95 milliseconds per update, wall and the thread's CPU time (goal: <= 1 ms at 50
   objects). supervision's
   ``ByteTrack.update_with_detections`` on the same detections, when it imports.
b. identities on drawn scenes (orinkit.detect.scenes.moving_scene: 2-6 objects on crossing paths, ``--scenes``
   seeds, 640x480 at 30 fps by default), the true boxes made detector-like as above, fed to both trackers with the same
   settings (high 0.5, new track 0.6, IoU 0.2, lost 1 s = 30 frames, 2 hits to confirm): id switches,
   fragmentations, MOTA and IDF1 (orinkit.detect.track_metrics.id_switches, IoU 0.5), with every frame and with
   latest-wins drops (every 2nd frame gone, or 2 in 3; the kept frames keep their timestamps; counted on the kept
   frames). ``--size 320x240`` is the tests' scale (objects larger for the view, faster in pixels per frame).

supervision removed ByteTrack in 0.31; ``pip install "supervision<0.31"`` (0.30.x) has it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

import numpy as np

from orinkit.detect.detections import Detections
from orinkit.detect.scenes import CLASSES, moving_scene
from orinkit.detect.track import Tracker, TrackerOptions, linear_sum_assignment
from orinkit.detect.track_metrics import detector_like, id_switches

OPTIONS = TrackerOptions()  # high 0.5, low 0.1, new_track 0.6, match_iou 0.2, lost_s 1.0, confirm_hits 2
FPS = 30.0


def synthetic(frames: int, objects: int, seed: int = 0, width: int = 1280, height: int = 720) -> list[Detections]:
    """True boxes of ``objects`` objects moving across a ``width`` x ``height`` view (wrapping at the edges, so
    the count stays constant), with ids."""
    rng = np.random.default_rng(seed)
    size = rng.uniform(20, 80, (objects, 2))
    start = rng.uniform(0, 1, (objects, 2)) * (width, height)
    velocity = rng.normal(0, 60, (objects, 2))  # px per second
    turn = rng.normal(0, 0.3, objects)  # radians per second
    classes = rng.integers(0, len(CLASSES), objects)
    truth, centre = [], start.copy()
    for _ in range(frames):
        centre = (centre + velocity / FPS) % (width, height)
        angle = turn / FPS
        cos, sin = np.cos(angle), np.sin(angle)
        velocity = np.stack([cos * velocity[:, 0] - sin * velocity[:, 1], sin * velocity[:, 0] + cos * velocity[:, 1]],
                            axis=1)
        xyxy = np.concatenate([centre - size / 2, centre + size / 2], axis=1)
        truth.append(Detections(xyxy, np.ones(objects), classes, CLASSES, np.arange(objects)))
    return truth


def supervision_tracker():
    """supervision's ByteTrack set like OPTIONS, or None when it does not import."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import supervision as sv

            tracker = sv.ByteTrack(track_activation_threshold=OPTIONS.high, lost_track_buffer=int(OPTIONS.lost_s * FPS),
                                   minimum_matching_threshold=1 - OPTIONS.match_iou, frame_rate=FPS,
                                   minimum_consecutive_frames=OPTIONS.confirm_hits)
    except (ImportError, AttributeError):
        return None

    def update(detections: Detections, _timestamp: float) -> Detections:
        out = tracker.update_with_detections(sv.Detections(xyxy=detections.xyxy.astype(np.float32),
                                                           confidence=detections.score,
                                                           class_id=detections.class_id))
        ids = np.asarray(out.tracker_id if out.tracker_id is not None else [], np.int64).reshape(-1)
        return Detections(out.xyxy, out.confidence, out.class_id, detections.names, ids)

    return update


def orinkit_tracker():
    return Tracker(OPTIONS).update


def timed(update, detections: list[Detections]) -> tuple[float, float, float, float]:
    """Median and p95 ms per update of wall time and of this thread's CPU time (which a busy machine's other
    processes do not inflate, so it stands for an idle one better than the wall time)."""
    wall, cpu = [], []
    for index, frame in enumerate(detections):
        started, started_cpu = time.perf_counter(), time.thread_time()
        update(frame, index / FPS)
        cpu.append((time.thread_time() - started_cpu) * 1000)
        wall.append((time.perf_counter() - started) * 1000)
    wall, cpu = wall[10:], cpu[10:]  # the first frames build the tracks
    return (statistics.median(wall), float(np.percentile(wall, 95)), statistics.median(cpu),
            float(np.percentile(cpu, 95)))


def section_cost(frames: int, objects: int) -> None:
    print(f"a. cost per frame, {objects} objects, {frames} frames (ms per update)")
    detections = detector_like(synthetic(frames, objects), seed=1)
    rows = [("orinkit Tracker", orinkit_tracker())]
    theirs = supervision_tracker()
    rows.append(("supervision ByteTrack", theirs))
    for name, make in rows:
        if make is None:
            print(f"   {name:22s} supervision not installed: pip install 'supervision<0.31' (0.31 removed ByteTrack)")
            continue
        median, p95, cpu_median, cpu_p95 = timed(make, detections)
        print(f"   {name:22s} wall: median {median:7.3f} p95 {p95:7.3f}   CPU: median {cpu_median:7.3f} "
              f"p95 {cpu_p95:7.3f}")
    print(f"   assignment: {'scipy linear_sum_assignment' if linear_sum_assignment else 'greedy (no scipy)'}")


def section_scenes(scenes: int, frames: int, width: int, height: int) -> None:
    print(f"b. identities on {scenes} drawn scenes ({frames} frames, {width}x{height}, {FPS:g} fps; "
          "detector-like noise)")
    clips = []
    for seed in range(scenes):
        scene = moving_scene(seed, frames=frames, width=width, height=height)
        clips.append((scene, detector_like(scene.truth, seed=seed)))
    crossings = sum(len(scene.crossings) for scene, _ in clips)
    objects = sum(len(scene.classes) for scene, _ in clips)
    print(f"   {objects} objects, {crossings} crossings in all")
    makers = [("orinkit Tracker", orinkit_tracker), ("supervision ByteTrack", supervision_tracker)]
    print(f"   {'tracker':22s} {'frames':14s} {'switches':>8s} {'frags':>6s} {'MOTA':>6s} {'IDF1':>6s} {'ids':>9s}")
    for name, make in makers:
        if make() is None:
            print(f"   {name:22s} supervision not installed: pip install 'supervision<0.31' (0.31 removed ByteTrack)")
            continue
        for label, step in (("every frame", 1), ("every 2nd gone", 2), ("2 in 3 gone", 3)):
            totals = dict(switches=0, fragmentations=0, objects=0, missed=0, false_positives=0, true_ids=0,
                          track_ids=0)
            idf1 = []
            for scene, detections in clips:
                kept = range(0, frames, step)
                update = make()
                tracked = [update(detections[i], float(scene.times[i])) for i in kept]
                score = id_switches([scene.truth[i] for i in kept], tracked)
                for key in totals:
                    totals[key] += getattr(score, key)
                idf1.append(score.idf1)
            mota = 1 - (totals["missed"] + totals["false_positives"] + totals["switches"]) / totals["objects"]
            print(f"   {name:22s} {label:14s} {totals['switches']:8d} {totals['fragmentations']:6d} {mota:6.3f} "
                  f"{statistics.mean(idf1):6.3f} {totals['track_ids']:4d}/{totals['true_ids']:<4d}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--objects", type=int, default=50)
    parser.add_argument("--scenes", type=int, default=8)
    parser.add_argument("--scene-frames", type=int, default=60)
    parser.add_argument("--size", default="640x480", help="width x height of the drawn scenes")
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}")
    section_cost(args.frames, args.objects)
    width, height = (int(v) for v in args.size.lower().split("x"))
    section_scenes(args.scenes, args.scene_frames, width, height)
    return 0


if __name__ == "__main__":
    sys.exit(main())
