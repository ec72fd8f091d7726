"""GStreamer sources: ``csi://N`` (a Jetson's CSI camera through nvarguscamerasrc) and ``gst://PIPELINE`` (any
pipeline, e.g. RTSP with the Orin's hardware decoder, :func:`rtsp_hw_pipeline`).

A ``gst://`` pipeline ends where its video comes out: orinkit appends ``videoconvert ! videoscale !
video/x-raw,format=BGR[,width=W,height=H] ! appsink``, so frames always arrive as BGR at the asked size, scaled
inside GStreamer (put ``nvvidconv`` with the size before it on a Jetson and that tail only repacks BGRx to BGR). A
trailing ``! appsink ...``, as OpenCV's GStreamer strings end, is replaced by orinkit's; an appsink elsewhere is
refused. Live sources keep only the newest frame in the appsink (older ones are dropped there after decoding and
still counted in ``Frame.index``); a pipeline starting with ``filesrc`` or ``multifilesrc`` is a file: every frame,
in order, the decoder waiting for the reader.
"""

from __future__ import annotations

import collections
import glob
import os
import re
import sys
import sysconfig
import threading
import time
from urllib.parse import parse_qs, urlsplit

import numpy as np

from orinkit.core.errors import MissingExtraError
from orinkit.core.optional import require
from orinkit.video.errors import (
    GStreamerMissingError,
    MissingElementError,
    SourceLostError,
    SourceStalledError,
    SourceUnreachableError,
    UnsupportedSourceError,
)
from orinkit.video.frames import Frame

APPSINK = "orinkit"
FILE_SOURCES = ("filesrc", "multifilesrc")
# Where Debian and Ubuntu keep python3-gi for the system Python.
SYSTEM_DIST_PACKAGES = "/usr/lib/python3/dist-packages"
_JETSON = ("it comes with JetPack's NVIDIA GStreamer plugins (nvidia-l4t-gstreamer); csi:// and hardware decoding "
           "run only on a Jetson")
# Which package brings an element, for the elements orinkit's own pipelines and the documented ones use.
ELEMENT_HINTS = {
    "nvarguscamerasrc": _JETSON, "nvv4l2decoder": _JETSON, "nvvidconv": _JETSON, "nvjpegdec": _JETSON,
    "x264enc": "apt install gstreamer1.0-plugins-ugly",
    "rtspsrc": "apt install gstreamer1.0-plugins-good", "rtph264depay": "apt install gstreamer1.0-plugins-good",
    "rtph265depay": "apt install gstreamer1.0-plugins-good", "qtdemux": "apt install gstreamer1.0-plugins-good",
    "v4l2src": "apt install gstreamer1.0-plugins-good", "jpegdec": "apt install gstreamer1.0-plugins-good",
    "h264parse": "apt install gstreamer1.0-plugins-bad", "h265parse": "apt install gstreamer1.0-plugins-bad",
    "avdec_h264": "apt install gstreamer1.0-libav", "avdec_h265": "apt install gstreamer1.0-libav",
    "videoconvert": "apt install gstreamer1.0-plugins-base", "videoscale": "apt install gstreamer1.0-plugins-base",
    "appsink": "apt install gstreamer1.0-plugins-base", "videotestsrc": "apt install gstreamer1.0-plugins-base",
    "decodebin": "apt install gstreamer1.0-plugins-base", "uridecodebin": "apt install gstreamer1.0-plugins-base",
}
GSTREAMER_HINT = ("apt install gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 gstreamer1.0-plugins-base "
                  "(JetPack has them)")
POLL_S = 0.05  # how often a blocked read looks at the bus for errors

_gst_lock = threading.Lock()
_gst = None


def gstreamer():
    """``(Gst, GstApp, GstVideo)``, initialised once.

    A venv made without --system-site-packages does not see python3-gi, which no PyPI wheel replaces. When ``gi``
    is missing, the system's copy is imported if it was built for this interpreter's ABI (Debian 12's gi runs under
    a venv's CPython 3.11, JetPack 6's under 3.10); the system folder stays on sys.path only for that import, so no
    other Debian package shadows a missing one of the venv.
    """
    global _gst
    with _gst_lock:
        if _gst is None:
            gi = _import_gi()
            for namespace in ("Gst", "GstApp", "GstVideo"):
                try:
                    gi.require_version(namespace, "1.0")
                except ValueError:  # "Namespace Gst not available": gi without GStreamer's typelibs
                    raise GStreamerMissingError(namespace, hint=GSTREAMER_HINT) from None
            from gi.repository import Gst, GstApp, GstVideo

            Gst.init(None)
            _gst = (Gst, GstApp, GstVideo)
        return _gst


def _import_gi():
    try:
        return require("gi")
    except MissingExtraError:
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        if not glob.glob(os.path.join(SYSTEM_DIST_PACKAGES, "gi", f"_gi{suffix}")):
            raise
    sys.path.append(SYSTEM_DIST_PACKAGES)
    try:
        gi = require("gi")
        require("gi.repository.GLib")  # gi's own modules, found through its package folder from now on
    finally:
        sys.path.remove(SYSTEM_DIST_PACKAGES)
    return gi


def csi_pipeline(sensor: int, size: tuple[int, int] | None = None, capture: tuple[int, int] = (1920, 1080),
                 fps: int = 30) -> str:
    """A Jetson CSI camera: NV12 in NVMM memory, converted (and scaled) to BGRx by nvvidconv's hardware."""
    out = f",width={size[0]},height={size[1]}" if size else ""
    return (f"nvarguscamerasrc sensor-id={sensor} ! video/x-raw(memory:NVMM),width={capture[0]},height={capture[1]},"
            f"framerate={fps}/1,format=NV12 ! nvvidconv ! video/x-raw,format=BGRx{out}")


def rtsp_hw_pipeline(url: str, size: tuple[int, int] | None = None, latency_ms: int = 50) -> str:
    """An RTSP H.264 camera decoded by the Orin's hardware decoder (nvv4l2decoder) and scaled by nvvidconv, over TCP.

    No ``drop-on-latency``: the jitter buffer would drop compressed packets, and every picture after a lost packet
    is corrupt until the next key frame (measured with the software decoder: 25 garbled frames in a row at
    startup). Live sources drop
    whole decoded frames instead, at the appsink."""
    out = f",width={size[0]},height={size[1]}" if size else ""
    return (f"rtspsrc location=\"{url}\" protocols=tcp latency={latency_ms} ! "
            f"application/x-rtp,media=video ! rtph264depay ! h264parse ! nvv4l2decoder ! nvvidconv ! "
            f"video/x-raw,format=BGRx{out}")


def rtsp_sw_pipeline(url: str, latency_ms: int = 50) -> str:
    """The same with GStreamer's software decoder (gstreamer1.0-libav), for machines without nvv4l2decoder. The
    decoder drops the frames it cannot decode whole: joining a live stream between key frames, avdec_h264 would
    otherwise hand over grey half-pictures until the next one."""
    return (f"rtspsrc location=\"{url}\" protocols=tcp latency={latency_ms} ! "
            f"application/x-rtp,media=video ! rtph264depay ! h264parse ! avdec_h264 output-corrupt=false")


def element_names(pipeline: str) -> list[str]:
    """The factory names a gst-launch description uses, in order (caps, properties and pad references skipped)."""
    names = []
    for link in _links(pipeline):
        for word in _split_outside_quotes(link, " "):
            if "=" in word or "/" in word or "." in word or "(" in word or word in ("", "(", ")"):
                continue
            if re.fullmatch(r"[A-Za-z0-9_-]+", word):
                names.append(word)
                break
    return names


class GstSource:
    """Frames from a GStreamer pipeline (``csi://N[?width=&height=&fps=]`` or ``gst://PIPELINE``), BGR at ``size``
    (width, height) or the pipeline's own size."""

    def __init__(self, uri, size: tuple[int, int] | None = None, read_timeout_s: float = 3.0,
                 open_timeout_s: float = 10.0) -> None:
        # ``uri`` is the URI text, or orinkit.video.uri's SourceSpec (kind csi or gst, target the sensor id or the
        # pipeline: how the hardware RTSP reader arrives, its uri the camera's rtsp:// address).
        if isinstance(uri, str):
            self.uri, self.name = uri, uri
            scheme, _, target = uri.partition("://")
        else:
            self.uri, self.name, scheme, target = uri.uri, uri.name, uri.kind, uri.target
        self.size = tuple(size) if size else None
        self.read_timeout_s = read_timeout_s
        self.open_timeout_s = max(open_timeout_s, read_timeout_s)
        self.pipeline_text = self._describe(scheme, target)
        first = (element_names(self.pipeline_text) or [""])[0]
        self.live = first not in FILE_SOURCES
        self._pipeline = None
        self._appsink = None
        self._pending = None
        self._fps: float | None = None
        self._source_size: tuple[int, int] | None = None
        self._count = 0
        self._error: str | None = None
        self._recent: collections.deque = collections.deque(maxlen=16)  # (pts, index) of buffers reaching the sink
        self._count_lock = threading.Lock()

    @property
    def fps(self) -> float | None:
        """The pipeline's frame rate once negotiated (None before, or for a variable rate)."""
        return self._fps

    def _describe(self, scheme: str, target: str) -> str:
        if scheme == "csi":
            parts = urlsplit(f"csi://{target}")
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            try:
                sensor = int(parts.netloc or parts.path.strip("/"))
                capture = (int(query.get("width", 1920)), int(query.get("height", 1080)))
                fps = int(query.get("fps", 30))
            except ValueError:
                raise UnsupportedSourceError(f"'{self.uri}' is not a CSI camera URI",
                                             hint="write csi://N (N the sensor id, e.g. csi://0), optionally "
                                                  "?width=1920&height=1080&fps=30 for the capture mode") from None
            return csi_pipeline(sensor, self.size, capture, fps)
        if scheme == "gst":
            text = target.strip()
            links = _links(text)
            if links and _split_outside_quotes(links[-1], " ")[:1] == ["appsink"]:
                text = " ! ".join(links[:-1]).strip()
            if not text:
                raise UnsupportedSourceError("the gst:// URI holds no pipeline",
                                             hint="write gst://ELEMENT ! ... ending where the video comes out")
            if "appsink" in element_names(text):
                raise UnsupportedSourceError("a gst:// pipeline must not hold its own appsink",
                                             hint="end the pipeline where the video comes out: orinkit adds the "
                                                  "conversion to BGR and its appsink")
            return text
        raise UnsupportedSourceError(f"GstSource reads csi:// and gst:// URIs, not '{self.uri}'",
                                     hint="use csi://N or gst://PIPELINE")

    def _tail(self) -> str:
        size = f",width={self.size[0]},height={self.size[1]}" if self.size else ""
        # Live: one buffer, the newest wins. Files: a few buffers and back-pressure, so no frame is lost.
        sink = "max-buffers=1 drop=true" if self.live else "max-buffers=4 drop=false"
        return (f"videoconvert name=orinkit_in ! videoscale ! video/x-raw,format=BGR{size} ! "
                f"appsink name={APPSINK} {sink} sync=false emit-signals=false")

    def open(self) -> GstSource:
        """Build and start the pipeline; returns once the first frame is there (it is the first ``read()``)."""
        Gst, _, _ = gstreamer()
        for name in element_names(self.pipeline_text) + ["videoconvert", "videoscale", "appsink"]:
            if Gst.ElementFactory.find(name) is None:
                hint = ELEMENT_HINTS.get(name, f"install the GStreamer plugin that provides it (gst-inspect-1.0 "
                                               f"{name} tells whether it is there)")
                raise MissingElementError(name, hint=hint)
        text = f"{self.pipeline_text} ! {self._tail()}"
        try:
            pipeline = Gst.parse_launch(text)
        except Exception as exc:  # GLib.Error: no syntax, a link that cannot be made, an unknown property
            raise UnsupportedSourceError(f"the GStreamer pipeline '{self.pipeline_text}' is not valid: "
                                         f"{_one_line(getattr(exc, 'message', exc))}",
                                         hint="check it with gst-launch-1.0 PIPELINE ! fakesink") from None
        self.close()
        self._pipeline = pipeline
        self._appsink = pipeline.get_by_name(APPSINK)
        self._count = 0
        self._error = None
        self._recent.clear()
        self._appsink.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, self._counted)
        if pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
            error = self._drain_bus()
            self.close()
            raise SourceUnreachableError(f"the GStreamer pipeline of {self.name} did not start"
                                         + (f": {error}" if error else ""),
                                         hint="check that the camera or stream is there (gst-launch-1.0 shows "
                                              "the pipeline's own messages)")
        try:
            self._pending = self._pull(self.open_timeout_s, opening=True)
        except Exception:
            self.close()
            raise
        if self._pending is not None:
            self._negotiated(self._pending)  # fps and the source's size are known once open() returns
        return self

    def read(self) -> Frame | None:
        """The next frame (for live sources the newest one), or None at the end of the stream."""
        if self._pipeline is None:
            raise SourceLostError(f"{self.name} is not open", hint="call open() first")
        sample, self._pending = self._pending, None
        if sample is None:
            sample = self._pull(self.read_timeout_s)
        if sample is None:
            return None
        return self._frame(sample)

    def close(self) -> None:
        pipeline, self._pipeline, self._appsink, self._pending = self._pipeline, None, None, None
        if pipeline is not None:
            Gst, _, _ = gstreamer()
            pipeline.set_state(Gst.State.NULL)

    def __enter__(self) -> GstSource:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    def _counted(self, _pad, info):
        buffer = info.get_buffer()
        with self._count_lock:
            self._recent.append((buffer.pts, self._count))
            self._count += 1
        return _gst[0].PadProbeReturn.OK

    def _pull(self, timeout_s: float, opening: bool = False):
        Gst, _, _ = gstreamer()
        deadline = time.monotonic() + timeout_s
        while True:
            error = self._error or self._drain_bus()
            if error:
                cls = SourceUnreachableError if opening else SourceLostError
                raise cls(f"{self.name} failed: {error}",
                          hint="the pipeline stopped with this error; check the camera, the stream or the network")
            sample = self._appsink.try_pull_sample(int(POLL_S * Gst.SECOND))
            if sample is not None:
                return sample
            if self._appsink.is_eos():
                return None
            if time.monotonic() > deadline:
                if opening:
                    raise SourceUnreachableError(f"{self.name} gave no frame within {timeout_s:g} s of starting",
                                                 hint="check that the camera or stream is there and sends video")
                raise SourceStalledError(f"{self.name} gave no frame for {timeout_s:g} s",
                                         hint="the camera or stream stopped sending; live sources are reopened")

    def _drain_bus(self) -> str | None:
        """The first error the pipeline posted, if any. Every other message is dropped: nothing else reads this
        bus, and a live pipeline's messages would pile up there for as long as it runs."""
        Gst, _, _ = gstreamer()
        bus = self._pipeline.get_bus()
        while (message := bus.pop()) is not None:
            if message.type == Gst.MessageType.ERROR and self._error is None:
                error, _debug = message.parse_error()
                self._error = f"{message.src.get_name()}: {_one_line(error.message)}"
        return self._error

    def _negotiated(self, sample):
        _, _, GstVideo = gstreamer()
        info = GstVideo.VideoInfo.new_from_caps(sample.get_caps())
        if self._fps is None and info.fps_n > 0 and info.fps_d > 0:
            self._fps = info.fps_n / info.fps_d
        if self._source_size is None:
            upstream = self._pipeline.get_by_name("orinkit_in").get_static_pad("sink").get_current_caps()
            if upstream is not None:
                structure = upstream.get_structure(0)
                self._source_size = (structure.get_value("width"), structure.get_value("height"))
        return info

    def _frame(self, sample) -> Frame:
        Gst, _, _ = gstreamer()
        captured = time.time()
        buffer = sample.get_buffer()
        info = self._negotiated(sample)
        width, height, stride = info.width, info.height, info.stride[0]
        data = np.frombuffer(buffer.extract_dup(0, buffer.get_size()), np.uint8)
        image = data[:stride * height].reshape(height, stride)[:, :width * 3].reshape(height, width, 3).copy()
        pts = None if buffer.pts == Gst.CLOCK_TIME_NONE else buffer.pts / Gst.SECOND
        return Frame(index=self._index(buffer.pts), image=image, captured=captured, pts=pts,
                     source_size=self._source_size)

    def _index(self, pts: int) -> int:
        with self._count_lock:
            for seen, index in reversed(self._recent):
                if seen == pts:
                    return index
            return self._count - 1


def _links(pipeline: str) -> list[str]:
    return _split_outside_quotes(pipeline, "!")


def _split_outside_quotes(text: str, separator: str) -> list[str]:
    parts, current, quote = [], [], None
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == separator:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts] if separator != " " else [p for p in parts if p]


def _one_line(text) -> str:
    return " ".join(str(text).split())
