"""orinkit's Client against plain tritonclient, measured side by side on the local tritonserver.

    python benchmarks/client.py [--calls 2000] [--frames 200] [--samples 400]

1. ``__call__`` median latency vs plain tritonclient on a small tensor (goal: at most 5% slower);
2. throughput with system shared memory vs plain gRPC for a 1x3x360x640 FP32 input;
3. ``map()`` throughput at concurrency 4 vs a sequential loop.
Both sides of each comparison run interleaved in the same process against the same server.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from client_fixtures import build_client_repository  # noqa: E402

from orinkit.client import Client  # noqa: E402
from orinkit.server.local import start_on_free_ports  # noqa: E402


def plain_call(client, model, name, array, datatype, output):
    tensor = grpcclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return client.infer(model, [tensor], outputs=[grpcclient.InferRequestedOutput(output)]).as_numpy(output)


def latency(url: str, calls: int) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ours, theirs = [], []
    with Client(url, "plus_one") as client, grpcclient.InferenceServerClient(url) as plain:
        for _ in range(50):  # warm both channels and the model
            client(x)
            plain_call(plain, "plus_one", "X", x, "FP32", "Y")
        sides = [(lambda: client(x), ours), (lambda: plain_call(plain, "plus_one", "X", x, "FP32", "Y"), theirs)]
        for call in range(calls):
            # Each side goes first on every other call: the one after a call finds the caches as that call left them.
            for run, times in sides if call % 2 else sides[::-1]:
                started = time.perf_counter()
                run()
                times.append(time.perf_counter() - started)
    a, b = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
    print(f"1. __call__ median latency, 2x3 FP32, {calls} calls each, interleaved, alternating which goes first:")
    print(f"   orinkit {a:.3f} ms, tritonclient {b:.3f} ms, ratio {a / b:.3f} (goal <= 1.05)")


def shared_memory(url: str, frames: int) -> None:
    frame = np.random.default_rng(0).random((1, 3, 360, 640), dtype=np.float32)
    timings = {"shared memory": [], "plain gRPC": []}
    with Client(url, "frame_stats", shared_memory="system", outputs=["MEANS"]) as shm, \
            grpcclient.InferenceServerClient(url) as plain:
        shm(frame)
        plain_call(plain, "frame_stats", "FRAME", frame, "FP32", "MEANS")
        for _ in range(frames):
            started = time.perf_counter()
            shm(frame)
            timings["shared memory"].append(time.perf_counter() - started)
            started = time.perf_counter()
            plain_call(plain, "frame_stats", "FRAME", frame, "FP32", "MEANS")
            timings["plain gRPC"].append(time.perf_counter() - started)
    rate = {k: len(v) / sum(v) for k, v in timings.items()}
    print(f"2. 1x3x360x640 FP32 frames ({frame.nbytes / 2**20:.1f} MiB), {frames} each, interleaved:")
    print(f"   shared memory {rate['shared memory']:.1f} frames/s, plain gRPC {rate['plain gRPC']:.1f} frames/s, "
          f"ratio {rate['shared memory'] / rate['plain gRPC']:.2f}")


def mapped(url: str, samples: int) -> None:
    inputs = [np.array([20], np.int32) for _ in range(samples)]
    with Client(url, "sleepy") as client:
        client(inputs[0])
        started = time.perf_counter()
        for x in inputs:
            client(x)
        sequential = samples / (time.perf_counter() - started)
        started = time.perf_counter()
        results = list(client.map(inputs, concurrency=4))
        concurrent = samples / (time.perf_counter() - started)
    assert len(results) == samples
    print(f"3. map(concurrency=4) vs a sequential loop, {samples} requests to a model that takes 20 ms:")
    print(f"   map {concurrent:.1f} req/s, loop {sequential:.1f} req/s, ratio {concurrent / sequential:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        repository = build_client_repository(Path(work) / "models")
        server = start_on_free_ports(repository, Path(work) / "server.log")
        try:
            url = server.command.grpc_url
            latency(url, args.calls)
            shared_memory(url, args.frames)
            mapped(url, args.samples)
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
