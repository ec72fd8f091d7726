"""The smallest path: a real tritonserver serving a Python-backend model and a two-step ensemble over it.

    python examples/demo.py [--requests 200] [--triton-home DIR] [--log FILE]

Finds tritonserver (--triton-home, $ORINKIT_TRITONSERVER_HOME, /opt/tritonserver, or the server bundled in the
nvidia-pytriton wheel), starts it on free ports for tests/data/repository (add_sub, a Python-backend model, and
add_sub_twice, an ensemble of two add_sub steps), sends gRPC inferences to the ensemble, checks the numbers, prints
the latency, and stops the server with everything it started. The server's log goes to a temporary folder that is
removed at the end, after an error or Ctrl-C (SIGINT) or SIGTERM too, unless --log names a file to keep it in.
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

from orinkit.core.errors import EXIT_INTERRUPTED, OrinkitError
from orinkit.core.signals import sigterm_as_interrupt
from orinkit.server import (
    ServerOptions,
    TritonProcess,
    build_command,
    locate_tritonserver,
)
from orinkit.server.ports import free_ports

REPOSITORY = Path(__file__).resolve().parent.parent / "tests" / "data" / "repository"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="inferences to time (default 200)")
    parser.add_argument("--triton-home", default=None, help="Triton release folder (default: search)")
    parser.add_argument("--log", type=Path, default=None,
                        help="keep the server's log in this file (default: a temporary folder, removed at the end)")
    return parser


def run(args: argparse.Namespace, scratch: Path) -> int:
    install = locate_tritonserver(args.triton_home)
    print(f"server: {install.describe()}")
    http, grpc, metrics = free_ports(3)
    command = build_command(
        install, ServerOptions(repository=REPOSITORY, http_port=http, grpc_port=grpc, metrics_port=metrics)
    )
    log_path = args.log or scratch / "tritonserver.log"
    started = time.perf_counter()
    with TritonProcess(command, log=log_path) as server:
        print(f"ready in {time.perf_counter() - started:.1f} s (pid {server.pid}, gRPC {command.grpc_url}, "
              f"log {log_path})", flush=True)
        client = grpcclient.InferenceServerClient(command.grpc_url)
        try:
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
        finally:
            client.close()
        two_a, two_b = result.as_numpy("TWO_A"), result.as_numpy("TWO_B")
        ok = np.array_equal(two_a, 2 * a) and np.array_equal(two_b, 2 * b)
        print(f"ensemble add_sub_twice: TWO_A={two_a[0].tolist()} TWO_B={two_b[0].tolist()} "
              f"({'correct' if ok else 'WRONG'})")
        latencies_ms = sorted(1000 * x for x in latencies)
        p = lambda q: latencies_ms[min(len(latencies_ms) - 1, int(q * len(latencies_ms)))]  # noqa: E731
        print(f"latency over {args.requests} gRPC calls: median {statistics.median(latencies_ms):.2f} ms, "
              f"p90 {p(0.90):.2f} ms, p99 {p(0.99):.2f} ms")
    print("server stopped" + ("" if args.log else ", its log removed"))
    return 0 if ok else 1


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.requests < 1:
        parser.error(f"--requests {args.requests} is below 1")
    if args.log is not None and not args.log.parent.is_dir():
        parser.error(f"the folder of --log {args.log} does not exist")
    with sigterm_as_interrupt():
        try:
            with tempfile.TemporaryDirectory(prefix="orinkit-demo-") as scratch:
                return run(args, Path(scratch))
        except OrinkitError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            print("interrupted: stopped the server" + ("" if args.log else " and removed its log"), file=sys.stderr)
            return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
