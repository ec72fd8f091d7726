"""The reader behind each kind of URI: PyAV for files, RTSP and V4L2; GStreamer for csi:// and gst:// (and for
RTSP with the Orin's hardware decoder); Pillow for image folders."""

from __future__ import annotations

from orinkit.video.errors import UnsupportedSourceError
from orinkit.video.uri import SourceSpec, parse_source

DECODERS = ("auto", "pyav", "gstreamer")


def open_source(source: str | SourceSpec, *, size: tuple[int, int] | None = None, read_timeout_s: float = 3.0,
                decoder: str = "auto"):
    """A reader for ``source`` (not yet opened). ``decoder="gstreamer"`` reads an rtsp:// stream through the
    Orin's hardware decoder (nvv4l2decoder); it applies to RTSP only."""
    spec = source if isinstance(source, SourceSpec) else parse_source(source)
    if decoder not in DECODERS:
        raise UnsupportedSourceError(f"decoder '{decoder}' is unknown", hint=f"use one of {', '.join(DECODERS)}")
    if decoder == "gstreamer" and spec.kind != "rtsp":
        raise UnsupportedSourceError(f"decoder 'gstreamer' applies to rtsp:// sources, not {spec.kind}",
                                     hint="csi:// and gst:// always use GStreamer; files and v4l2 use PyAV")
    if spec.kind in ("csi", "gst") or decoder == "gstreamer":
        from orinkit.video.gst_source import GstSource

        if decoder == "gstreamer":
            from orinkit.video.gst_source import rtsp_hw_pipeline

            hardware = SourceSpec(spec.uri, "gst", rtsp_hw_pipeline(spec.target, size))
            return GstSource(hardware, size=size, read_timeout_s=read_timeout_s)
        return GstSource(spec, size=size, read_timeout_s=read_timeout_s)
    if spec.kind == "folder":
        from orinkit.video.folder_source import FolderSource

        return FolderSource(spec, size=size)
    from orinkit.video.pyav_source import PyAVSource

    return PyAVSource(spec, size=size, read_timeout_s=read_timeout_s)
