"""The video pipeline on a real tritonserver: an H.264 clip encoded here, decoded by PyAV, every frame answered in
order by a Python-backend model under the dynamic batcher; policies, limits and bad sources."""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path

import numpy as np
import pytest
from video_models import build_video_repository, write_clip

from orinkit.client import Client
from orinkit.video import NotAVideoError, SourceNotFoundError, UnsupportedSourceError
from orinkit.video.adapters import ImageAdapter, adapter_for
from orinkit.video.errors import SourceUnreachableError
from orinkit.video.pipeline import Pipeline
from orinkit.video.sinks import JsonLinesSink

pytest.importorskip("av")


class Collect:
    """A sink keeping what it is given (the pipeline's contract: write, stats, close)."""

    name = "collect"

    def __init__(self) -> None:
        self.results, self.snapshots, self.closed = [], [], False

    def write(self, result) -> None:
        self.results.append(result)

    def stats(self, snapshot) -> None:
        self.snapshots.append(snapshot)

    def close(self) -> None:
        self.closed = True


@pytest.fixture(scope="module")
def url(triton_server_factory, tmp_path_factory):
    repository = build_video_repository(tmp_path_factory.mktemp("video") / "models")
    return triton_server_factory(repository).command.grpc_url


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("clip") / "clip.mp4"
    return path, write_clip(path, frames=60)


def test_a_file_is_answered_frame_by_frame_in_order(url, clip):
    path, written = clip
    collect = Collect()
    with Client(url, "frame_means") as client:
        adapter = adapter_for(client.info)
        assert isinstance(adapter, ImageAdapter) and adapter.size == (640, 360)
        summary = Pipeline([str(path)], client, adapter, sinks=[collect], in_flight=4).run()
    assert [r.frame.index for r in collect.results] == list(range(60))
    expected = np.array([w.reshape(-1, 3).mean(axis=0) for w in written])
    answered = np.array([r.answer for r in collect.results]).reshape(60, 3)
    assert np.abs(answered - expected).max() < 3.0  # H.264 at crf 18 moves a frame's mean by a level or two
    stats = summary.stats
    assert (stats["read"], stats["answered"], stats["dropped"], stats["failed"]) == (60, 60, 0, 0)
    assert all(r.frame.captured <= r.sent <= r.answered <= r.sunk for r in collect.results)
    assert collect.closed and collect.snapshots[-1]["answered"] == 60
    assert summary.events[0].state == "running" and summary.events[-1].state == "ended"
    assert not summary.interrupted and not summary.errors


def test_frames_stops_after_that_many_and_the_sinks_close(url, clip):
    collect = Collect()
    with Client(url, "frame_means") as client:
        summary = Pipeline([str(clip[0])], client, adapter_for(client.info), sinks=[collect], frames=7).run()
    assert [r.frame.index for r in collect.results] == list(range(7))
    assert summary.stats["answered"] == 7 and collect.closed


def test_a_file_paced_in_real_time_into_a_slow_model_drops_frames_and_keeps_latency_bounded(url, clip):
    collect = Collect()
    with Client(url, "slow_means") as client:
        summary = Pipeline([str(clip[0])], client, adapter_for(client.info), sinks=[collect], realtime=True,
                           in_flight=1).run()
    stats = summary.stats
    # 60 frames over 2 s into a model taking 100 ms a call: about 20 answered, the rest dropped after decoding.
    assert stats["read"] == 60 and stats["dropped"] > 20 and stats["answered"] + stats["dropped"] == 60
    indices = [r.frame.index for r in collect.results]
    assert indices == sorted(indices) and indices[-1] >= 55  # the newest frames, not the first ones queued
    # Each answer is for a frame at most one model call old when sent: no queue builds up.
    assert max(r.sent - r.frame.captured for r in collect.results) < 0.5


def test_two_files_share_the_server_and_both_finish(url, clip, tmp_path):
    other = tmp_path / "other.mp4"
    write_clip(other, frames=30)
    collect = Collect()
    with Client(url, "frame_means") as client:
        summary = Pipeline([str(clip[0]), str(other)], client, adapter_for(client.info), sinks=[collect]).run()
    by_source = {}
    for result in collect.results:
        by_source.setdefault(result.source, []).append(result.frame.index)
    assert by_source == {str(clip[0]): list(range(60)), str(other): list(range(30))}
    assert {s["state"] for s in summary.stats["sources"].values()} == {"ended"}


def test_a_camera_down_at_start_does_not_keep_the_other_sources_from_running(url, clip):
    """Several sources: an RTSP camera nobody listens for (a closed port, so every open is refused) is retried as
    a camera that dropped, up to --max-reconnects, and then fails alone; the file beside it is answered whole.
    Alone, the same camera fails at once (nothing else could run meanwhile)."""
    import socket

    from orinkit.video.reader import Backoff

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        dead = f"rtsp://127.0.0.1:{probe.getsockname()[1]}/cam"
    collect = Collect()
    with Client(url, "frame_means") as client:
        summary = Pipeline([dead, str(clip[0])], client, adapter_for(client.info), sinks=[collect],
                           max_reconnects=2, backoff=Backoff(first_s=0.05, max_s=0.1), read_timeout_s=2.0).run()
        assert [r.frame.index for r in collect.results if r.source == str(clip[0])] == list(range(60))
        assert not [r for r in collect.results if r.source == dead]
        states = [e.state for e in summary.events if e.source == dead]
        assert states[0] == "reconnecting" and states[-1] == "failed" and dead in summary.source_errors
        assert "did not come back after 2 reconnects" in str(summary.source_errors[dead])
        with pytest.raises(SourceUnreachableError, match="cannot reach rtsp://127.0.0.1"):
            Pipeline([dead], client, adapter_for(client.info), read_timeout_s=2.0).run()


class BrightnessTally(ImageAdapter):
    """frame_means' adapter with state across frames, as a tracker has: each source's copy counts its own frames
    and notes the order and the thread it was asked in; its summary is that source's tally."""

    def __init__(self, base: ImageAdapter) -> None:
        super().__init__(base.kind, base.size, base.quality, output=base.output)
        self.source, self.indices, self.threads, self.brightest = None, [], set(), 0.0

    def for_source(self, name: str) -> BrightnessTally:
        mine = copy.copy(self)
        mine.source, mine.indices, mine.threads = name, [], set()
        self.made.append(mine)
        return mine

    def answer(self, outputs, frame):
        self.indices.append(frame.index)
        self.threads.add(threading.get_ident())
        self.brightest = max(self.brightest, float(np.asarray(outputs).mean()))
        return super().answer(outputs, frame)

    def summary(self) -> dict | None:
        return {"frames": len(self.indices), "brightest": round(self.brightest, 1)}


def test_each_source_has_its_own_adapter_and_its_summary_ends_the_results(url, clip, tmp_path):
    other = tmp_path / "other.mp4"
    write_clip(other, frames=30)
    results = tmp_path / "out.jsonl"
    collect = Collect()
    with Client(url, "frame_means") as client:
        tally = BrightnessTally(adapter_for(client.info))
        tally.made = []
        summary = Pipeline([str(clip[0]), str(other)], client, tally, sinks=[collect, JsonLinesSink(results)]).run()
    made = {adapter.source: adapter for adapter in tally.made}
    assert len(tally.made) == 2 and set(made) == {str(clip[0]), str(other)}  # once per source
    assert made[str(clip[0])].indices == list(range(60)) and made[str(other)].indices == list(range(30))
    assert len(made[str(clip[0])].threads | made[str(other)].threads) == 1  # the pipeline's loop, one thread
    assert tally.indices == []  # the adapter given answers nothing itself
    answers = {name: adapter.summary() for name, adapter in made.items()}
    assert summary.answers == answers and answers[str(other)]["frames"] == 30

    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(lines) == 91 and all("frame" in line for line in lines[:90])
    closing = lines[-1]["summary"]
    assert closing["answers"] == answers
    assert (closing["read"], closing["answered"], closing["dropped"], closing["failed"]) == (90, 90, 0, 0)

    from orinkit.cli.stream import answer_lines

    assert answer_lines({"cam": {"tracks": {"disc": 3, "box": 1}}}) == ["tracks: disc 3, box 1"]
    assert answer_lines(answers) == [f"  {name}: frames: {a['frames']}; brightest: {a['brightest']}"
                                     for name, a in answers.items()]


def test_a_summary_that_fails_is_reported_and_the_files_still_close(url, clip, tmp_path):
    class Failing(ImageAdapter):
        def summary(self):
            raise ValueError("no tally")

    results = tmp_path / "out.jsonl"
    with Client(url, "frame_means") as client:
        base = adapter_for(client.info)
        adapter = Failing(base.kind, base.size, output=base.output)
        summary = Pipeline([str(clip[0])], client, adapter, sinks=[JsonLinesSink(results)], frames=3).run()
    assert summary.answers == {} and summary.errors == [f"summary of {clip[0]} failed: ValueError: no tally"]
    assert [json.loads(line)["frame"] for line in results.read_text().splitlines()] == [0, 1, 2]


def test_bad_sources_are_refused_before_anything_is_sent(url, tmp_path):
    text = tmp_path / "notes.mp4"
    text.write_text("not a video")
    with Client(url, "frame_means") as client:
        adapter = adapter_for(client.info)
        with pytest.raises(SourceNotFoundError, match="no video file or image folder at"):
            Pipeline([str(tmp_path / "missing.mp4")], client, adapter)
        with pytest.raises(UnsupportedSourceError, match="'http://' is not a video source"):
            Pipeline(["http://camera/stream"], client, adapter)
        with pytest.raises(NotAVideoError, match="is not a video FFmpeg can read"):
            Pipeline([str(text)], client, adapter).run()
        with pytest.raises(NotAVideoError, match="holds no images"):
            Pipeline([str(tmp_path)], client, adapter).run()


def test_a_folder_of_published_photos_is_a_source_in_name_order(url, tmp_path):
    # scikit-learn's two sample photographs (427x640 JPEG): images nobody here made, scaled to the model's size.
    import shutil

    import sklearn
    from PIL import Image

    images = Path(sklearn.__file__).parent / "datasets" / "images"
    for name in ("flower.jpg", "china.jpg"):
        shutil.copy(images / name, tmp_path / name)
    (tmp_path / "notes.txt").write_text("not an image")
    collect = Collect()
    with Client(url, "frame_means") as client:
        summary = Pipeline([str(tmp_path)], client, adapter_for(client.info), sinks=[collect]).run()
    assert summary.stats["answered"] == 2
    for result, name in zip(collect.results, ("china.jpg", "flower.jpg")):
        with Image.open(images / name) as photo:
            expected = np.asarray(photo.convert("RGB").resize((640, 360), Image.BILINEAR))[:, :, ::-1]
            assert result.frame.source_size == photo.size
        assert np.array_equal(result.frame.image, expected)  # BGR, scaled, exactly what Pillow makes
        assert np.allclose(result.answer.reshape(3), expected.reshape(-1, 3).mean(axis=0), atol=0.01)


def test_a_1080p_file_is_scaled_inside_the_decoder_and_keeps_its_source_size(url, tmp_path):
    path = tmp_path / "hd.mp4"
    written = write_clip(path, frames=5, size=(1920, 1080))
    collect = Collect()
    with Client(url, "frame_means") as client:
        Pipeline([str(path)], client, adapter_for(client.info), sinks=[collect]).run()
    assert [r.frame.image.shape for r in collect.results] == [(360, 640, 3)] * 5
    assert {r.frame.source_size for r in collect.results} == {(1920, 1080)}
    means = np.array([r.answer.reshape(3) for r in collect.results])
    expected = np.array([w.reshape(-1, 3).mean(axis=0) for w in written])
    assert np.abs(means - expected).max() < 3.0


def test_reconnect_backoff_doubles_from_a_quarter_second_to_five_with_jitter():
    from orinkit.video.reader import Backoff

    backoff = Backoff()
    for attempt, base in enumerate((0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0)):
        delays = [backoff.delay(attempt) for _ in range(200)]
        assert base * 0.8 <= min(delays) < max(delays) <= base * 1.2  # jittered: cameras do not come back in step


def test_each_source_keeps_its_own_in_flight_default(tmp_path):
    clip = tmp_path / "clip.mp4"
    write_clip(clip, frames=2)
    mixed = Pipeline([str(clip), "rtsp://127.0.0.1:9/cam"], client=None, adapter=None)
    assert mixed.budgets == {str(clip): 2, "rtsp://127.0.0.1:9/cam": 1}
    assert Pipeline([str(clip), "rtsp://127.0.0.1:9/cam"], client=None, adapter=None, in_flight=3).budgets == {
        str(clip): 3, "rtsp://127.0.0.1:9/cam": 3}
