"""The runnable examples (examples/*.py) against real tritonservers: each runs in-process through its main() and
does what it says it does."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time

from conftest import ROOT

from orinkit.core.processes import live_group_members

EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))  # as when a script runs from there: its helpers (_runner) import


def example(name: str):
    """examples/<name>.py as a module (the folder is no package; TorchScript needs the module registered to read
    its classes' source)."""
    module_name = f"orinkit_example_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def run_example(name: str, work, capsys) -> tuple[dict, str]:
    facts: dict = {}
    code = example(name).main(["--work", str(work)], facts=facts)
    output = capsys.readouterr()
    assert code == 0, output.out + output.err
    assert "Traceback" not in output.err
    return facts, output.out


def test_mnist_ensemble_classifies_png_bytes_like_the_model_in_process(tmp_path, capsys):
    facts, out = run_example("mnist_ensemble", tmp_path / "mnist", capsys)
    assert facts["test_images"] == 360
    assert facts["served_accuracy"] >= 0.85
    assert abs(facts["served_accuracy"] - facts["local_accuracy"]) <= 0.02
    assert facts["bench_failures"] == 0 and facts["bench_throughput"] > 0
    assert "accuracy on 360 held-out digits" in out


def test_lanes_fp16_is_fp16_from_the_image_step_to_the_proposals(tmp_path, capsys):
    facts, out = run_example("lanes_fp16", tmp_path / "lanes", capsys)
    assert facts["config_dtypes"] == {"model input": "TYPE_FP16", "model output": "TYPE_FP16",
                                      "image step output": "TYPE_FP16"}
    assert facts["served_input_dtype"] == "FP16"
    assert facts["direct_output_dtype"] == "float16"
    assert facts["direct_output_shape"] == (1, 2784, 77) and facts["direct_output_finite"]
    assert "random weights" in out


def test_plates_bls_stops_before_the_reader_when_nothing_is_found(tmp_path, capsys):
    facts, _ = run_example("plates_bls", tmp_path / "plates", capsys)
    assert facts["plate_boxes"] == [[8, 20, 52, 40], [70, 10, 120, 30]]
    assert facts["plate_scores_shape"] == (2, 8)
    assert facts["reader_calls_plates"] == 21  # one warm-up call and 20 timed ones, each reaching the reader
    assert facts["dark_boxes"] == 0 and facts["dark_scores_shape"] == (0, 8)
    assert facts["reader_calls_dark"] == 0


def test_resnet_rollout_switches_versions_under_load_without_a_failed_request(tmp_path, capsys):
    facts, _ = run_example("resnet_rollout", tmp_path / "rollout", capsys)
    v1, v2 = facts["answers"][1], facts["answers"][2]
    assert v1 != v2
    assert facts["unloaded_state"].startswith("v1 UNAVAILABLE") and facts["loaded_state"] == "v1 READY"
    assert facts["served_v1"] == v1 and facts["served_v2"] == v2 and facts["served_after_rollback"] == v1
    assert facts["failures"] == 0 and facts["requests"] > 0
    # The load saw version 1, then version 2, then version 1 again: no flapping between them.
    assert [answer for answer, _ in facts["answer_runs"]] == [v1, v2, v1]


def test_oneflow_layout_is_clean_and_check_catches_both_mistakes(tmp_path, capsys):
    facts, _ = run_example("oneflow_layout", tmp_path / "oneflow", capsys)
    assert facts["clean"] == []
    assert facts.get("local_server", [("resnet50_oneflow", "backend-missing")]) == [
        ("resnet50_oneflow", "backend-missing")]
    assert sorted(facts["mistakes"]) == [("empty_oneflow", "oneflow-layout"), ("nested_oneflow", "oneflow-layout")]
    assert facts["refused_by_add"] == ["empty_oneflow", "nested_oneflow"], "add refuses both before placing"


def test_an_orinkit_error_is_one_line_and_its_exit_code(tmp_path, capsys):
    """Run again in the same --work: the models are there already, which add_model refuses (bad input, 4)."""
    oneflow = example("oneflow_layout")
    assert oneflow.main(["--work", str(tmp_path)]) == 0
    capsys.readouterr()
    assert oneflow.main(["--work", str(tmp_path)]) == 4
    output = capsys.readouterr()
    assert output.err.startswith("error: model 'resnet50_oneflow' already exists") and output.err.count("\n") == 1



def test_lane_video_answers_every_frame_draws_them_and_scores_them(tmp_path, capsys):
    import av

    facts, out = run_example("lane_video", tmp_path / "lane-video", capsys)
    assert facts["answered"] == facts["read"] == facts["lines"] == 90
    with av.open(facts["video"]) as container:
        assert container.streams.video[0].codec_context.name == "h264"
        assert sum(1 for _ in container.decode(video=0)) == 90
    if facts["trained"]:
        assert facts["f1"] >= 0.9, out
    else:
        assert "random weights" in out


def test_detect_video_streams_a_real_clip_draws_its_boxes_and_counts_its_tracks(tmp_path, capsys):
    import av

    facts, out = run_example("detect_video", tmp_path / "detect-video", capsys)
    assert facts["answered"] == facts["read"] == facts["lines"] > 0
    with av.open(facts["video"]) as container:
        assert container.streams.video[0].codec_context.name == "h264"
        assert sum(1 for _ in container.decode(video=0)) == facts["lines"]
    if facts["drawn"]:  # no PyPI: the drawn clip, whose objects are known
        assert facts["tracks"] == facts["truth"], out
    else:  # carphone: one person, a face found on every frame and tracked as one
        assert facts["frames_with_boxes"] == facts["lines"] == 120 and sum(facts["tracks"].values()) == 1, out
    assert "distinct tracks per class" in out


def _demo(tmp_path, *args) -> subprocess.Popen:
    """examples/demo.py as from a terminal (Python's own SIGINT handler in place: a suite started in the background
    inherits SIGINT ignored), with its temporary folder under tmp_path."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    terminal = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                f"sys.argv[0] = {str(EXAMPLES / 'demo.py')!r}; runpy.run_path(sys.argv[0], run_name='__main__')")
    return subprocess.Popen([sys.executable, "-c", terminal, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp_path / "tmp")})


def _left(tmp_path) -> list[str]:
    """What is in the demo's temporary folder and beside it (onnxruntime's session id file aside)."""
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if not p.name.startswith(".ses"))


def test_the_demo_answers_and_leaves_no_server_log_behind(tmp_path):
    process = _demo(tmp_path, "--requests", "20")
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, out + err
    assert "(correct)" in out and "latency over 20 gRPC calls" in out and "server stopped, its log removed" in out
    assert _left(tmp_path) == ["tmp"]


def test_the_demo_stopped_by_sigint_stops_the_server_and_removes_its_log(tmp_path):
    process = _demo(tmp_path, "--requests", "100000000")
    try:
        seen = ""
        for line in process.stdout:
            seen += line
            if line.startswith("ready in"):
                break
        started = re.search(r"^ready in .*\(pid (\d+),", seen, re.MULTILINE)
        assert started, seen
        server_pid = int(started[1])
        time.sleep(0.5)  # the timed requests are running
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, seen + out + err
    assert "interrupted: stopped the server and removed its log" in err and "Traceback" not in err
    assert _left(tmp_path) == ["tmp"]
    assert live_group_members(server_pid) == []
