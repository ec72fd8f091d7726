"""A live RTSP test camera on 127.0.0.1: ``rtsp://127.0.0.1:PORT/cam``, H.264, every frame stamped with the wall
clock (``time.time()``) at the moment it is made, drawn by orinkit.video.stamp so readers get true capture→answer
latency from the pixels.

Run it with the system Python, which has GStreamer's bindings and gst-rtsp-server (Debian: python3-gi,
gir1.2-gst-rtsp-server-1.0, gstreamer1.0-plugins-{base,good,ugly}) but no numpy::

    /usr/bin/python3 tests/rtsp_camera.py --port 8554 [--width 640 --height 360 --fps 30]

It prints ``READY rtsp://127.0.0.1:PORT/cam`` once it serves. One shared pipeline feeds every client. The encoder
runs without sliced threads and with one thread: with slices, PyAV decodes the upper part of non-key frames as
garbage (found on loopback here), and it adds about 60 ms of delay. SIGTERM or SIGINT end it; with
``--exit-with-stdin`` it also ends when its stdin closes, so a test runner that dies leaves no camera behind.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import threading
import time
from pathlib import Path

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402

STAMP_FILE = Path(__file__).resolve().parent.parent / "video" / "stamp.py"
STRIPES = 8


def load_stamp():
    # By path: importing orinkit.video would import numpy, which the system Python lacks.
    spec = importlib.util.spec_from_file_location("orinkit_video_stamp", STAMP_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Painter:
    """Frames in pure Python: the stamp band, then horizontal stripes of colour gradients scrolling at different
    speeds, so the encoder sees motion in every frame as it would from a real camera."""

    def __init__(self, width: int, height: int) -> None:
        self.stamp = load_stamp()
        self.width, self.height = width, height
        self.body_top = self.stamp.band_height(height)
        body = height - self.body_top
        self.stripe_rows = [body * (k + 1) // STRIPES - body * k // STRIPES for k in range(STRIPES)]
        self.patterns = [self._pattern(k) for k in range(STRIPES)]

    def _pattern(self, k: int) -> bytes:
        # Two periods of one stripe's row, so any scroll offset is one slice.
        out = bytearray()
        for x in range(2 * self.width):
            phase = 2 * math.pi * x / self.width
            out += bytes(int(127.5 + 127 * math.sin((k + 1) * phase + shift)) for shift in (0.0, 2.1, 4.2))
        return bytes(out)

    def frame(self, t: float, number: int) -> bytes:
        parts = [self.stamp.band_bytes(t, self.width, self.height)]
        row = 3 * self.width
        for k, rows in enumerate(self.stripe_rows):
            offset = 3 * ((number * (k + 1) * 3) % self.width)
            parts.append(self.patterns[k][offset:offset + row] * rows)
        return b"".join(parts)


class Camera:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.painter = Painter(args.width, args.height)
        self.appsrc = None
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def launch(self) -> str:
        a = self.args
        caps = f"video/x-raw,format=BGR,width={a.width},height={a.height},framerate={a.fps}/1"
        return (f"( appsrc name=cam is-live=true do-timestamp=true format=time caps={caps} ! videoconvert ! "
                f"video/x-raw,format=I420 ! x264enc tune=zerolatency speed-preset=ultrafast sliced-threads=false "
                f"threads=1 key-int-max={a.key_interval} bitrate={a.bitrate} ! "
                f"rtph264pay name=pay0 pt=96 config-interval=-1 )")

    def on_media_configure(self, _factory, media) -> None:
        appsrc = media.get_element().get_by_name("cam")
        media.connect("unprepared", self.on_unprepared, appsrc)
        with self.lock:
            self.appsrc = appsrc

    def on_unprepared(self, _media, appsrc) -> None:
        with self.lock:
            if self.appsrc is appsrc:
                self.appsrc = None

    def push_frames(self) -> None:
        period = 1.0 / self.args.fps
        due = time.monotonic()
        number = 0
        while not self.stopped.is_set():
            wait = due - time.monotonic()
            if wait > 0:
                self.stopped.wait(wait)
            with self.lock:
                appsrc = self.appsrc
            # Only once the media plays: a buffer timestamped while it prerolls (base time not yet set) carries
            # the clock's absolute time, and the server's sink waits for that moment: a camera stuck from its start.
            if appsrc is not None and appsrc.get_state(0)[1] == Gst.State.PLAYING:
                now = time.time()  # the moment the frame is made: what readers compare their clock with
                buffer = Gst.Buffer.new_wrapped(self.painter.frame(now, number))
                buffer.duration = int(Gst.SECOND * period)
                appsrc.emit("push-buffer", buffer)
            number += 1
            due += period
            if time.monotonic() - due > period:  # after a freeze (SIGSTOP): carry on at the rate, no burst
                due = time.monotonic()

    def serve(self) -> int:
        Gst.init(None)
        server = GstRtspServer.RTSPServer()
        server.set_address("127.0.0.1")
        server.set_service(str(self.args.port))
        factory = GstRtspServer.RTSPMediaFactory()
        factory.set_launch(self.launch())
        factory.set_shared(True)
        factory.connect("media-configure", self.on_media_configure)
        server.get_mount_points().add_factory("/cam", factory)
        if server.attach(None) == 0:
            print(f"cannot serve on 127.0.0.1:{self.args.port} (port in use?)", file=sys.stderr, flush=True)
            return 1
        loop = GLib.MainLoop()
        for signum in (15, 2):  # SIGTERM, SIGINT: GLib's handler works while the loop sits in C
            GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signum, lambda: loop.quit() or False)
        if self.args.exit_with_stdin:
            # A watch in the loop, not a thread: a thread blocked on stdin aborts the interpreter's shutdown.
            GLib.io_add_watch(sys.stdin.fileno(), GLib.PRIORITY_DEFAULT, GLib.IO_IN | GLib.IO_HUP | GLib.IO_ERR,
                              self.on_stdin, loop)
        pusher = threading.Thread(target=self.push_frames, daemon=True)
        pusher.start()
        print(f"READY rtsp://127.0.0.1:{self.args.port}/cam", flush=True)
        try:
            loop.run()
        finally:
            self.stopped.set()
            pusher.join(timeout=2)
        return 0

    def on_stdin(self, fd, _condition, loop) -> bool:
        if os.read(fd, 4096):
            return True
        loop.quit()
        return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--bitrate", type=int, default=2000, help="kbit/s")
    parser.add_argument("--key-interval", type=int, default=30, help="frames between key frames")
    parser.add_argument("--exit-with-stdin", action="store_true", help="end when stdin closes")
    return Camera(parser.parse_args(argv)).serve()


if __name__ == "__main__":
    sys.exit(main())
