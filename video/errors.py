"""Errors of ``orinkit.video``, grouped by cause.

::

    VideoError
    ├── SourceError                 a source cannot be used as given (exit 4)
    │   ├── UnsupportedSourceError  a URI scheme orinkit does not read, or an option that does not apply to it
    │   ├── SourceNotFoundError     no such file, folder or device
    │   └── NotAVideoError          the file or folder holds no decodable video or images
    ├── SourceUnreachableError      a network source did not answer (host down, refused, timed out) (exit 6)
    ├── SourceLostError             a source that was open failed while reading (exit 6); live ones are reopened
    │   └── SourceStalledError      no frame within the read timeout (a frozen camera or server)
    ├── MissingElementError         a GStreamer element the pipeline needs is not installed (exit 3)
    ├── GStreamerMissingError       python3-gi is there but GStreamer's introspection data is not (exit 3; also a
    │                               MissingExtraError, as a missing python3-gi is)
    └── SinkError                   an output (MP4, JSON lines, live view) failed; that sink is dropped (exit 6)
        └── BadOutputError          an output path that cannot be written as given (exit 4)
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, EXIT_MISSING, EXIT_SERVER, MissingExtraError, OrinkitError


class VideoError(OrinkitError):
    exit_code = EXIT_SERVER


class SourceError(VideoError):
    exit_code = EXIT_BAD_INPUT


class UnsupportedSourceError(SourceError):
    pass


class SourceNotFoundError(SourceError):
    pass


class NotAVideoError(SourceError):
    pass


class SourceUnreachableError(VideoError):
    pass


class SourceLostError(VideoError):
    pass


class SourceStalledError(SourceLostError):
    pass


class MissingElementError(VideoError):
    exit_code = EXIT_MISSING

    def __init__(self, element: str, *, hint: str) -> None:
        super().__init__(f"the GStreamer element '{element}' is not installed", hint=hint)
        self.element = element


class GStreamerMissingError(MissingExtraError, VideoError):
    """``gi`` imports but ``gi.require_version('Gst', '1.0')`` fails: GStreamer's typelibs are not installed."""

    def __init__(self, namespace: str, *, hint: str) -> None:
        OrinkitError.__init__(self, f"GStreamer is not installed for Python: python3-gi is there, but not the "
                                    f"introspection data of {namespace} 1.0", hint=hint)
        self.module, self.namespace = "gi", namespace


class SinkError(VideoError):
    pass


class BadOutputError(SinkError):
    """An output path that cannot be written as given (its folder is missing, a wrong suffix): bad input."""

    exit_code = EXIT_BAD_INPUT
