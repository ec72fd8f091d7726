"""Faults a device meets, measured on real local tritonservers: restarts under load, killed deploys, racing
deploys, oversized requests.

    python benchmarks/faults.py [--threads 8] [--trials 10] [--restarts 3] [--restart-only]

1. restart under load: clients with DEFAULT settings (plain gRPC, and system shared memory) keep calling while
   the server stops and starts again on the same ports: failed calls, the longest call against the deadline,
   the time from the server's return to the last client's first answer, and where the time of each call that
   rode through a restart went (restart_trace.py: the server's own stop and start from its log, then the
   client's reconnect, readiness probe, retry and answer), median and max per phase. The client as it was
   before issue 24 ("before") and with only the new reconnect options ("cap only") take turns with today's on
   one server, so that all meet the same conditions;
2. deploys of a version that cannot load, SIGKILLed at random moments (placing it, or while the server loads
   it): the next start (edge-serve's preparation, then the server) must serve the old version every time;
3. two deploys of one model started together: never two successes on one version number;
4. a 200 MB request and a 12000x12000 PNG: refused before anything is decoded, the server's memory (RSS of
   tritonserver and its stubs) within 10 % of its baseline; beside it, the same 200 MB sent with the client's
   limit switched off, to show what the limit saves.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from client_fixtures import build_client_repository  # noqa: E402
from restart_trace import (  # noqa: E402
    OLD_CHANNEL_OPTIONS,
    Restart,
    Trace,
    log_moments,
    old_client_class,
    phases,
    table,
    traced,
)

from orinkit.client import Client  # noqa: E402
from orinkit.repo.add import add_model  # noqa: E402
from orinkit.repo.journal import (  # noqa: E402
    prepare_start,
    read_journal,  # noqa: E402
    record_loaded,
)
from orinkit.repo.layout import version_folders  # noqa: E402
from orinkit.repo.steps import ImagePreprocess, add_step  # noqa: E402
from orinkit.server import (  # noqa: E402
    ServerOptions,
    TritonProcess,
    build_command,
    live_group_members,
    locate_tritonserver,  # noqa: E402
)
from orinkit.server.errors import ServerStartError  # noqa: E402
from orinkit.server.local import start_on_free_ports  # noqa: E402
from orinkit.server.ports import free_ports  # noqa: E402

BIN = Path(sys.executable).parent
# The restart scenario's clients: orinkit's as it was before issue 24 (selectable here only), and as it is.
# "cap only": the new reconnect options with the old probing, to tell the two changes apart.
VARIANTS = (("before", {"channel_options": OLD_CHANNEL_OPTIONS, "client_class": old_client_class}),
            ("cap only", {"client_class": old_client_class}),
            ("after", None))
X = np.arange(6, dtype=np.float32).reshape(2, 3)


def _server(repository: Path, ports, log: Path, **options) -> TritonProcess:
    http, grpc, metrics = ports
    return TritonProcess(build_command(locate_tritonserver(), ServerOptions(
        repository=repository, http_port=http, grpc_port=grpc, metrics_port=metrics, **options)), log=log)


class _Load:
    """``threads`` clients of one variant, each calling in its own thread while started: one restart at a time."""

    def __init__(self, url: str, threads: int, shared_memory, settings) -> None:
        settings = dict(settings or {})
        make = settings.pop("client_class", lambda: Client)()
        self.traces = [Trace() for _ in range(threads)]
        self.clients = [traced(make(url, "plus_one", shared_memory=shared_memory, **settings), trace)
                        for trace in self.traces]
        self.spans = [[] for _ in range(threads)]  # (start, end, answered) of every call
        self.failures, self.restarts, self.recovered, self.downs = [], [], [], []
        self._stop, self._workers = threading.Event(), []

    def _loop(self, index: int) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.clients[index](X)
                answered = True
            except Exception as exc:  # noqa: BLE001 - counted
                self.failures.append(exc)
                answered = False
            self.spans[index].append((started, time.monotonic(), answered))

    def start(self) -> None:
        self._stop.clear()
        self._workers = [threading.Thread(target=self._loop, args=(i,)) for i in range(len(self.clients))]
        for worker in self._workers:
            worker.start()

    def stop(self) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join()

    def summary(self) -> dict:
        durations = [end - start for spans in self.spans for start, end, _ in spans]
        calls = [p for restart in self.restarts for trace, spans in zip(self.traces, self.spans)
                 if (p := phases(trace, [(a, b) for a, b, _ in spans], restart)) is not None]
        return {"calls": len(durations), "failed": len(self.failures), "longest_call_s": max(durations),
                "deadline_s": self.clients[0].timeout_s, "server_down_s": max(self.downs),
                "recovered_s": max(self.recovered) if self.recovered and None not in self.recovered else None,
                "first_failure": repr(self.failures[0]) if self.failures else None, "phases": calls}


def restart_under_load(work: Path, threads: int, shared_memory, *, variants=(("now", None),),
                       rounds: int = 1) -> dict:
    """For each variant (a label and its Client settings; None: the defaults), ``threads`` clients calling while
    the server restarts on the same ports, ``rounds`` times, the variants taking turns on one server so that
    they meet the same conditions; every call that rode through a restart is split into phases (restart_trace).
    The result: a summary per variant, and how often the server crashed while starting (it was started again)."""
    repository = build_client_repository(work / f"restart-{shared_memory}")
    ports = free_ports(3)
    logs = [work / f"restart-{shared_memory}-0.log"]
    server = _server(repository, ports, logs[0]).start()
    loads = {label: _Load(server.command.grpc_url, threads, shared_memory, settings) for label, settings in variants}
    crashed_starts = 0
    try:
        for _ in range(rounds):
            for load in loads.values():
                load.start()
                try:
                    time.sleep(1.0)
                    sigterm = time.monotonic()
                    server.stop()
                    exited = time.monotonic()
                    logs.append(work / f"restart-{shared_memory}-{len(logs)}.log")
                    try:
                        server = _server(repository, ports, logs[-1]).start()
                    except ServerStartError:  # tritonserver 2.51 aborts now and then while starting (EBADF)
                        crashed_starts += 1
                        server = _server(repository, ports, logs[-1]).start()
                    back = time.monotonic()
                    refusing = log_moments(logs[-2], "Waiting for in-flight requests")
                    listening = log_moments(logs[-1], "Started GRPCInferenceService")
                    load.restarts.append(Restart(sigterm, refusing[-1] if refusing else sigterm, exited,
                                                 listening[-1]))
                    load.downs.append(back - sigterm)
                    time.sleep(3.0)
                finally:
                    load.stop()
                firsts = [next((end for _, end, ok in spans if ok and end > back), None) for spans in load.spans]
                load.recovered.append(None if None in firsts else max(firsts) - back)
    finally:
        for load in loads.values():
            load.stop()
            for client in load.clients:
                client.close()
        server.stop()
    return {"variants": {label: load.summary() for label, load in loads.items()}, "crashed_starts": crashed_starts}


def killed_deploys(work: Path, trials: int) -> dict:
    import torch
    from torch_models import Affine, export

    good = export(Affine(1.0), torch.randn(1, 4), work / "affine1.onnx")
    broken = work / "broken.onnx"
    import onnx

    model = onnx.load(str(export(Affine(2.0), torch.randn(1, 4), work / "affine2.onnx")))
    model.graph.node[-1].domain, model.graph.node[-1].op_type = "com.example.orinkit", "NoRuntimeHasThis"
    del model.graph.node[-1].attribute[:]
    model.opset_import.append(onnx.helper.make_opsetid("com.example.orinkit", 1))
    onnx.save(model, str(broken))
    rng = random.Random(0)
    served_old, moments = 0, []
    for trial in range(trials):
        repository = work / f"killed-{trial}"
        add_model(repository, good, name="affine", runtime="python-onnxruntime")
        server = start_on_free_ports(repository, work / f"k{trial}.log", model_control_mode="explicit",
                                     load_models=("affine",))
        record_loaded(repository, server.command.http_url)
        deploy = subprocess.Popen([str(BIN / "edge-repo"), "deploy", "affine", str(broken), "--repo",
                                   str(repository), "--url", server.command.grpc_url],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        moment = rng.uniform(0.0, 2.5)
        time.sleep(moment)
        deploy.send_signal(signal.SIGKILL)
        deploy.wait()
        moments.append(round(moment, 2))
        server.stop()
        prepare_start(repository)
        restarted = start_on_free_ports(repository, work / f"r{trial}.log", model_control_mode="explicit",
                                        load_models=("affine",))
        try:
            with Client(restarted.command.grpc_url, "affine") as client:
                out = client(np.ones((1, 4), np.float32))
            served_old += bool(np.allclose(out, 2.0))  # x * 1 + 1 with the old version
        finally:
            restarted.stop()
        assert sorted(version_folders(repository / "affine"))[-1] == 1 or 2 in read_journal(
            repository / "affine").proven
    return {"trials": trials, "next_start_served_the_old_version": served_old, "kill_moments_s": moments}


def racing_deploys(work: Path, trials: int) -> dict:
    import torch
    from torch_models import Affine, export

    artifacts = [export(Affine(float(s)), torch.randn(1, 4), work / f"race{s}.onnx") for s in (1, 2, 3)]
    wins = refused = shared_numbers = 0
    for trial in range(trials):
        repository = work / f"race-{trial}"
        add_model(repository, artifacts[0], name="affine", runtime="python-onnxruntime")
        racers = [subprocess.Popen([str(BIN / "edge-repo"), "deploy", "affine", str(a), "--repo", str(repository)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for a in artifacts[1:]]
        outcomes = [(r.wait(), r.stdout.read()) for r in racers]
        numbers = [int(out.split("version ")[1].split()[0]) for code, out in outcomes if code == 0]
        wins += len(numbers)
        refused += sum(code == 5 for code, _ in outcomes)
        shared_numbers += len(numbers) - len(set(numbers))
    return {"trials": trials, "successes": wins, "refused_busy": refused, "successes_sharing_a_number": shared_numbers}


def _rss(pid: int) -> int:
    total = 0
    for member in live_group_members(pid):
        try:
            total += int(Path(f"/proc/{member}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            continue
    return total


def oversized(work: Path) -> dict:
    repository = work / "oversized"
    add_step(repository, ImagePreprocess(width=224, height=224), name="pre", max_batch_size=1)
    results = {}
    for label, limit in (("with the client's limit (64 MiB)", "default"), ("with the limit switched off", None)):
        server = start_on_free_ports(repository, work / f"{label[:8]}.log")
        try:
            with Client(server.command.grpc_url, "pre", max_request_bytes=64 << 20 if limit else None) as client:
                small = io.BytesIO()
                from PIL import Image

                Image.new("RGB", (640, 360), (90, 90, 90)).save(small, "JPEG")
                client(np.array([small.getvalue()], dtype=object))
                baseline = _rss(server.pid)
                outcomes = {}
                for name, payload in (("200 MB request", b"\0" * (200 << 20)), ("12000x12000 PNG", _bomb())):
                    started = time.monotonic()
                    try:
                        client(np.array([payload], dtype=object))
                        outcomes[name] = "accepted"
                    except Exception as exc:  # noqa: BLE001 - the refusal is the measurement
                        outcomes[name] = f"refused in {time.monotonic() - started:.2f} s ({type(exc).__name__})"
                after = _rss(server.pid)
            results[label] = {"baseline_mb": baseline / 2**20, "after_mb": after / 2**20,
                              "growth": after / baseline - 1, **outcomes}
        finally:
            server.stop()
    return results


def _bomb() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("L", (12000, 12000)).save(buffer, "PNG")
    return buffer.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--restarts", type=int, default=3, help="Server restarts per variant and client kind.")
    parser.add_argument("--restart-only", action="store_true", help="Run the restart scenario alone.")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="orinkit-faults-"))
    try:
        print(f"1. restart under load ({args.threads} threads, {args.restarts} restarts per variant, the variants "
              "taking turns on one server), clients with default settings (before: orinkit's client before issue "
              "24, rebuilt by the benchmark):")
        for shm in (None, "system"):
            rows = {}
            result = restart_under_load(work, args.threads, shm, variants=VARIANTS, rounds=args.restarts)
            for label, r in result["variants"].items():
                kind = f"{label}, {'shm' if shm else 'gRPC'}"
                rows[kind] = r["phases"]
                recovered = "n/a" if r["recovered_s"] is None else f"{r['recovered_s']:.2f} s"
                print(f"   {kind:16} {r['calls']} calls, {r['failed']} failed, longest call "
                      f"{r['longest_call_s']:.2f} s (deadline {r['deadline_s']:g} s), server down up to "
                      f"{r['server_down_s']:.2f} s, every client answered again within {recovered} of its return"
                      + (f"; first failure {r['first_failure']}" if r["first_failure"] else ""), flush=True)
            if result["crashed_starts"]:
                print(f"   (the server crashed while starting {result['crashed_starts']} time(s) and was started "
                      "again)")
            print("   where the time of each call that rode through a restart went:")
            print(table(rows), flush=True)
        if args.restart_only:
            return 0
        r = killed_deploys(work, args.trials)
        print(f"2. deploy of an unloadable version killed at random moments ({r['kill_moments_s']} s): the next "
              f"start served the old version {r['next_start_served_the_old_version']} of {r['trials']} times")
        r = racing_deploys(work, args.trials)
        print(f"3. two deploys of one model at once, {r['trials']} times: {r['successes']} succeeded, "
              f"{r['refused_busy']} refused as busy, {r['successes_sharing_a_number']} successes shared a number")
        print("4. oversized requests to an image step (server memory = RSS of tritonserver and its stubs):")
        for label, r in oversized(work).items():
            print(f"   {label}: 200 MB request {r['200 MB request']}; 12000x12000 PNG {r['12000x12000 PNG']}; "
                  f"memory {r['baseline_mb']:.0f} -> {r['after_mb']:.0f} MB ({r['growth']:+.1%})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
