"""orinkit.client.Client against the real local tritonserver."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from client_fixtures import add_bytes_model, build_client_repository

from orinkit.client import (
    Client,
    ClientClosedError,
    DeadlineExceededError,
    InvalidInputError,
    ModelNotFoundError,
    Retry,
    ServerUnavailableError,
)
from orinkit.client.channel import DEFAULT_CHANNEL_OPTIONS, merged_channel_options
from orinkit.server.ports import free_ports


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    return add_bytes_model(build_client_repository(tmp_path_factory.mktemp("client") / "models"))


@pytest.fixture(scope="module")
def server(triton_server_factory, repository):
    return triton_server_factory(repository)


@pytest.fixture(scope="module")
def url(server):
    return server.command.grpc_url


def _types_sample(rng, batch=None):
    lead = () if batch is None else (batch,)
    return {
        "IN_FP32": rng.normal(size=lead + (3,)).astype(np.float32),
        "IN_FP16": rng.normal(size=lead + (3,)).astype(np.float16),
        "IN_INT32": rng.integers(-1000, 1000, size=lead + (2,), dtype=np.int32),
        "IN_INT64": rng.integers(-2**40, 2**40, size=lead + (2,), dtype=np.int64),
        "IN_UINT8": rng.integers(0, 128, size=lead + (4,), dtype=np.uint8),
        "IN_BYTES": np.array([b"orin\x00kit"] if batch is None else [[b"frame-%d" % i] for i in range(batch)],
                             dtype=np.object_),
    }


def _check_types(sample, result):
    for kind in ("FP32", "FP16", "INT32", "INT64", "UINT8"):
        got = result[f"OUT_{kind}"]
        assert got.dtype == sample[f"IN_{kind}"].dtype
        np.testing.assert_array_equal(got, sample[f"IN_{kind}"] * 2)
    expected = np.vectorize(lambda b: b[::-1], otypes=[object])(sample["IN_BYTES"])
    assert result["OUT_BYTES"].tolist() == expected.tolist()


@pytest.mark.parametrize("shared_memory", [None, "system"])
def test_every_dtype_batched_and_single(url, shared_memory):
    rng = np.random.default_rng(0)
    with Client(url, "types_echo", shared_memory=shared_memory) as client:
        batch = _types_sample(rng, batch=3)
        _check_types(batch, client(**batch))
        single = _types_sample(rng)
        result = client(**single)
        assert result["OUT_FP32"].shape == (3,), "a single sample comes back without the batch axis"
        _check_types(single, result)
        positional = client(*[single[t.name] for t in client.inputs], outputs=["OUT_INT64"])
        np.testing.assert_array_equal(positional, single["IN_INT64"] * 2)


def test_shared_memory_and_plain_give_identical_results(url):
    frames = np.random.default_rng(1).random((2, 3, 360, 640), dtype=np.float32)
    with Client(url, "frame_stats") as plain, Client(url, "frame_stats", shared_memory="system") as shm:
        a, b = plain(frames), shm(frames)
        assert set(a) == {"MEANS", "ECHO"}
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
        np.testing.assert_allclose(a["MEANS"], frames.reshape(2, 3, -1).mean(axis=2), rtol=1e-5)


def test_non_batching_model_and_safe_casts(url):
    with Client(url, "plus_one") as client:
        x = np.arange(6, dtype=np.float64).reshape(2, 3)
        y = client(x)
        assert y.dtype == np.float32 and y.tolist() == (x + 1).tolist()
        assert client(np.ones((2, 3), np.int16)).tolist() == [[2.0] * 3] * 2, "small ints widen to FP32 safely"
        with pytest.raises(InvalidInputError, match=r"shape \[1, 2, 3\], the model takes \[2, 3\]") as info:
            client(x[None])
        assert info.value.expected == [2, 3] and info.value.given == [1, 2, 3]


def test_dynamic_first_dim_is_ambiguous_for_call_and_explicit_with_infer_sample_and_batch(url):
    rows = np.arange(8, dtype=np.float32).reshape(2, 4)
    with Client(url, "row_sums") as client:
        with pytest.raises(InvalidInputError, match=r"shape \[2, 4\] is ambiguous.*infer_sample.*infer_batch") as info:
            client(rows)
        assert info.value.expected == [-1, 4] and info.value.given == [2, 4]
        one = client.infer_sample(rows)
        assert one.shape == (4,), "a sample comes back without the batch axis"
        np.testing.assert_array_equal(one, rows.sum(axis=0))
        two = client.infer_batch(rows[:, None, :])
        assert two.shape == (2, 4), "two samples of one row each"
        np.testing.assert_array_equal(two, rows)
        batch = np.stack([rows, rows * 10])
        # Rank decides when only one reading fits.
        np.testing.assert_array_equal(client(batch), batch.sum(axis=1))
        np.testing.assert_array_equal(client.infer_batch(batch), batch.sum(axis=1))
        with pytest.raises(InvalidInputError, match=r"a batch of \[-1, 4\] per sample is \[-1, -1, 4\]"):
            client.infer_batch(rows[0])
        with pytest.raises(InvalidInputError, match=r"shape \[2, 2, 4\], the model takes \[-1, 4\] per sample"):
            client.infer_sample(batch)


def test_repeated_calls_skip_the_checks_only_for_what_passed_them_unchanged(url):
    """A shape and dtype that passed without a cast is remembered (a camera loop's checks cost a small model ~5 %);
    anything else still goes through every check, every time."""
    with Client(url, "row_sums") as client:
        rows = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
        for scale in (1, 2, 3):  # the remembered path sends the array's current contents
            rows *= scale
            np.testing.assert_array_equal(client(rows), rows.sum(axis=1))
        assert [plan.single for plan in client._known.values()] == [False], "one batch signature remembered"
        one = np.arange(8, dtype=np.float32).reshape(2, 4)
        for _ in range(2):  # refused each time, never remembered
            with pytest.raises(InvalidInputError, match="is ambiguous"):
                client(one)
        for _ in range(2):
            np.testing.assert_array_equal(client.infer_sample(one), one.sum(axis=0))
        assert sorted(plan.single for plan in client._known.values()) == [False, True]
        for _ in range(2):  # a cast (float64 -> FP32) is checked every time, never remembered
            np.testing.assert_array_equal(client(rows.astype(np.float64)), rows.sum(axis=1))
        assert len(client._known) == 2
        with pytest.raises(InvalidInputError, match="takes FP32 .* got complex128"):
            client(rows.astype(np.complex128))
        with pytest.raises(InvalidInputError, match=r"batch of 5, the model takes 1 to 4"):
            client(np.zeros((5, 2, 4), np.float32))
        transposed = np.asfortranarray(rows[0])[None]  # not C-contiguous: copied, so always checked
        np.testing.assert_array_equal(client(transposed), rows.sum(axis=1))
        assert len(client._known) == 2


def test_bytes_go_to_a_bytes_input_as_they_are(url):
    """An ensemble's encoded image is the bytes themselves: client(data) is one sample where a sample is one item
    (dims [1]), a list of several a batch; every item arrives whole, trailing NUL bytes included."""
    rng = np.random.default_rng(3)
    data = b"\x89PNG\r\n\x00tail\x00\x00"
    with Client(url, "types_echo") as client:
        single = _types_sample(rng)
        result = client(**dict(single, IN_BYTES=data))
        assert result["OUT_FP32"].shape == (3,) and result["OUT_BYTES"].tolist() == [data[::-1]], "one sample"
        assert client(**dict(single, IN_BYTES="orinkit"))["OUT_BYTES"].tolist() == [b"tikniro"]
        assert client.infer_sample(**dict(single, IN_BYTES=data))["OUT_BYTES"].tolist() == [data[::-1]]
        # One item in a list fits a sample of dims [1], as np.array([data], dtype=object) does.
        assert client(**dict(single, IN_BYTES=[data]))["OUT_BYTES"].tolist() == [data[::-1]]
        batch = _types_sample(rng, batch=3)
        result = client(**dict(batch, IN_BYTES=[b"a\x00", "bc", b"\x00"]))
        assert result["OUT_BYTES"].tolist() == [[b"\x00a"], [b"cb"], [b"\x00"]], "three items: a batch of three"
        one = _types_sample(rng, batch=1)
        assert client.infer_batch(**dict(one, IN_BYTES=[data]))["OUT_BYTES"].tolist() == [[data[::-1]]]
        with pytest.raises(InvalidInputError, match="got one bytes object, which is one sample, not a batch"):
            client.infer_batch(**dict(one, IN_BYTES=data))
        with pytest.raises(InvalidInputError, match="batch of 9, the model takes 1 to 8"):
            client(**dict(_types_sample(rng, batch=9), IN_BYTES=[b"x"] * 9))
        with pytest.raises(InvalidInputError, match="items that are not bytes or str"):
            client(**dict(batch, IN_BYTES=[1, 2, 3]))
        with pytest.raises(InvalidInputError, match="takes BYTES, got int64"):
            client(**dict(single, IN_BYTES=np.array([1])))


def test_a_list_of_bytes_for_dims_minus_one_is_read_as_asked_and_never_remembered(url):
    """Dims [-1]: a list may be one sample of N items or N samples of one, so the plain call refuses it and
    infer_sample / infer_batch say which; bytes, str and lists take the full checks every time."""
    items = [b"a", b"bb\x00", "c\u00e9"]
    with Client(url, "bytes_lengths") as client:
        for _ in range(2):
            assert client(b"ab\x00\x00").tolist() == [4], "one bytes object: one sample of one item"
        assert client("\u00e9").tolist() == [2]
        with pytest.raises(InvalidInputError, match=r"shape \[3\] is ambiguous.*infer_sample.*infer_batch"):
            client(items)
        assert client.infer_sample(items).tolist() == [1, 3, 3]
        assert client.infer_sample(tuple(items)).tolist() == [1, 3, 3]
        assert client.infer_batch(items).tolist() == [[1], [3], [3]]
        assert client.infer_batch([[b"a\x00", b""], [b"xyz", b"q"]]).tolist() == [[2, 0], [3, 1]]
        with pytest.raises(InvalidInputError, match="batch of 5, the model takes 1 to 4"):
            client.infer_batch([b"x"] * 5)
        assert [client(data).tolist() for data in (b"1", b"22", b"333")] == [[1], [2], [3]]
        assert [r.tolist() for r in client.map([b"1", b"22"], concurrency=2)] == [[1], [2]]
        assert client._known == {}, "nothing but plain numeric arrays takes the remembered path"


def test_a_bare_bytes_object_is_refused_where_a_sample_holds_several_items():
    from orinkit.client.model import ModelInfo, prepare_inputs
    from orinkit.formats.tensors import TensorSpec

    info = ModelInfo("pairs", "1", (TensorSpec("PAIR", "BYTES", (2,)),), (TensorSpec("OUT", "INT64", (1,)),), 4)
    with pytest.raises(InvalidInputError, match=r"takes \[2\] BYTES items per sample, got one bytes object"):
        prepare_inputs(info, [b"a"], {})
    prepared, single = prepare_inputs(info, [[b"a", b"b\x00"]], {})
    assert single and prepared["PAIR"].shape == (1, 2) and prepared["PAIR"].tolist() == [[b"a", b"b\x00"]]
    prepared, single = prepare_inputs(info, [[[b"a", b"b"], [b"c", b"d"]]], {})
    assert not single and prepared["PAIR"].shape == (2, 2)


def test_infer_batch_is_refused_for_a_model_that_does_not_batch(url):
    with Client(url, "plus_one") as client:
        x = np.zeros((2, 3), np.float32)
        np.testing.assert_array_equal(client.infer_sample(x), x + 1)
        with pytest.raises(InvalidInputError, match="does not batch .*infer_sample"):
            client.infer_batch(x[None])


def test_unsafe_dtypes_and_shapes_are_refused_before_sending(url):
    rng = np.random.default_rng(2)
    with Client(url, "types_echo") as client:
        sample = _types_sample(rng)
        bad = dict(sample, IN_INT32=np.array([1.5, 2.5]))
        with pytest.raises(InvalidInputError, match="takes INT32 .* got float64") as info:
            client(**bad)
        assert (info.value.expected, info.value.given) == ("INT32", "float64")
        with pytest.raises(InvalidInputError, match="would not cast safely"):
            client(**dict(sample, IN_UINT8=np.array([1, 2, 3, 300])))
        with pytest.raises(InvalidInputError, match="has shape"):
            client(**dict(sample, IN_FP32=np.zeros(4, np.float32)))
        with pytest.raises(InvalidInputError, match="batch of 9, the model takes 1 to 8"):
            client(**_types_sample(rng, batch=9))
        with pytest.raises(InvalidInputError, match="needs inputs IN_BYTES"):
            client(**{k: v for k, v in sample.items() if k != "IN_BYTES"})
        with pytest.raises(InvalidInputError, match="has no input 'IMAGE'"):
            client(IMAGE=1, **sample)
        with pytest.raises(InvalidInputError, match="has no output 'SCORES'"):
            client(**sample, outputs=["SCORES"])


def test_wrong_port_is_unavailable_after_bounded_retries():
    (port,) = free_ports(1)
    started = time.monotonic()
    with Client(f"127.0.0.1:{port}", "types_echo", retry=Retry(attempts=3, backoff_s=0.05)) as client:
        with pytest.raises(ServerUnavailableError, match="gRPC port") as info:
            _ = client.inputs
    assert time.monotonic() - started < 10
    assert info.value.__cause__ is not None and info.value.exit_code == 6


def test_unknown_model(url):
    with Client(url, "no_such_model") as client:
        with pytest.raises(ModelNotFoundError, match="no_such_model"):
            client(np.zeros(3))


def test_deadline_exceeded_does_not_hang(url):
    with Client(url, "sleepy", timeout_s=0.5) as client:
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            client(np.array([3000], np.int32))
        assert time.monotonic() - started < 2.5 + 2.5, "the 3 s request was cut at its 0.5 s deadline"
    with Client(url, "sleepy", timeout_s=30) as patient:
        assert patient(np.array([10], np.int32)).tolist() == [10], "the server still answers afterwards"


def test_closed_client_refuses_calls(url):
    client = Client(url, "plus_one")
    client.close()
    with pytest.raises(ClientClosedError):
        client(np.zeros((2, 3), np.float32))


def test_threads_share_one_client(url):
    errors, rng = [], np.random.default_rng(3)
    samples = [rng.normal(size=(2, 3)).astype(np.float32) for _ in range(64)]
    with Client(url, "plus_one") as client:
        def work(chunk):
            try:
                for x in chunk:
                    assert np.array_equal(client(x), x + 1)
            except Exception as exc:  # collected: an assertion in a thread would otherwise vanish
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(samples[i::8],)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    assert errors == []


def test_map_keeps_order_and_submit_returns_futures(url):
    samples = [np.full((2, 3), i, np.float32) for i in range(40)]
    with Client(url, "plus_one") as client:
        results = list(client.map(samples, concurrency=4))
        assert [r[0, 0] for r in results] == [i + 1 for i in range(40)]
        future = client.submit(samples[5])
        assert future.result(timeout=30)[0, 0] == 6
        assert len({id(w) for w in client._workers}) >= 2, "workers hold their own channels"


def test_channel_options_merge_over_the_large_message_defaults():
    merged = dict(merged_channel_options([("grpc.keepalive_time_ms", 10000)]))
    assert merged["grpc.max_receive_message_length"] == 2**31 - 1
    assert merged["grpc.keepalive_time_ms"] == 10000
    assert dict(merged_channel_options([("grpc.max_receive_message_length", 1 << 20)]))[
        "grpc.max_receive_message_length"] == 1 << 20
    assert dict(DEFAULT_CHANNEL_OPTIONS)["grpc.max_reconnect_backoff_ms"] == 250  # a restarted server is seen soon


def test_compression_and_bad_options(url):
    with Client(url, "plus_one", compression="gzip") as client:
        assert client(np.zeros((2, 3), np.float32)).sum() == 6
    with pytest.raises(InvalidInputError, match="compression 'zstd' is unknown"):
        Client(url, "plus_one", compression="zstd")
    with pytest.raises(InvalidInputError, match="CUDA shared memory does not exist on Jetson"):
        Client(url, "plus_one", shared_memory="cuda")


def _regions(prefix="orinkit_"):
    return sorted(p.name for p in Path("/dev/shm").iterdir() if p.name.startswith(prefix))


def test_shared_memory_regions_are_gone_after_close_and_after_failures(url):
    before = _regions()
    client = Client(url, "frame_stats", shared_memory="system")
    client(np.zeros((1, 3, 360, 640), np.float32))
    assert len(_regions()) == len(before) + 2, "one input and one output region"
    with pytest.raises(InvalidInputError):
        client(np.zeros((3, 3, 360, 640), np.float32))
    client.close()
    assert _regions() == before
    failing = Client(url, "sleepy", shared_memory="system", timeout_s=0.3)
    with pytest.raises(DeadlineExceededError):
        failing(np.array([2000], np.int32))
    failing.close()
    assert _regions() == before
