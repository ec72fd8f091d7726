"""A Client's throughput side: ``submit`` and ``map`` run calls on worker threads, each with its own client (one
gRPC channel per thread, as tritonclient's maintainers advise). A mixin of :class:`orinkit.client.Client`, which
owns the state it uses (``_local``, ``_init_lock``, ``_workers``, ``_pool``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from orinkit.client.errors import InvalidInputError


class Throughput:
    def _worker(self):
        """This worker thread's own client: one gRPC channel per thread, as tritonclient's maintainers advise."""
        worker = getattr(self._local, "client", None)
        if worker is None:
            worker = type(self)(self.url, self.model, self.version, ssl=self._tls is not None,
                            root_certificates=self._tls.root_certificates if self._tls else None,
                            private_key=self._tls.private_key if self._tls else None,
                            certificate_chain=self._tls.certificate_chain if self._tls else None,
                            insecure=bool(self._tls and self._tls.insecure), timeout_s=self.timeout_s,
                            ready_timeout_s=self.ready_timeout_s, retry=self.retry, keepalive=self._keepalive,
                            compression=self.compression, channel_options=self._channel_options,
                            shared_memory=self.shared_memory, outputs=self.default_outputs,
                            max_request_bytes=self.max_request_bytes)
            self._local.client = worker
            with self._init_lock:
                self._workers.append(worker)
        return worker

    def _executor(self, concurrency: int) -> ThreadPoolExecutor:
        self._check_open()
        with self._init_lock:
            if self._pool is None or self._pool._max_workers < concurrency:
                old, self._pool = self._pool, ThreadPoolExecutor(max(1, concurrency), "orinkit-client")
                if old is not None:
                    old.shutdown(wait=True)
            return self._pool

    def submit(self, *arrays, outputs: Sequence[str] | None = None, in_flight: int = 4, **named) -> Future:
        """Run one inference on a worker thread; the future holds what ``__call__`` would return. The pool grows
        to ``in_flight`` workers (each with its own channel), so that many requests can be in flight at once."""
        if in_flight < 1:
            raise InvalidInputError(f"in_flight {in_flight} runs nothing", hint="use 1 or more")
        return self._executor(in_flight).submit(lambda: self._worker()(*arrays, outputs=outputs, **named))

    def map(self, samples: Iterable, *, concurrency: int = 4, outputs: Sequence[str] | None = None) -> Iterator:
        """Results for ``samples`` (each an array, a tuple of arrays, or a dict by input name), in order, with up
        to ``concurrency`` requests in flight, each worker with its own channel."""
        pool = self._executor(concurrency)

        def one(sample):
            worker = self._worker()
            if isinstance(sample, dict):
                return worker.infer_sample(outputs=outputs, **sample)
            if isinstance(sample, tuple):
                return worker.infer_sample(*sample, outputs=outputs)
            return worker.infer_sample(sample, outputs=outputs)

        pending: list[Future] = []
        iterator = iter(samples)
        for sample in iterator:
            pending.append(pool.submit(one, sample))
            if len(pending) >= concurrency * 2:
                yield pending.pop(0).result()
        while pending:
            yield pending.pop(0).result()
