"""``edge-stream``: video sources into a served model at stream rate, answers as JSON lines and an annotated MP4."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import click

from orinkit.cli.base import CommandError, OrinkitCommand, url_option
from orinkit.core.errors import EXIT_INTERRUPTED, OrinkitError
from orinkit.video.errors import SourceError, SourceLostError, VideoError
from orinkit.video.reader import POLICIES
from orinkit.video.sources import DECODERS

PROGRESS_EVERY_S = 5.0


def summary_lines(stats: dict) -> list[str]:
    latency = stats["latency_ms_overall"]
    lines = [f"read {stats['read']}, answered {stats['answered']}, dropped {stats['dropped']}, "
             f"failed {stats['failed']} in {stats['elapsed_s']:.1f} s: {stats['fps_overall']:.1f} answers/s; "
             f"capture→answer p50 {_ms(latency['p50'])}, p95 {_ms(latency['p95'])}, p99 {_ms(latency['p99'])}"]
    if len(stats["sources"]) > 1:
        for name, source in stats["sources"].items():
            lines.append(f"  {name}: {source['state']}, read {source['read']}, answered {source['answered']}, "
                         f"dropped {source['dropped']}, reconnects {source['reconnects']}")
    return lines


def answer_lines(answers: dict[str, dict]) -> list[str]:
    """Each source adapter's summary, one line per source (the source named when there are several):
    ``tracks: disc 3, box 1``."""
    lines = []
    for name, summary in answers.items():
        parts = [f"{key}: {_figures(value)}" for key, value in summary.items()]
        prefix = f"  {name}: " if len(answers) > 1 else ""
        lines.append(prefix + "; ".join(parts))
    return lines


def _figures(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key} {_figures(item)}" for key, item in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(_figures(item) for item in value) or "none"
    return str(value)


def _ms(value) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _progress_line(stats: dict) -> str:
    latency = stats["latency_ms"]
    return (f"{stats['fps']:.1f} answers/s, capture→answer p50 {_ms(latency['p50'])} p95 {_ms(latency['p95'])}, "
            f"read {stats['read']}, answered {stats['answered']}, dropped {stats['dropped']}")


class _Progress:
    """A sink that prints a progress line every few seconds (stderr), so a long stream shows it is alive."""

    name = "progress"

    def __init__(self, echo) -> None:
        self.echo, self.last = echo, 0.0

    def write(self, result) -> None:
        pass

    def stats(self, snapshot: dict) -> None:
        import time

        if time.monotonic() - self.last >= PROGRESS_EVERY_S and snapshot["answered"]:
            self.last = time.monotonic()
            self.echo(_progress_line(snapshot))

    def close(self) -> None:
        pass


@click.command(cls=OrinkitCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option("--model", required=True, help="The served model (or ensemble), e.g. lane_detection.")
@url_option()
@click.option("--save", type=click.Path(dir_okay=False), default=None,
              help="Annotated H.264 MP4 of the answered frames (one source).")
@click.option("--results", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help="One JSON line per answered frame ('-' for stdout).")
@click.option("--frames", type=int, default=None, help="Stop after sending this many frames.")
@click.option("--in-flight", type=int, default=None,
              help="Requests in flight per source (default 1 for live sources: fresh answers; 2 for files).")
@click.option("--realtime", is_flag=True, help="Pace files to their timestamps (frames the model misses drop).")
@click.option("--policy", type=click.Choice(POLICIES), default=None,
              help="Frame policy: latest (live default) or every (files' default).")
@click.option("--read-timeout", type=float, default=3.0, show_default=True,
              help="Seconds without a frame before a live source counts as stalled and is reopened.")
@click.option("--max-reconnects", type=int, default=None, help="Give a live source up after this many failed "
              "reopens in a row (default: never).")
@click.option("--decoder", type=click.Choice(DECODERS), default="auto", show_default=True,
              help="gstreamer: RTSP through the Orin's hardware decoder (nvv4l2decoder).")
@click.option("--view", default=None, metavar="[HOST:]PORT",
              help="Serve the device page with a live view of the annotated frames on this address (off loopback "
                   "with a token, printed once).")
@click.option("--track/--no-track", default=None,
              help="Persistent ids for a detector's boxes, per source, and per-class counts of distinct tracks in the "
                   "summary [default: on for detectors; other models refuse either flag].")
@click.option("--quiet", is_flag=True, help="No progress lines (events and the summary still print).")
def main(sources, model, url, save, results, frames, in_flight, realtime, policy, read_timeout, max_reconnects,
         decoder, view, track, quiet) -> None:
    """Stream SOURCE (a video file, an image folder, file://, rtsp://, v4l2:///dev/videoN, csi://N or
    gst://PIPELINE; several for several cameras) into MODEL on a Triton server. Live sources keep only the newest
    frame and are reopened when they drop; files send every frame in order. Ctrl-C ends it with the files
    complete and prints the summary.

    Exit codes: 0 done, 3 a missing extra (PyAV, GStreamer), 4 bad input (a source, an output path, or an option
    the model does not take, such as --track for a model that is no detector), 6 the server or every source lost,
    130 interrupted."""
    echo = lambda message: click.echo(message, err=True)  # noqa: E731 - stdout may carry the JSON lines
    try:
        summary = _stream(sources, model, url, save, results, frames, in_flight, realtime, policy, read_timeout,
                          max_reconnects, decoder, view, quiet, echo, track=track)
    except OrinkitError as exc:
        raise CommandError(exc) from exc
    for line in summary_lines(summary.stats) + answer_lines(summary.answers):
        echo(line)
    for line in summary.errors:
        echo(f"error: {line}")
    if summary.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    failed = [r for r in summary.stats["sources"].values() if r["state"] == "failed"]
    if failed and len(failed) == len(summary.stats["sources"]):
        raise CommandError(every_source_failed(summary.source_errors))


def every_source_failed(errors: dict) -> VideoError:
    """The exit names the cause when the sources share one (lost cameras: exit 6), bad input otherwise."""
    if errors and all(isinstance(error, SourceLostError) for error in errors.values()):
        return SourceLostError("every source was lost", hint="see the errors above; check the cameras and network")
    return SourceError("every source failed", hint="see the errors above")


def _stream(sources, model, url, save, results, frames, in_flight, realtime, policy, read_timeout, max_reconnects,
            decoder, view, quiet, echo, *, track=None):
    from orinkit.video.pipeline import Pipeline
    from orinkit.video.sinks import check_output
    from orinkit.video.uri import parse_source

    # Everything that can be judged without the server is judged first: a typo costs no wait for the model.
    specs = [parse_source(source) for source in sources]
    if save and len(specs) > 1:
        raise SourceError("--save writes one source's video, and several sources are given",
                          hint="run one edge-stream per source to save each, or use --results for all")
    if max_reconnects is not None and max_reconnects < 0:
        raise SourceError(f"--max-reconnects {max_reconnects} is below 0", hint="give 0 or more")
    if save:
        check_output(save, "MP4", ".mp4")
    if results and results != "-":
        check_output(results, "JSON lines", ".jsonl", required=False)
    address = _view_address(view) if view else None
    # Only a flag the user gave is passed on: a detector tracks by default, and a model that does not track
    # refuses --track and --no-track alike rather than ignoring them.
    options = {} if track is None else {"track": track}
    with _connected(url, model, echo, options) as (client, adapter):
        pipeline = Pipeline(specs, client, adapter, in_flight=in_flight, frames=frames, policy=policy,
                            realtime=realtime, read_timeout_s=read_timeout, max_reconnects=max_reconnects,
                            decoder=decoder, on_event=lambda event: echo(event.text()),
                            on_sink_error=lambda name, error: echo(f"sink {name} dropped: {error}"))
        stops = _add_sinks(pipeline, adapter, save, results, address, url, quiet, echo)
        try:
            return pipeline.run()
        finally:
            for stop in stops:
                stop()


@contextlib.contextmanager
def _connected(url: str, model: str, echo, options: dict | None = None):
    """The client and the model's adapter (``options`` for it, e.g. ``track``); a line on stderr when the server
    keeps us waiting."""
    from orinkit.client import Client
    from orinkit.video.adapters import adapter_for

    with Client(url, model) as client:
        waiting = threading.Timer(2.0, lambda: echo(f"waiting for '{model}' on {url} (up to "
                                                    f"{client.ready_timeout_s:g} s): is tritonserver running there?"))
        waiting.daemon = True
        waiting.start()
        try:
            info = client.info
        finally:
            waiting.cancel()
        yield client, adapter_for(info, **(options or {}))


def _add_sinks(pipeline, adapter, save, results, address, url, quiet, echo) -> list:
    """Adds the outputs to ``pipeline`` and returns what stops them beyond the pipeline's close. The live view
    first (its port may be taken), the MP4 next (a temporary file until it is complete), the JSON lines last: an
    output that cannot start leaves none of the others behind."""
    from orinkit.video.sinks import JsonLinesSink

    made, stops = [], []
    try:
        if address is not None:
            live, stop = _view(address, url, adapter, echo)
            made.append(live)
            stops.append(stop)
        if save:
            from orinkit.video.mp4 import Mp4Sink

            made.append(Mp4Sink(save, draw=adapter.draw))
        if results:
            made.append(JsonLinesSink(sys.stdout if results == "-" else results))
    except BaseException:
        for sink in made:
            getattr(sink, "abort", sink.close)()
        for stop in stops:
            stop()
        raise
    if not quiet:
        made.append(_Progress(echo))
    pipeline.sinks.extend(made)
    return stops


def _view_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise SourceError(f"--view '{address}' is not [HOST:]PORT", hint="e.g. --view 8080 or --view 0.0.0.0:8080")
    return host or "127.0.0.1", int(port)


def _view(address: tuple[str, int], url: str, adapter, echo):
    from orinkit.ui.server import UiServer
    from orinkit.video.live import LiveView

    live = LiveView(draw=adapter.draw)
    # Off loopback the page needs a token: one is made and printed once (it is in no log or file).
    server = UiServer(url, host=address[0], port=address[1], live=live, generate_token=True).start()
    token = f"?token={server.token}" if server.token_generated else ""
    echo(f"live view on {server.address}{token}")
    return live, server.stop


def run() -> None:
    """The console script. After Ctrl-C or SIGTERM, once the outputs are complete and the summary printed, the
    process ends at once: a Ctrl-C that lands in a gRPC call (the wait for the model) leaves grpcio's channel state
    behind, and the interpreter's own exit then hung in its finaliser (2 runs in 6 measured here)."""
    try:
        main()
    except SystemExit as end:
        if end.code == EXIT_INTERRUPTED:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)
        raise


if __name__ == "__main__":
    run()
