"""The video sinks with real parts: H.264 MP4 encoded by PyAV's libx264 and read back by PyAV (codec, size, frame
count, times, pixels), JSON lines read back line by line, and SinkSet keeping one failing output from stopping the
others. Frames are 640x360 BGR with moving content, as a camera gives them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import av
import numpy as np
import pytest

from orinkit.video import Frame, Result, SinkError
from orinkit.video.mp4 import Mp4Sink
from orinkit.video.sinks import BadOutputError, JsonLinesSink, Sink, SinkSet

W, H = 640, 360
BOX = (255, 255, 255)  # what draw() puts on every frame


def picture(i: int, width: int = W, height: int = H) -> np.ndarray:
    """A smooth background that shifts, and a coloured box that moves across: what a camera sees, not noise."""
    y, x = np.mgrid[0:height, 0:width]
    image = np.empty((height, width, 3), np.uint8)
    image[..., 0] = (x + 3 * i) % 256
    image[..., 1] = (y * 255 // max(1, height - 1))
    image[..., 2] = 96
    left = (i * 12) % (width - 80)
    image[100:180, left:left + 80] = (0, 64, 255)
    return image


def draw(image: np.ndarray, answer) -> np.ndarray:
    """An adapter's draw: a copy with the answer (here a box at answer's x) painted on."""
    out = image.copy()
    out[20:60, answer:answer + 40] = BOX
    return out


def result(i: int, *, pts: float | None = None, captured: float | None = None, image=None, source="cam",
           record=None) -> Result:
    captured = 1_700_000_000.0 + i / 30 if captured is None else captured
    frame = Frame(i, picture(i) if image is None else image, captured, pts=pts)
    return Result(source, frame, answer=(i * 5) % 560, record={"x": (i * 5) % 560} if record is None else record,
                  sent=captured + 0.002, answered=captured + 0.040)


def read_video(path):
    """(stream facts, [(time s, BGR image)]) of an MP4, decoded by PyAV."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        facts = {"codec": stream.codec_context.name, "width": stream.width, "height": stream.height,
                 "pix_fmt": stream.codec_context.pix_fmt, "frames": stream.frames}
        frames = [(float(f.pts * f.time_base), f.to_ndarray(format="bgr24")) for f in container.decode(stream)]
    return facts, frames


def mae(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


# --- MP4 -------------------------------------------------------------------------------------------------------


def test_mp4_is_h264_with_every_frame_at_its_pts_and_the_answer_drawn(tmp_path):
    target = tmp_path / "out.mp4"
    sink = Mp4Sink(target, draw=draw)
    written = []
    for i in range(60):
        r = result(i, pts=12.0 + i / 30)  # a file's pts need not start at 0
        sink.write(r)
        written.append(draw(r.frame.image, r.answer))
    assert not target.exists(), "the target appears only when the video is complete"
    assert list(tmp_path.iterdir()) == [sink.temp] and sink.temp.parent == tmp_path
    sink.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"], "the temporary file was renamed"

    facts, frames = read_video(target)
    assert facts == {"codec": "h264", "width": W, "height": H, "pix_fmt": "yuv420p", "frames": 60}
    times = [t for t, _ in frames]
    assert times == sorted(set(times)), "strictly increasing"
    assert times == pytest.approx([i / 30 for i in range(60)], abs=0.0015)
    for (_, decoded), expected in zip(frames, written):
        assert mae(decoded, expected) < 4.0
    answer = result(59).answer
    assert decoded[25:55, answer + 5:answer + 35].min() > 230, "the drawn answer is in the video"
    data = target.read_bytes()
    assert data.index(b"moov") < data.index(b"mdat"), "faststart: the index first, a browser plays it at once"


def test_without_pts_the_capture_times_space_the_frames_and_dropped_ones_leave_gaps(tmp_path):
    start = time.time()
    captured = [start + s for s in (0.0, 0.033, 0.066, 0.2, 0.233, 0.5, 0.5004, 0.51)]  # gaps: frames dropped
    sink = Mp4Sink(tmp_path / "live.mp4")
    for i, t in enumerate(captured):
        sink.write(result(i, captured=t))
    sink.close()
    facts, frames = read_video(tmp_path / "live.mp4")
    times = [t for t, _ in frames]
    assert facts["frames"] == len(captured)
    # 0.5004 lands in the same millisecond as 0.5: moved 1 ms on, as the container needs strictly increasing times
    assert times == pytest.approx([0.0, 0.033, 0.066, 0.2, 0.233, 0.5, 0.501, 0.51], abs=0.0015)
    assert times == sorted(set(times))


def test_a_source_whose_clock_restarts_keeps_the_video_going_forward(tmp_path):
    pts = [5.0, 5.033, 5.066, 5.1, 0.0, 0.033, 0.066]  # a reconnect: the new stream's pts start over
    sink = Mp4Sink(tmp_path / "again.mp4")
    for i, p in enumerate(pts):
        sink.write(result(i, pts=p))
    sink.close()
    times = [t for t, _ in read_video(tmp_path / "again.mp4")[1]]
    assert times == pytest.approx([0.0, 0.033, 0.066, 0.1, 0.133, 0.166, 0.199], abs=0.0015)


def test_fps_spaces_the_frames_evenly(tmp_path):
    sink = Mp4Sink(tmp_path / "even.mp4", fps=25)
    for i in range(10):
        sink.write(result(i, captured=time.time() + i * 0.1234))
    sink.close()
    times = [t for t, _ in read_video(tmp_path / "even.mp4")[1]]
    assert times == pytest.approx([i / 25 for i in range(10)], abs=0.0015)


def test_an_odd_frame_size_is_padded_to_an_even_one_and_other_sizes_scaled(tmp_path):
    sink = Mp4Sink(tmp_path / "odd.mp4")
    odd = [picture(i, 641, 361) for i in range(5)]
    for i, image in enumerate(odd):
        sink.write(result(i, image=image))
    sink.write(result(5, image=picture(5, 1280, 720)))  # a reconnect at another resolution
    sink.close()
    assert sink.size == (642, 362)
    facts, frames = read_video(tmp_path / "odd.mp4")
    assert (facts["width"], facts["height"], facts["frames"]) == (642, 362, 6)
    for (_, decoded), expected in zip(frames, odd):
        assert mae(decoded[:361, :641], expected) < 4.0
    big = picture(5, 1280, 720)[::2, ::2]
    assert mae(frames[5][1][:360, :640], big) < 12.0


def test_an_mp4_never_closed_leaves_nothing_at_the_target(tmp_path):
    """A run that raised before close: no target; the partial file goes when the sink does."""
    target = tmp_path / "crash.mp4"

    def run():
        sink = Mp4Sink(target, draw=draw)
        for i in range(10):
            sink.write(result(i))
        raise RuntimeError("the pipeline died")

    with pytest.raises(RuntimeError):
        run()
    import gc

    gc.collect()
    assert list(tmp_path.iterdir()) == []


def test_a_process_killed_mid_video_leaves_no_file_at_the_target(tmp_path):
    target = tmp_path / "killed.mp4"
    code = f"""
import sys, os
sys.path.insert(0, {os.path.dirname(__file__)!r})
from test_video_sinks import result
from orinkit.video.mp4 import Mp4Sink
sink = Mp4Sink({str(target)!r})
for i in range(30):
    sink.write(result(i))
print("written", flush=True)
sys.stdin.readline()
"""
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "written"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert not target.exists()
    leftovers = [p.name for p in tmp_path.iterdir()]
    assert all(name.startswith(".killed.mp4.") and name.endswith(".part") for name in leftovers), leftovers


def test_a_close_that_fails_removes_the_partial_file_and_keeps_the_target(tmp_path):
    target = tmp_path / "out.mp4"
    sink = Mp4Sink(target)
    for i in range(5):
        sink.write(result(i))
    target.mkdir()  # something else took the name: the rename into place fails
    (target / "keep").write_text("theirs")
    with pytest.raises(OSError):
        sink.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"] and (target / "keep").read_text() == "theirs"


def test_an_mp4_without_frames_is_not_written_and_says_so(tmp_path):
    sink = Mp4Sink(tmp_path / "empty.mp4")
    with pytest.raises(SinkError, match="no frame reached"):
        sink.close()
    assert list(tmp_path.iterdir()) == []
    sink.close()  # once closed, closing again does nothing


@pytest.mark.parametrize(("name", "needle"), [
    ("missing/out.mp4", "does not exist"),
    ("out.avi", "does not end in .mp4"),
    ("folder.mp4", "is a folder"),
])
def test_an_unusable_mp4_path_is_refused_at_once(tmp_path, name, needle):
    (tmp_path / "folder.mp4").mkdir()
    with pytest.raises(BadOutputError) as caught:
        Mp4Sink(tmp_path / name)
    error = caught.value
    assert needle in str(error) and error.hint and "\n" not in str(error)
    assert isinstance(error, SinkError) and error.exit_code == 4


# --- JSON lines ------------------------------------------------------------------------------------------------


def test_json_lines_parse_and_match_and_are_readable_before_close(tmp_path):
    path = tmp_path / "out.jsonl"
    sink = JsonLinesSink(path)
    results = [result(i, pts=i / 30) for i in range(5)]
    results.append(result(5, record={"score": float("nan"), "lanes": np.array([[1, 2], [3, 4]]),
                                     "n": np.int64(2)}))
    with open(path, encoding="utf-8") as tail:
        for r in results:
            sink.write(r)
            line = tail.readline()
            assert line.endswith("\n"), "each line reaches the file as it is written"
            got = json.loads(line)
            assert got == {"source": "cam", "frame": r.frame.index, "pts": r.frame.pts,
                           "captured": r.frame.captured, "sent": r.sent, "answered": r.answered,
                           "latency_ms": pytest.approx(40.0, abs=0.01), "answer": got["answer"]}
    sink.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["answer"] for line in lines[:5]] == [r.record for r in results[:5]]
    assert lines[5]["answer"] == {"score": None, "lanes": [[1, 2], [3, 4]], "n": 2}
    assert "NaN" not in path.read_text()


def test_json_lines_refuse_a_missing_folder(tmp_path):
    with pytest.raises(BadOutputError, match="does not exist"):
        JsonLinesSink(tmp_path / "nope" / "out.jsonl")


# --- SinkSet ---------------------------------------------------------------------------------------------------


class Recording(Sink):
    def __init__(self, name: str) -> None:
        self.name, self.results, self.snapshots, self.closed = name, [], [], 0

    def write(self, result: Result) -> None:
        self.results.append(result.frame.index)

    def stats(self, snapshot: dict) -> None:
        self.snapshots.append(snapshot)

    def close(self) -> None:
        self.closed += 1


class Breaks(Recording):
    """Fails on its third frame with an exception that is not orinkit's, over several lines."""

    def write(self, result: Result) -> None:
        if result.frame.index == 2:
            raise OSError(28, "No space left on device\nwhile writing")
        super().write(result)


def test_a_failing_sink_is_reported_once_closed_and_dropped_while_the_others_go_on(tmp_path):
    reported = []
    before, broken, after = Recording("first"), Breaks("disk"), Recording("last")
    mp4 = Mp4Sink(tmp_path / "out.mp4", draw=draw)
    sinks = SinkSet([before, broken, mp4, after], on_error=lambda name, error: reported.append((name, error)))
    for i in range(6):
        sinks.write(result(i))
        sinks.stats({"fps": 30.0, "answered": i + 1})
    assert sinks.alive == ["first", mp4.name, "last"]
    sinks.close()
    assert before.results == after.results == list(range(6)) and len(after.snapshots) == 6
    assert broken.results == [0, 1] and broken.closed == 1
    assert len(reported) == 1
    name, error = reported[0]
    assert name == "disk" and isinstance(error, SinkError)
    text = str(error)
    assert "\n" not in text and "'disk'" in text and "No space left on device while writing" in text
    assert "frame 2 of cam" in text and isinstance(error.__cause__, OSError)
    assert read_video(tmp_path / "out.mp4")[0]["frames"] == 6, "the video is complete"
    assert before.closed == after.closed == 1


def test_sinkset_stamps_sunk_and_draws_each_frame_once(tmp_path):
    calls = []

    class Adapter:
        def draw(self, image, answer):
            calls.append(answer)
            return draw(image, answer)

    adapter = Adapter()
    a, b = Mp4Sink(tmp_path / "a.mp4", draw=adapter.draw), Mp4Sink(tmp_path / "b.mp4", draw=adapter.draw)
    with SinkSet([a, b]) as sinks:
        r = result(0)
        before = time.time()
        sinks.write(r)
    assert len(calls) == 1, "one drawing shared by the sinks"
    assert r.sunk is not None and r.sunk >= before
    assert read_video(tmp_path / "a.mp4")[0]["frames"] == read_video(tmp_path / "b.mp4")[0]["frames"] == 1


def test_failures_in_stats_and_close_are_reported_and_same_names_told_apart():
    reported = []

    class BadStats(Recording):
        def stats(self, snapshot):
            raise KeyError("fps")

    class BadClose(Recording):
        def close(self):
            raise RuntimeError("cannot finish")

    good, bad_stats, bad_close = Recording("view"), BadStats("view"), BadClose("file")
    sinks = SinkSet([good, bad_stats, bad_close], on_error=lambda name, error: reported.append((name, str(error))))
    sinks.stats({"fps": 1.0})
    sinks.write(result(0))
    assert sinks.alive == ["view", "file"]
    sinks.close()
    sinks.close()
    assert [name for name, _ in reported] == ["view #2", "file"]
    assert "KeyError: 'fps'" in reported[0][1] and "RuntimeError: cannot finish" in reported[1][1]
    assert "closing" in reported[1][1] and good.results == [0] and sinks.alive == []


def test_an_on_error_that_raises_does_not_stop_the_other_sinks():
    def reporter(name, error):
        raise ValueError("the reporter is broken too")

    good = Recording("good")
    sinks = SinkSet([Breaks("bad"), good], on_error=reporter)
    for i in range(4):
        sinks.write(result(i))
    assert good.results == [0, 1, 2, 3] and sinks.alive == ["good"]
