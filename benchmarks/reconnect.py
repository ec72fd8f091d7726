"""How soon the client sees a server that comes back, the client's part alone: a stand-in for Triton's gRPC
service (ServerReady only, in this process, so that it stops and starts in milliseconds) goes away for 1-2.5 s
and comes back, many times; clients wait for it the way a call does (``_with_retry`` of a readiness probe).

    python benchmarks/reconnect.py [--trials 30] [--clients 4]

Variants take turns: the client before issue 24 (reconnect tries up to 1 s apart, probes every 50 ms), the new
reconnect options with the old probing ("cap only"), and today's client (also woken by the channel's
connectivity). benchmarks/faults.py measures the same through real tritonserver restarts, with the server's
own stop and start; there its tracing subscribes to each channel, which changes how grpcio delivers the
client's own subscription, hence this second, untraced measurement.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from concurrent import futures

import grpc
from restart_trace import OLD_CHANNEL_OPTIONS, old_client_class
from tritonclient.grpc import service_pb2, service_pb2_grpc

from orinkit.client import Client
from orinkit.server.ports import free_ports


class _Ready(service_pb2_grpc.GRPCInferenceServiceServicer):
    def ServerReady(self, request, context):  # noqa: N802 - gRPC's method name
        return service_pb2.ServerReadyResponse(ready=True)


def _serve(port: int):
    server = grpc.server(futures.ThreadPoolExecutor(4))
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(_Ready(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    (port,) = free_ports(1)
    url = f"127.0.0.1:{port}"
    old = old_client_class()
    variants = {"before": [old(url, "m", channel_options=OLD_CHANNEL_OPTIONS) for _ in range(args.clients)],
                "cap only": [old(url, "m") for _ in range(args.clients)],
                "after": [Client(url, "m") for _ in range(args.clients)]}
    lags: dict[str, list[float]] = {name: [] for name in variants}
    rng = random.Random(0)
    server = _serve(port)
    try:
        for _ in range(args.trials):
            for name, clients in variants.items():
                answered: list[float] = []

                def wait(client, answered=answered):
                    client._with_retry(lambda left: client._grpc.is_server_ready(client_timeout=left),
                                       time.monotonic() + 30)
                    answered.append(time.monotonic())

                for client in clients:
                    client._grpc.is_server_ready()  # connected before the server goes
                server.stop(None).wait()
                waiters = [threading.Thread(target=wait, args=(c,)) for c in clients]
                for waiter in waiters:
                    waiter.start()
                time.sleep(rng.uniform(1.0, 2.5))
                server = _serve(port)
                back = time.monotonic()
                for waiter in waiters:
                    waiter.join()
                lags[name].extend(t - back for t in answered)
    finally:
        server.stop(None)
        for clients in variants.values():
            for client in clients:
                client.close()
    print(f"server back -> readiness seen, {args.trials} returns x {args.clients} clients per variant (ms):")
    for name, values in lags.items():
        ms = sorted(v * 1000 for v in values)
        print(f"   {name:9} median {statistics.median(ms):5.0f}  p90 {ms[int(len(ms) * 0.9)]:5.0f}  max {ms[-1]:5.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
