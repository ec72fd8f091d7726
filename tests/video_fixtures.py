"""A real RTSP camera for the video tests and benchmarks: tests/rtsp_camera.py (gst-rtsp-server) under the system
Python, on a free port of 127.0.0.1, every frame stamped with the wall clock (orinkit.video.stamp.read_stamp).

Load them in a test module (pytest registers the plugin once per session, whichever module names it first)::

    pytest_plugins = ["video_fixtures"]

``rtsp_camera`` (per test) is a started :class:`RtspCamera`; ``rtsp_cameras`` (per test) starts more, each on its
own port. Both stop their cameras at teardown whatever the test did (frozen, killed, failed). Benchmarks use
:class:`RtspCamera` directly, as a context manager.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

SYSTEM_PYTHON = os.environ.get("ORINKIT_SYSTEM_PYTHON", "/usr/bin/python3")
CAMERA_SCRIPT = Path(__file__).resolve().parent / "rtsp_camera.py"
_PROBE = ("import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0'); "
          "from gi.repository import Gst, GstRtspServer")


@functools.cache
def camera_missing() -> str | None:
    """Why the test camera cannot run here, or None when it can."""
    if not Path(SYSTEM_PYTHON).exists():
        return f"no system Python at {SYSTEM_PYTHON} for the RTSP test camera"
    probe = subprocess.run([SYSTEM_PYTHON, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["failed"])[-1]
        return (f"the RTSP test camera needs gst-rtsp-server for {SYSTEM_PYTHON} ({reason}); "
                "apt install python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly")
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RtspCamera:
    """One test camera process. ``start()`` serves (again, on the same port after ``kill()``), ``freeze()`` and
    ``thaw()`` stop and continue it (SIGSTOP/SIGCONT: its connections stay open and silent, as a hung camera's do),
    ``kill()`` ends it at once (its connections close), ``stop()`` ends it for good."""

    def __init__(self, port: int | None = None, size: tuple[int, int] = (640, 360), fps: int = 30,
                 bitrate_kbps: int = 2000) -> None:
        self.port = port or free_port()
        self.size, self.fps, self.bitrate_kbps = size, fps, bitrate_kbps
        self.url = f"rtsp://127.0.0.1:{self.port}/cam"
        self.process: subprocess.Popen | None = None
        self.frozen = False
        self._log = Path(tempfile.mkstemp(prefix="rtsp-camera-", suffix=".log")[1])

    def start(self, timeout_s: float = 30.0) -> RtspCamera:
        if self.running:
            return self
        command = [SYSTEM_PYTHON, str(CAMERA_SCRIPT), "--port", str(self.port), "--width", str(self.size[0]),
                   "--height", str(self.size[1]), "--fps", str(self.fps), "--bitrate", str(self.bitrate_kbps),
                   "--exit-with-stdin"]
        with self._log.open("wb") as log:
            # stdin stays open while this object lives: the camera ends when it closes (runner died or stop()).
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
        self.frozen = False
        deadline = time.monotonic() + timeout_s
        while b"READY" not in self._log.read_bytes():
            if self.process.poll() is not None:
                raise RuntimeError(f"the RTSP test camera exited with {self.process.returncode}: {self.log()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the RTSP test camera did not serve within {timeout_s:.0f} s: {self.log()}")
            time.sleep(0.05)
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def freeze(self) -> None:
        self.process.send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)
        self.frozen = False

    def kill(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()  # SIGKILL works on a stopped process too
        self.process.wait(timeout=10)
        self._close_stdin()
        self.frozen = False

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            if self.frozen:
                self.thaw()
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._close_stdin()
        self.frozen = False

    def log(self) -> str:
        """The camera's output (GStreamer's warnings land here), last lines first cut to one line."""
        text = self._log.read_text(errors="replace").strip() if self._log.exists() else ""
        return " | ".join(text.splitlines()[-5:]) or "(no output)"

    def _close_stdin(self) -> None:
        if self.process is not None and self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()

    def __enter__(self) -> RtspCamera:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        self._log.unlink(missing_ok=True)


@pytest.fixture
def rtsp_cameras():
    """Start cameras: ``rtsp_cameras(size=(640, 360), fps=30)`` returns a started :class:`RtspCamera`."""
    reason = camera_missing()
    if reason:
        pytest.skip(reason)
    started: list[RtspCamera] = []

    def start(**options) -> RtspCamera:
        camera = RtspCamera(**options)
        started.append(camera)
        return camera.start()

    try:
        yield start
    finally:
        for camera in started:
            print(f"{camera.url} said: {camera.log()}")  # pytest shows it with a failing test's report
            camera.__exit__(None, None, None)


@pytest.fixture
def rtsp_camera(rtsp_cameras) -> RtspCamera:
    """A started 640x360 30 fps camera at ``rtsp_camera.url``."""
    return rtsp_cameras()


class CollectSink:
    """A sink keeping what the pipeline's sink thread gives it (the contract: write, stats, close); ``keep`` says
    what of each result is kept."""

    name = "collect"

    def __init__(self) -> None:
        self.results = []
        self.lock = threading.Lock()

    def keep(self, result):
        return result

    def write(self, result) -> None:
        with self.lock:
            self.results.append(self.keep(result))

    def stats(self, snapshot) -> None:
        pass

    def close(self) -> None:
        pass
