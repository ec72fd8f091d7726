"""The stale-engine guard: does a plan match this device and TensorRT, and rebuild it from the ONNX if not."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from orinkit.convert.errors import StaleEngineError
from orinkit.convert.facts import DeviceFacts, current_facts
from orinkit.core.errors import MissingExtraError
from orinkit.core.files import file_sha256
from orinkit.core.optional import INSTALL_HINTS
from orinkit.formats.manifest import read_manifest


@dataclass(frozen=True)
class EngineVerdict:
    plan: Path
    matches: bool
    reasons: tuple[str, ...]  # why it does not match; empty when it does

    def describe(self) -> str:
        if self.matches:
            return f"{self.plan} matches this device and TensorRT"
        return f"{self.plan} is stale: " + "; ".join(self.reasons)


def verify_engine(
    plan: str | os.PathLike[str],
    *,
    onnx: str | os.PathLike[str] | None = None,
    facts: DeviceFacts | None = None,
) -> EngineVerdict:
    """Compare the plan's manifest with this machine's facts (and the ONNX it was built from, when given)."""
    plan = Path(plan)
    built = read_manifest(plan).build
    facts = facts or current_facts()
    if facts.tensorrt_version is None:
        raise MissingExtraError("tensorrt", hint="verify plans on the device: " + INSTALL_HINTS["tensorrt"])
    reasons = []
    checks = (
        ("TensorRT", built.get("tensorrt_version"), facts.tensorrt_version),
        ("GPU", built.get("gpu_name"), facts.gpu_name),
        ("compute capability", built.get("compute_capability"), facts.compute_capability),
        ("L4T", built.get("l4t"), facts.l4t),
    )
    for what, then, now in checks:
        if then != now:
            reasons.append(f"built for {what} {then or 'unknown'}, this machine has {now or 'none'}")
    if onnx is not None:
        digest = file_sha256(Path(onnx))
        if built.get("onnx_sha256") != digest:
            reasons.append(f"built from another ONNX (sha256 {str(built.get('onnx_sha256'))[:12]}…, "
                           f"{Path(onnx).name} is {digest[:12]}…)")
    return EngineVerdict(plan, not reasons, tuple(reasons))


def ensure_engine(
    plan: str | os.PathLike[str],
    onnx: str | os.PathLike[str] | None,
    *,
    facts: DeviceFacts | None = None,
    progress=lambda message: None,
) -> tuple[EngineVerdict, bool]:
    """Verify ``plan``; rebuild it from ``onnx`` with the settings its manifest records when it is stale.
    Returns the verdict before any rebuild and whether a rebuild happened."""
    plan = Path(plan)
    verdict = verify_engine(plan, onnx=onnx, facts=facts)
    if verdict.matches:
        return verdict, False
    if onnx is None:
        raise StaleEngineError(verdict.describe(), hint="pass --onnx with the model it was built from to rebuild it")
    progress(verdict.describe() + "; rebuilding it from " + str(onnx))
    rebuild_plan(plan, Path(onnx), progress=progress)
    return verdict, True


def replayed_options(manifest):
    """The :class:`ConvertOptions` that rebuild a plan as its manifest records it: the same profiles, FP32
    nodes (judged as they are, never searched again), criterion, metric, samples, workspace and DLA core."""
    from orinkit.convert.fp16.criteria import Criterion
    from orinkit.convert.pipeline import ConvertOptions

    profile = manifest.profiles[0] if manifest.profiles else {}
    recorded = manifest.build.get("options", {})
    data = recorded.get("data")
    return ConvertOptions(
        min_shapes={n: p.min for n, p in profile.items()},
        opt_shapes={n: p.opt for n, p in profile.items()},
        max_shapes={n: p.max for n, p in profile.items()},
        fp16=manifest.precision == "fp16" or (manifest.precision == "int8" and recorded.get("fp16", True)),
        **_replayed_int8(manifest, recorded),
        **_replayed_nms(manifest),
        criterion=Criterion.from_dict(recorded.get("criterion", {})),
        metric=recorded.get("metric"),
        min_agreement=recorded.get("min_agreement"),
        keep_fp32=tuple(manifest.build.get("keep_fp32", ())),
        replay=True,
        samples=recorded.get("samples", 8),
        seed=recorded.get("seed", 0),
        input_ranges={k: tuple(v) for k, v in recorded.get("input_ranges", {}).items()},
        data=Path(data) if data and Path(data).is_file() else None,
        simplify=recorded.get("simplify", True),
        engine=True,
        workspace=recorded.get("workspace_requested"),
        dla_core=manifest.build.get("dla_core"),
        timing_cache=Path(recorded["timing_cache"]) if recorded.get("timing_cache") else None,
    )


def _replayed_int8(manifest, recorded: dict) -> dict:
    """INT8 as recorded: the same calibration set (its sha256 is checked when it is loaded), method and excluded
    nodes, judged as they are."""
    int8 = manifest.build.get("int8")
    if manifest.precision != "int8" or not int8:
        return {}
    calib = recorded.get("calib")
    return {"int8": True, "calib": Path(calib) if calib else None, "calib_method": int8.get("method"),
            "calib_preprocess": recorded.get("calib_preprocess"), "int8_exclude": tuple(int8.get("excluded", ())),
            "calib_sha256": int8.get("calibration_sha256"), "int8_min_share": int8.get("min_share")}


def _replayed_nms(manifest) -> dict:
    """NMS in the engine as recorded: the rebuilt plan answers the same boxes (the way, plugin or INMSLayer, is
    chosen anew for this TensorRT)."""
    nms = manifest.nms
    if nms is None:
        return {}
    return {"nms": True, "nms_conf": nms.score_threshold, "nms_iou": nms.iou_threshold,
            "nms_max_det": nms.max_output_boxes, "nms_agnostic": nms.class_agnostic}


def rebuild_plan(plan: Path, onnx: Path, *, progress=lambda message: None) -> None:
    """Build ``onnx`` again with the recorded profiles, precision and FP32 nodes, and swap the plan in."""
    import shutil
    import tempfile

    from orinkit.convert.pipeline import PLAN, convert_onnx

    manifest = read_manifest(plan)
    options = replayed_options(manifest)
    progress("replaying the recorded build: " + ", ".join(
        f"{k}={v}" for k, v in (("precision", manifest.precision), ("kept FP32 nodes", len(options.keep_fp32)),
                                ("criterion", options.criterion.kind), ("metric", options.metric),
                                ("workspace", options.workspace or "auto"), ("DLA core", options.dla_core),
                                ("NMS in the engine", manifest.nms.method if manifest.nms else "no"))))
    with tempfile.TemporaryDirectory(prefix=".rebuild-", dir=plan.parent) as work:
        result = convert_onnx(onnx, Path(work) / "out", options, progress=progress)
        fresh = result.output / PLAN
        os.replace(fresh, plan)
        os.replace(str(fresh) + ".manifest.json", str(plan) + ".manifest.json")
        shutil.rmtree(result.output, ignore_errors=True)
