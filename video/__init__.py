"""Video into a served model: sources by URI, a pipeline with declared frame-dropping policies, reconnects, sinks.

``orinkit.video`` needs PyAV (``pip install 'orinkit[video]'``) for files, RTSP and V4L2, and GStreamer's Python
bindings (JetPack's python3-gi) for ``csi://`` and ``gst://``; both are imported only when a source needs them.
"""

from orinkit.video.errors import (
    BadOutputError,
    MissingElementError,
    NotAVideoError,
    SinkError,
    SourceError,
    SourceLostError,
    SourceNotFoundError,
    SourceStalledError,
    SourceUnreachableError,
    UnsupportedSourceError,
    VideoError,
)
from orinkit.video.frames import Frame, Result

__all__ = [
    "BadOutputError",
    "Frame",
    "MissingElementError",
    "NotAVideoError",
    "Result",
    "SinkError",
    "SourceError",
    "SourceLostError",
    "SourceNotFoundError",
    "SourceStalledError",
    "SourceUnreachableError",
    "UnsupportedSourceError",
    "VideoError",
]
