"""The time stamp in pixels (orinkit.video.stamp) through real H.264, and the RTSP test camera that carries it:
read with PyAV as the pipeline reads cameras, frozen, killed and started again."""

from __future__ import annotations

import time

import numpy as np
import pytest

from orinkit.video.stamp import band_height, read_stamp, stamp

av = pytest.importorskip("av")

pytest_plugins = ["video_fixtures"]

T0 = 1_764_000_000.123456
OPTIONS = {"rtsp_transport": "tcp"}


def textured(width: int, height: int, seed: int = 0) -> np.ndarray:
    """Noise over gradients: hard for the encoder at a live bitrate, so the band competes for bits."""
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 255, width, dtype=np.float32)[None, :, None]
    image = ramp * 0.5 + rng.integers(0, 128, (height, width, 3)).astype(np.float32)
    return image.clip(0, 255).astype(np.uint8)


def h264_roundtrip(width: int, height: int, frames: int, bit_rate: int):
    """Encode stamped frames with libx264 as a live camera does (ultrafast, zerolatency), decode them back."""
    encoder = av.CodecContext.create("libx264", "w")
    encoder.width, encoder.height, encoder.pix_fmt, encoder.bit_rate = width, height, "yuv420p", bit_rate
    encoder.framerate = 30
    encoder.options = {"preset": "ultrafast", "tune": "zerolatency", "g": "30"}
    decoder = av.CodecContext.create("h264", "r")
    base = textured(width, height)
    times, decoded = [], []
    for i in range(frames):
        image = np.roll(base, 9 * i, axis=1)  # motion: most frames are predicted ones
        times.append(T0 + i / 30)
        stamp(image, times[-1])
        frame = av.VideoFrame.from_ndarray(image, format="bgr24")
        frame.pts = i
        for packet in encoder.encode(frame):
            decoded += decoder.decode(packet)
    for packet in encoder.encode(None):
        decoded += decoder.decode(packet)
    assert len(decoded) == frames
    return times, decoded


@pytest.mark.parametrize(("source", "scaled", "bit_rate"), [
    ((640, 360), (640, 360), 1_000_000),
    ((1280, 720), (640, 360), 2_000_000),
    ((1280, 720), (320, 180), 2_000_000),
])
def test_stamp_survives_h264_and_scaling(source, scaled, bit_rate):
    times, decoded = h264_roundtrip(*source, frames=45, bit_rate=bit_rate)
    read = [read_stamp(frame.reformat(*scaled, "bgr24").to_ndarray()) for frame in decoded]
    assert read == pytest.approx(times, abs=1e-6)


def test_a_damaged_or_missing_stamp_reads_as_none():
    image = textured(640, 360)
    assert read_stamp(image) is None
    stamp(image, T0)
    assert read_stamp(image) == pytest.approx(T0, abs=1e-6)
    for damage in (slice(0, 16), slice(600, 616)):  # one cell: first and last column of the top row
        broken = image.copy()
        broken[:16, damage] = 255 - broken[:16, damage]
        assert read_stamp(broken) is None  # a flipped bit fails the CRC
    smeared = image.copy()
    smeared[:band_height(360), 100:140] = 128  # grey, as a garbled slice decodes
    assert read_stamp(smeared) is None


def decode(container, count: int):
    """``count`` frames as (decode time, BGR array)."""
    out, started = [], time.time()
    try:
        for frame in container.decode(video=0):
            out.append((time.time(), frame.to_ndarray(format="bgr24")))
            if len(out) == count:
                return out
    except av.FFmpegError as exc:
        raise AssertionError(f"{exc} after {len(out)} frames, {time.time() - started:.2f} s (from {started:.3f})") \
            from exc
    raise AssertionError(f"the stream ended after {len(out)} frames")


def test_camera_frames_are_clean_stamped_and_fresh(rtsp_camera):
    with av.open(rtsp_camera.url, options=OPTIONS, timeout=(5.0, 3.0)) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.name, stream.codec_context.width, stream.codec_context.height) == \
            ("h264", 640, 360)
        frames = decode(container, 45)
    stamps = [read_stamp(image) for _, image in frames]
    # With sliced threads the upper part of predicted frames decodes as garbage: then only key frames would read.
    assert sum(s is not None for s in stamps) >= 40, stamps
    read = [(at, s) for (at, _), s in zip(frames, stamps) if s is not None]
    assert all(s <= at for at, s in read)  # stamped when made, before it was decoded
    assert read[-1][0] - read[-1][1] < 1.0  # the first frames come late (the open probes ~1 s), then it catches up
    assert len({s for _, s in read}) == len(read)  # one stamp per frame: a live camera, not a repeated picture
    for _, image in frames[-10:]:
        # Below the band, 8 horizontal stripes whose rows repeat: a garbled picture breaks that. Chroma
        # subsampling blurs each of the 7 borders over about 3 rows.
        body = image[band_height(360):].astype(np.int16)
        steps = np.abs(np.diff(body, axis=0)).mean(axis=(1, 2))
        assert np.median(steps) < 2.0 and (steps > 10).sum() <= 3 * 7, steps.round(1)


def test_frozen_camera_makes_a_read_time_out(rtsp_camera):
    container = av.open(rtsp_camera.url, options=OPTIONS, timeout=(5.0, 3.0))
    try:
        decode(container, 5)
        rtsp_camera.freeze()
        last = time.monotonic()
        with pytest.raises(av.FFmpegError):
            for _ in container.decode(video=0):  # frames already on the way come out first
                last = time.monotonic()
        assert time.monotonic() - last < 3.0 + 2.0
    finally:
        rtsp_camera.thaw()
        container.close()


def test_killed_camera_ends_the_stream_and_serves_again_after_start(rtsp_camera):
    with av.open(rtsp_camera.url, options=OPTIONS, timeout=(5.0, 3.0)) as container:
        decode(container, 5)
        rtsp_camera.kill()
        killed = time.monotonic()
        try:
            for _ in container.decode(video=0):
                pass
        except av.FFmpegError:
            pass  # EOF or a reset connection: either ends the stream
        assert time.monotonic() - killed < 2.5  # at once (a closed socket), not after the 3 s read timeout
    with pytest.raises(av.FFmpegError):
        av.open(rtsp_camera.url, options=OPTIONS, timeout=(5.0, 3.0))
    rtsp_camera.start()
    with av.open(rtsp_camera.url, options=OPTIONS, timeout=(5.0, 3.0)) as container:
        frames = decode(container, 5)
    assert any(read_stamp(image) is not None for _, image in frames)
