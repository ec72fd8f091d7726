"""The main job until the lane-detection demo lands: a real tritonserver end to end on this machine.

Finds the server (the one bundled in nvidia-pytriton here, the release tarball on an Orin), starts it on free
ports for a small repository (a Python-backend model and a two-step ensemble over it), sends gRPC inferences,
checks the numbers, prints the latency, and stops the server with everything it started.
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

from orinkit.core.errors import OrinkitError
from orinkit.server import (
    ServerOptions,
    TritonProcess,
    build_command,
    locate_tritonserver,
)
from orinkit.server.ports import free_ports

REPOSITORY = Path(__file__).resolve().parent.parent / "tests" / "data" / "repository"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="inferences to time")
    parser.add_argument("--triton-home", default=None, help="Triton release folder (default: search)")
    args = parser.parse_args()

    install = locate_tritonserver(args.triton_home)
    print(f"server: {install.describe()}")
    http, grpc, metrics = free_ports(3)
    command = build_command(
        install, ServerOptions(repository=REPOSITORY, http_port=http, grpc_port=grpc, metrics_port=metrics)
    )
    log_path = Path(tempfile.mkdtemp(prefix="orinkit-demo-")) / "tritonserver.log"
    started = time.perf_counter()
    with TritonProcess(command, log=log_path) as server:
        print(f"ready in {time.perf_counter() - started:.1f} s (pid {server.pid}, gRPC {command.grpc_url}, "
              f"log {log_path})")
        client = grpcclient.InferenceServerClient(command.grpc_url)
        a = np.arange(8, dtype=np.float32).reshape(2, 4)
        b = np.full((2, 4), 0.5, dtype=np.float32)
        inputs = [grpcclient.InferInput("A", a.shape, "FP32"), grpcclient.InferInput("B", b.shape, "FP32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        latencies = []
        for _ in range(args.requests):
            t0 = time.perf_counter()
            result = client.infer("add_sub_twice", inputs)
            latencies.append(time.perf_counter() - t0)
        two_a, two_b = result.as_numpy("TWO_A"), result.as_numpy("TWO_B")
        ok = np.array_equal(two_a, 2 * a) and np.array_equal(two_b, 2 * b)
        print(f"ensemble add_sub_twice: TWO_A={two_a[0].tolist()} TWO_B={two_b[0].tolist()} "
              f"({'correct' if ok else 'WRONG'})")
        latencies_ms = sorted(1000 * x for x in latencies)
        p = lambda q: latencies_ms[min(len(latencies_ms) - 1, int(q * len(latencies_ms)))]  # noqa: E731
        print(f"latency over {args.requests} gRPC calls: median {statistics.median(latencies_ms):.2f} ms, "
              f"p90 {p(0.90):.2f} ms, p99 {p(0.99):.2f} ms")
        client.close()
    print("server stopped")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except OrinkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
