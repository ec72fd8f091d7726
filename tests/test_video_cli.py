"""``edge-stream`` in-process (click's CliRunner) and as a process stopped by SIGINT or SIGTERM, on a real
tritonserver."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from video_models import build_video_repository, write_clip

from orinkit.cli.stream import main

av = pytest.importorskip("av")


@pytest.fixture(scope="module")
def url(triton_server_factory, tmp_path_factory):
    repository = build_video_repository(tmp_path_factory.mktemp("video-cli") / "models")
    return triton_server_factory(repository).command.grpc_url


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("clip") / "clip.mp4"
    write_clip(path, frames=45)
    return path


def _video_frames(path) -> tuple[str, int, tuple[int, int]]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = sum(1 for _ in container.decode(stream))
        return stream.codec_context.name, frames, (stream.width, stream.height)


def test_a_file_gives_a_json_line_per_frame_an_mp4_and_a_summary(url, clip, tmp_path):
    results, video = tmp_path / "out.jsonl", tmp_path / "out.mp4"
    run = CliRunner().invoke(main, [str(clip), "--model", "frame_means", "--url", url, "--results", str(results),
                                    "--save", str(video), "--quiet"])
    assert run.exit_code == 0, run.output
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert [line["frame"] for line in lines] == list(range(45))
    assert all(line["latency_ms"] > 0 and len(line["answer"]["MEANS"]) == 3 for line in lines)
    assert _video_frames(video) == ("h264", 45, (640, 360))
    assert "read 45, answered 45, dropped 0, failed 0" in run.output
    assert not list(tmp_path.glob(".*part"))


@pytest.mark.parametrize(("source", "code", "words"), [
    ("missing.mp4", 4, "no video file or image folder at missing.mp4"),
    ("http://camera/stream", 4, "'http://' is not a video source"),
    ("rtsp://127.0.0.1:9/cam", 6, "cannot reach rtsp://127.0.0.1:9/cam"),
    ("csi://front", 4, "names no sensor number"),
])
def test_a_bad_source_is_one_line_and_its_exit_code(url, tmp_path, source, code, words):
    run = CliRunner().invoke(main, [source, "--model", "frame_means", "--url", url])
    assert run.exit_code == code, run.output
    assert words in run.output and "Traceback" not in run.output
    assert len(run.output.strip().splitlines()) == 1


def test_options_that_do_not_apply_are_refused(url, clip):
    run = CliRunner().invoke(main, [str(clip), str(clip), "--model", "frame_means", "--url", url, "--save", "x.mp4"])
    assert run.exit_code == 4 and "--save writes one source's video" in run.output
    run = CliRunner().invoke(main, ["rtsp://127.0.0.1:9/cam", "--model", "frame_means", "--url", url, "--realtime"])
    assert run.exit_code == 4 and "--realtime applies to files" in run.output
    run = CliRunner().invoke(main, [str(clip), "--model", "frame_means", "--url", url, "--decoder", "gstreamer"])
    assert run.exit_code == 4 and "applies to rtsp:// sources" in run.output


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_signal_ends_the_stream_with_complete_files(url, tmp_path, stop):
    long_clip = tmp_path / "long.mp4"
    write_clip(long_clip, frames=900)  # 30 s paced: the signal lands mid-stream even on a loaded machine
    results, video = tmp_path / "out.jsonl", tmp_path / "out.mp4"
    # As from a terminal: a suite started in the background by a non-interactive shell inherits SIGINT ignored,
    # and an ignored signal stays ignored in every child (Unix), so the child puts Python's own handler back first.
    terminal = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                "sys.argv[0] = 'edge-stream'; runpy.run_module('orinkit.cli.stream', run_name='__main__')")
    process = subprocess.Popen(
        [sys.executable, "-c", terminal, str(long_clip), "--model", "slow_means", "--url", url,
         "--realtime", "--results", str(results), "--save", str(video)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 5):
            time.sleep(0.1)
        process.send_signal(stop)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130, err
    answered = len(results.read_text().splitlines())
    assert f"answered {answered}," in err and "Traceback" not in err
    assert _video_frames(video)[1] == answered  # the MP4 is complete: its trailer written, every answer in it
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".part")]


def test_view_serves_the_annotated_frames_and_figures_on_the_device_page(url, tmp_path):
    import urllib.request

    from video_fixtures import free_port

    long_clip = tmp_path / "long.mp4"
    write_clip(long_clip, frames=900)  # 30 s paced: the signal lands mid-stream even on a loaded machine
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "orinkit.cli.stream", str(long_clip), "--model", "frame_means", "--url", url,
         "--realtime", "--view", f"127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        assert line.startswith(f"live view on http://127.0.0.1:{port}/"), line
        deadline = time.monotonic() + 30
        while True:
            status = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/live", timeout=5).read())
            if status.get("live") and (status.get("stats") or {}).get("answered") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status["live"] and status["stats"]["answered"] > 0, status
        with av.open(f"http://127.0.0.1:{port}/live.mjpg", format="mpjpeg") as container:
            frames = [frame.to_ndarray(format="bgr24") for _, frame in zip(range(3), container.decode(video=0))]
        assert [f.shape for f in frames] == [(360, 640, 3)] * 3
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 130 and "Traceback" not in err
    finally:
        process.kill()


def test_outputs_are_judged_before_the_server_is_waited_for(clip, tmp_path):
    # No server at this address: a bad output path must be refused at once, not after the 30 s ready wait.
    started = time.monotonic()
    run = CliRunner().invoke(main, [str(clip), "--model", "frame_means", "--url", "127.0.0.1:9",
                                    "--save", str(tmp_path / "missing" / "out.mp4")])
    assert run.exit_code == 4 and "the folder of the MP4 output" in run.output
    run = CliRunner().invoke(main, [str(clip), "--model", "frame_means", "--url", "127.0.0.1:9",
                                    "--view", "localhost:http"])
    assert run.exit_code == 4 and "is not [HOST:]PORT" in run.output
    assert time.monotonic() - started < 10


def test_an_output_that_cannot_start_leaves_no_other_behind(url, clip, tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = CliRunner().invoke(main, [str(clip), "--model", "frame_means", "--url", url, "--view",
                                        f"127.0.0.1:{port}", "--save", str(tmp_path / "out.mp4"),
                                        "--results", str(tmp_path / "out.jsonl")])
    assert run.exit_code == 5, run.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("source", "code"), [("rtsp://127.0.0.1:9/cam", 6), ("notes.mp4", 4)])
def test_a_source_that_cannot_be_opened_is_one_line_and_leaves_no_output(url, tmp_path, source, code):
    (tmp_path / "notes.mp4").write_text("not a video")
    out = tmp_path / "out"
    out.mkdir()
    source = str(tmp_path / source) if "://" not in source else source
    run = CliRunner().invoke(main, [source, "--model", "frame_means", "--url", url, "--save", str(out / "o.mp4"),
                                    "--results", str(out / "o.jsonl")])
    assert run.exit_code == code, run.output
    assert run.output.startswith("Error: ") and len(run.output.strip().splitlines()) == 1, run.output
    assert list(out.iterdir()) == []  # neither an empty JSON lines file nor the MP4's temporary one


def test_gi_without_gstreamer_is_one_line_and_exit_3(url, monkeypatch):
    from orinkit.video import gst_source

    class GiWithoutGst:
        @staticmethod
        def require_version(namespace, version):
            raise ValueError(f"Namespace {namespace} not available")

    monkeypatch.setattr(gst_source, "_gst", None)
    monkeypatch.setattr(gst_source, "_import_gi", lambda: GiWithoutGst)
    run = CliRunner().invoke(main, ["csi://0", "--model", "frame_means", "--url", url])
    assert run.exit_code == 3, run.output
    assert run.output.startswith("Error: GStreamer is not installed for Python")
    assert "gir1.2-gstreamer-1.0" in run.output
    assert len(run.output.strip().splitlines()) == 1 and "Traceback" not in run.output
