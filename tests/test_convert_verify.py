"""The stale-engine guard: a plan's manifest against this machine's facts."""

from __future__ import annotations

import json

import pytest
from repo_fixtures import stand_in_plan

from orinkit.convert.errors import StaleEngineError
from orinkit.convert.facts import DeviceFacts, current_facts
from orinkit.convert.verify import ensure_engine, verify_engine
from orinkit.core.files import file_sha256
from orinkit.formats.manifest import manifest_path, read_manifest
from orinkit.jetson.release import jetpack_for, parse_nv_tegra_release

ORIN = DeviceFacts("10.3.0.30", "Orin", "8.7", "36.4.3", "6.2")


@pytest.fixture
def plan(tmp_path):
    plan = stand_in_plan(tmp_path)
    model = tmp_path / "lane.onnx"
    model.write_bytes(b"stand-in ONNX bytes")
    data = json.loads(manifest_path(plan).read_text())
    data["build"] = {**ORIN.as_dict(), "onnx_sha256": file_sha256(model)}
    manifest_path(plan).write_text(json.dumps(data))
    return plan


def test_a_plan_built_here_matches(plan):
    verdict = verify_engine(plan, onnx=plan.with_suffix(".onnx"), facts=ORIN)
    assert verdict.matches and verdict.reasons == ()
    assert ensure_engine(plan, None, facts=ORIN) == (verdict, False)


@pytest.mark.parametrize("field, value, reason", [
    ("tensorrt_version", "8.6.2", "built for TensorRT 10.3.0.30, this machine has 8.6.2"),
    ("gpu_name", "NVIDIA H100", "built for GPU Orin, this machine has NVIDIA H100"),
    ("compute_capability", "9.0", "built for compute capability 8.7, this machine has 9.0"),
    ("l4t", "35.4.1", "built for L4T 36.4.3, this machine has 35.4.1"),
])
def test_each_difference_is_named(plan, field, value, reason):
    facts = DeviceFacts(**{**ORIN.as_dict(), field: value})
    verdict = verify_engine(plan, facts=facts)
    assert not verdict.matches and verdict.reasons == (reason,)
    with pytest.raises(StaleEngineError, match="is stale") as info:
        ensure_engine(plan, None, facts=facts)
    assert info.value.exit_code == 8 and "--onnx" in info.value.hint


def test_another_onnx_makes_the_plan_stale(plan, tmp_path):
    other = tmp_path / "other.onnx"
    other.write_bytes(b"another model")
    verdict = verify_engine(plan, onnx=other, facts=ORIN)
    assert not verdict.matches and "built from another ONNX" in verdict.reasons[0]


def test_this_machine_has_no_tensorrt_to_verify_with(plan):
    assert current_facts().tensorrt_version is None
    with pytest.raises(ImportError, match="JetPack"):
        verify_engine(plan)
    assert read_manifest(plan).build["gpu_name"] == "Orin"


def test_l4t_release_and_jetpack():
    line = "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8\n"
    assert parse_nv_tegra_release(line) == "36.4.3"
    assert jetpack_for("36.4.3") == "6.2" and jetpack_for("35.4.1") == "5.1.2"
    assert parse_nv_tegra_release("not a jetson") is None and jetpack_for(None) is None


def test_a_stale_plan_is_rebuilt_from_its_onnx(tmp_path, monkeypatch):
    """Rebuild through the fake TensorRT and pycuda of tests/fake_tensorrt.py (test doubles: no GPU here)."""
    import torch
    from fake_tensorrt import install_fakes
    from torch_models import TinyClassifier, export

    from orinkit.convert.pipeline import ConvertOptions, convert_onnx

    def install(version):
        install_fakes(monkeypatch, version)

    source = export(TinyClassifier(), torch.randn(1, 3, 32, 32), tmp_path / "tiny.onnx")
    install("8.6.2")
    built = convert_onnx(source, tmp_path / "out", ConvertOptions(shapes={"input": (2, 3, 32, 32)}))
    plan = built.output / "model.plan"
    assert read_manifest(plan).build["tensorrt_version"] == "8.6.2"
    install("10.3.0")  # JetPack upgraded: the plan no longer matches
    messages = []
    verdict, rebuilt = ensure_engine(plan, source, progress=messages.append)
    assert rebuilt and "built for TensorRT 8.6.2, this machine has 10.3.0" in verdict.reasons
    assert read_manifest(plan).build["tensorrt_version"] == "10.3.0"
    assert verify_engine(plan, onnx=source).matches
    assert sorted(p.name for p in plan.parent.iterdir() if p.name.startswith(".")) == []


def test_a_rebuild_replays_the_recorded_build_without_searching_again(tmp_path, monkeypatch):
    """A stale plan built with a criterion, a metric and forced FP32 nodes is rebuilt with exactly those: the
    default gate would keep nothing in FP32 for this model. Fake TensorRT and pycuda (tests/fake_tensorrt.py)."""
    import onnx
    import torch
    from fake_tensorrt import install_fakes
    from torch_models import TinyClassifier, export

    from orinkit.convert.fp16.criteria import Criterion
    from orinkit.convert.pipeline import ConvertOptions, convert_onnx
    from orinkit.convert.verify import replayed_options

    def install(version):
        install_fakes(monkeypatch, version)

    source = export(TinyClassifier(), torch.randn(1, 3, 32, 32), tmp_path / "tiny.onnx")
    conv = next(n.name for n in onnx.load(str(source)).graph.node if n.op_type == "Conv")
    criterion = Criterion(kind="elementwise", atol=0.05, rtol=0.02, min_cosine=0.998)
    install("10.3.0")
    built = convert_onnx(source, tmp_path / "out", ConvertOptions(
        criterion=criterion, metric="topk:3", min_agreement=0.9, keep_fp32=(conv,), samples=3, seed=7,
        workspace=128 << 20, max_batch=4))
    plan = built.output / "model.plan"
    before = read_manifest(plan)
    assert before.build["keep_fp32"] == [conv] and before.build["options"]["criterion"]["atol"] == 0.05
    replay = replayed_options(before)
    assert (replay.keep_fp32, replay.criterion, replay.metric, replay.min_agreement, replay.samples, replay.seed,
            replay.workspace, replay.replay) == ((conv,), criterion, "topk:3", 0.9, 3, 7, 128 << 20, True)
    assert replay.max_shapes == {"input": (4, 3, 32, 32)}
    install("11.1.0")
    messages = []
    verdict, rebuilt = ensure_engine(plan, source, progress=messages.append)
    assert rebuilt
    after = read_manifest(plan)
    assert after.build["keep_fp32"] == [conv] and after.build["tensorrt_version"] == "11.1.0"
    assert after.build["options"] == before.build["options"]
    assert any(m.startswith("replaying the recorded build: precision=fp16, kept FP32 nodes=1, "
                            "criterion=elementwise, metric=topk:3") for m in messages), messages
    assert any("decided by the task metric topk:3" in m for m in messages)
    evaluations = [m.strip() for m in messages if "evaluation(s) in" in m]
    assert evaluations and evaluations[0].startswith("1 evaluation(s)"), "a replay judges once, never searches"
