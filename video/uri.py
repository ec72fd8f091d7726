"""One URI scheme for every video source, as jetson-utils spells it: what a SOURCE argument names, and which
reader opens it. Parsing checks only the spelling; whether the file, host or camera is there is found on open."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from orinkit.video.errors import SourceNotFoundError, UnsupportedSourceError

SCHEMES = ("file://", "rtsp://", "rtsps://", "v4l2://", "csi://", "gst://")
USAGE = ("a video file or image folder path, file://PATH, rtsp://HOST[:PORT]/PATH, v4l2:///dev/videoN, csi://N or "
         "gst://PIPELINE")
# Suffixes read as images when a folder is the source (Pillow decodes them).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


@dataclass(frozen=True)
class SourceSpec:
    """``kind`` is file, folder, rtsp, v4l2, csi or gst; ``target`` what the reader opens (a path, the URL, the
    device path, the sensor id, the pipeline text). Live sources run at their own rate: frames the model has no time
    for are dropped, and the source is reopened when it ends or fails."""

    uri: str
    kind: str
    target: str

    @property
    def live(self) -> bool:
        if self.kind == "gst":
            return not self.target.lstrip().startswith(("filesrc", "multifilesrc"))
        return self.kind in ("rtsp", "v4l2", "csi")

    @property
    def name(self) -> str:
        """A short name for reports: the URI without credentials."""
        if self.uri.lower().startswith(("rtsp://", "rtsps://")):  # also the hardware decoder's gst spec of one
            parts = urlsplit(self.uri)
            host = parts.hostname or ""
            return f"{parts.scheme}://{host}{':' + str(parts.port) if parts.port else ''}{parts.path}"
        return self.uri


def parse_source(uri: str) -> SourceSpec:
    """The source a URI (or plain path) names; UnsupportedSourceError for a scheme orinkit does not read."""
    text = os.fspath(uri).strip()
    if not text:
        raise UnsupportedSourceError("the video source is empty", hint=f"give {USAGE}")
    scheme, sep, rest = text.partition("://")
    if not sep:
        return _path_spec(text, text)
    scheme = scheme.lower()
    if scheme == "file":
        return _path_spec(text, unquote(urlsplit(text).path) if rest.startswith("/") else unquote(rest))
    if scheme in ("rtsp", "rtsps"):
        if not urlsplit(text).hostname:
            raise UnsupportedSourceError(f"'{text}' names no host", hint="write rtsp://HOST[:PORT]/PATH")
        return SourceSpec(text, "rtsp", text)
    if scheme == "v4l2":
        device = rest if rest.startswith("/") else "/" + rest
        if not device.startswith("/dev/"):
            raise UnsupportedSourceError(f"'{text}' names no device", hint="write v4l2:///dev/video0")
        return SourceSpec(text, "v4l2", device)
    if scheme == "csi":
        if not rest.partition("?")[0].isdigit():
            raise UnsupportedSourceError(f"'{text}' names no sensor number",
                                         hint="write csi://0 (the sensor id), or csi://0?width=1920&height=1080&fps=30")
        return SourceSpec(text, "csi", rest)
    if scheme == "gst":
        if not rest.strip():
            raise UnsupportedSourceError("gst:// names no pipeline",
                                         hint="write gst://'rtspsrc location=... ! ... ! appsink' in quotes")
        return SourceSpec(text, "gst", rest)
    raise UnsupportedSourceError(f"the scheme '{scheme}://' is not a video source orinkit reads",
                                 hint=f"give {USAGE}")


def _path_spec(uri: str, path: str) -> SourceSpec:
    if Path(path).is_dir():
        return SourceSpec(uri, "folder", path)
    if not Path(path).exists():
        raise SourceNotFoundError(f"no video file or image folder at {path}",
                                  hint=f"check the path, or give {USAGE}")
    return SourceSpec(uri, "file", path)
