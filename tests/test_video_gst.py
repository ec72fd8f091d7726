"""GStreamer sources (csi://, gst://) on this machine's real GStreamer: videotestsrc pipelines, an H.264 file, and
the RTSP test camera through software decoding. csi:// and nvv4l2decoder exist only on a Jetson: here they must be
named as missing."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from orinkit.core.errors import EXIT_MISSING, MissingExtraError
from orinkit.video.errors import (
    MissingElementError,
    SourceStalledError,
    SourceUnreachableError,
    UnsupportedSourceError,
)
from orinkit.video.gst_source import SYSTEM_DIST_PACKAGES, GstSource, gstreamer, rtsp_hw_pipeline, rtsp_sw_pipeline
from orinkit.video.stamp import read_stamp, stamp
from orinkit.video.uri import parse_source

pytest_plugins = ["video_fixtures"]


@pytest.fixture(autouse=True, scope="module")
def _gstreamer():
    try:
        gstreamer()
    except MissingExtraError as exc:
        pytest.skip(f"GStreamer's Python bindings are not here: {exc}")


def red(width: int, height: int, frames: int, live: bool = False) -> str:
    # videotestsrc's foreground colour is ARGB: pure red must come out as BGR (0, 0, 255).
    return (f"gst://videotestsrc num-buffers={frames} is-live={str(live).lower()} pattern=solid-color "
            f"foreground-color=0xffff0000 ! video/x-raw,width={width},height={height},framerate=30/1")


def test_frames_are_bgr_at_the_asked_size_with_index_and_pts():
    source = GstSource(red(320, 240, 30, live=True), size=(640, 360))
    assert source.live and source.fps is None
    with source:
        assert source.fps == 30.0  # negotiated by the time open() returns
        frames = []
        while (frame := source.read()) is not None:
            frames.append(frame)
    assert source.fps == 30.0
    assert 1 <= len(frames) <= 30
    for frame in frames:
        assert frame.image.shape == (360, 640, 3) and frame.image.dtype == np.uint8
        assert frame.image.flags.writeable and frame.image.flags.c_contiguous
        assert (frame.image == (0, 0, 255)).all()  # red in BGR order, stretched to fill: no borders
        assert frame.source_size == (320, 240)
    indexes = [frame.index for frame in frames]
    assert indexes[0] == 0 and indexes == sorted(set(indexes)) and indexes[-1] <= 29
    pts = [frame.pts for frame in frames]
    # A live source's timestamps are its running time: they start near 0 and step one frame interval per frame.
    assert pts[0] < 0.5 and all(p - pts[0] == pytest.approx(i / 30, abs=2e-3) for p, i in zip(pts, indexes))
    assert all(a.captured <= b.captured for a, b in zip(frames, frames[1:]))


def test_odd_width_rows_are_unpadded():
    # GStreamer pads BGR rows to 4 bytes: 322 * 3 = 966 is not a multiple of 4.
    with GstSource(red(160, 120, 3), size=(322, 181)) as source:
        frame = source.read()
    assert frame.image.shape == (181, 322, 3) and (frame.image == (0, 0, 255)).all()


@pytest.fixture
def stamped_clip(tmp_path):
    """A 640x360 H.264 MP4 of 40 frames, each stamped with its own time."""
    import av

    path = tmp_path / "clip.mp4"
    times = [1_764_000_000 + i / 30 for i in range(40)]
    rng = np.random.default_rng(1)
    base = rng.integers(0, 256, (360, 640, 3), dtype=np.uint8)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30, options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = 640, 360, "yuv420p"
        for i, t in enumerate(times):
            image = np.roll(base, 5 * i, axis=0)
            stamp(image, t)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")))
        container.mux(stream.encode(None))
    return path, times


def test_a_file_pipeline_gives_every_frame_in_order(stamped_clip):
    path, times = stamped_clip
    source = GstSource(f"gst://filesrc location={path} ! qtdemux ! h264parse ! avdec_h264", size=(320, 180))
    assert not source.live
    with source:
        frames = []
        while (frame := source.read()) is not None:
            frames.append(frame)
    assert [frame.index for frame in frames] == list(range(len(times)))
    assert [read_stamp(frame.image) for frame in frames] == pytest.approx(times, abs=1e-6)
    assert source.fps == 30.0 and frames[0].source_size == (640, 360)


def test_end_of_stream_reads_none_and_stays_none():
    with GstSource(red(64, 48, 2)) as source:
        while source.read() is not None:
            pass
        assert source.read() is None


def test_a_source_that_stops_producing_stalls_within_the_read_timeout():
    # A live source that makes one frame every 10 s: the first arrives, the second is far beyond the timeout.
    uri = "gst://videotestsrc is-live=true ! video/x-raw,width=640,height=360,framerate=1/10"
    with GstSource(uri, read_timeout_s=1.0) as source:
        assert source.read().index == 0
        started = time.monotonic()
        with pytest.raises(SourceStalledError, match="no frame for 1 s"):
            source.read()
        assert time.monotonic() - started < 1.0 + 2.0


def test_csi_needs_nvarguscamerasrc():
    with pytest.raises(MissingElementError) as caught:
        GstSource("csi://0", size=(640, 360)).open()
    assert caught.value.element == "nvarguscamerasrc" and caught.value.exit_code == EXIT_MISSING == 3
    assert "JetPack" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(UnsupportedSourceError, match="csi://N"):
        GstSource("csi://front")


def test_the_first_missing_element_is_named(rtsp_camera):
    with pytest.raises(MissingElementError, match="'nvv4l2decoder'") as caught:
        GstSource("gst://" + rtsp_hw_pipeline(rtsp_camera.url, (640, 360))).open()
    assert caught.value.exit_code == 3
    with pytest.raises(MissingElementError, match="'no_such_element'.*gst-inspect-1.0 no_such_element"):
        GstSource("gst://videotestsrc ! no_such_element ! videoconvert").open()


@pytest.mark.parametrize("pipeline", [
    "videotestsrc ! ! videoconvert",
    "videotestsrc pattern=",
    "videotestsrc no-such-property=1",
    "videotestsrc ! video/x-raw,format=NOTAFORMAT",
])
def test_a_malformed_pipeline_is_refused_in_one_line(pipeline):
    with pytest.raises(UnsupportedSourceError, match="is not valid") as caught:
        GstSource("gst://" + pipeline).open()
    assert "\n" not in str(caught.value) and caught.value.exit_code == 4


def test_appsink_endings():
    # OpenCV-style strings end in an appsink: orinkit's replaces it. One elsewhere cannot be read and is refused.
    with GstSource(red(64, 48, 3) + " ! videoconvert ! appsink sync=false") as source:
        assert (source.read().image == (0, 0, 255)).all()
    with pytest.raises(UnsupportedSourceError, match="own appsink"):
        GstSource("gst://videotestsrc ! tee name=t ! appsink t. ! queue")
    with pytest.raises(UnsupportedSourceError, match="csi:// and gst://"):
        GstSource("rtsp://127.0.0.1/cam")


def test_a_parsed_source_spec_is_accepted():
    spec = parse_source("gst://" + red(64, 48, 3)[len("gst://"):])
    with GstSource(spec, size=(32, 24)) as source:
        assert source.uri == spec.uri and source.read().image.shape == (24, 32, 3)


def test_rtsp_camera_through_software_decoding(rtsp_camera):
    source = GstSource("gst://" + rtsp_sw_pipeline(rtsp_camera.url), size=(320, 180))
    with source:
        frames = [source.read() for _ in range(30)]
    assert source.live and source.fps == 30.0
    assert all(frame.image.shape == (180, 320, 3) and frame.source_size == (640, 360) for frame in frames)
    stamps = [read_stamp(frame.image) for frame in frames]
    assert all(s is not None for s in stamps), stamps  # whole pictures only, from the first one on
    assert all(s <= frame.captured for s, frame in zip(stamps, frames))
    assert frames[-1].captured - stamps[-1] < 1.0
    indexes = [frame.index for frame in frames]
    assert indexes == sorted(set(indexes))


def test_rtsp_camera_frozen_stalls_killed_ends_gone_is_unreachable(rtsp_camera):
    with GstSource("gst://" + rtsp_sw_pipeline(rtsp_camera.url), read_timeout_s=2.0) as source:
        source.read()
        rtsp_camera.freeze()
        with pytest.raises(SourceStalledError):
            while True:
                source.read()
        rtsp_camera.thaw()
    with GstSource("gst://" + rtsp_sw_pipeline(rtsp_camera.url)) as source:
        source.read()
        rtsp_camera.kill()
        while source.read() is not None:  # the closed connection is the end of the stream
            pass
    with pytest.raises(SourceUnreachableError, match="Could not open resource"):
        GstSource("gst://" + rtsp_sw_pipeline(rtsp_camera.url)).open()


def test_system_gi_is_found_without_leaving_dist_packages_on_the_path():
    code = ("import sys; from orinkit.video.gst_source import gstreamer; Gst = gstreamer()[0]; "
            f"print(Gst.version_string(), {SYSTEM_DIST_PACKAGES!r} in sys.path)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("GStreamer 1.") and done.stdout.split()[-1] == str(
        SYSTEM_DIST_PACKAGES in sys.path)
