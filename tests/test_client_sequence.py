"""Client.sequence against the real local tritonserver: a stateful model (running_sum) under the sequence batcher."""

from __future__ import annotations

import numpy as np
import pytest
from client_fixtures import build_stream_repository

from orinkit.client import Client, InvalidInputError, SequenceError
from orinkit.client.sequence import new_sequence_id


@pytest.fixture(scope="module")
def url(triton_server_factory, tmp_path_factory):
    repository = build_stream_repository(tmp_path_factory.mktemp("sequence") / "models",
                                         only=("running_sum", "plus_one"))
    return triton_server_factory(repository).command.grpc_url


@pytest.fixture
def client(url):
    with Client(url, "running_sum") as client:
        yield client


def _x(value):
    return np.array([value], np.int32)


def _sums(results):
    return [(int(r["SUM"][0]), int(r["STEP"][0])) for r in results]


def test_state_carries_across_three_calls_and_resets_at_a_new_start(client):
    assert client.info.stateful and client.info.correlation_type == "UINT64"
    with client.sequence() as seq:
        results = [seq(_x(2)), seq(_x(3)), seq.end(_x(4))]
    assert _sums(results) == [(2, 1), (5, 2), (9, 3)]
    assert results[0]["SUM"].shape == (1,), "one sample per step: no batch axis comes back"
    with client.sequence(sequence_id=seq.id) as again:  # the same id, started anew: no state left over
        assert _sums([again(_x(10)), again(_x(1), end=True)]) == [(10, 1), (11, 2)]


def test_interleaved_sequences_keep_their_own_state(client):
    with client.sequence() as a, client.sequence() as b:
        assert a.id != b.id
        steps = [a(_x(1)), b(_x(100)), a(_x(2)), b(_x(200)), a.end(_x(3)), b.end(_x(300))]
    assert _sums(steps[0::2]) == [(1, 1), (3, 2), (6, 3)]
    assert _sums(steps[1::2]) == [(100, 1), (300, 2), (600, 3)]


def test_a_step_after_the_end_is_refused_before_sending(client):
    with client.sequence() as seq:
        seq(_x(1), end=True)
        with pytest.raises(SequenceError, match="has ended") as info:
            seq(_x(2))
    assert info.value.exit_code == 4


def test_a_sequence_the_server_never_started_is_refused_by_it(client):
    seq = client.sequence(sequence_id=424242)
    seq.started = True  # as if its start had gone to a server that restarted since
    with pytest.raises(SequenceError, match="must specify the START flag") as info:
        seq(_x(1))
    assert "client.sequence()" in info.value.hint


def test_leaving_the_block_without_an_end_ends_the_sequence_on_the_server(client):
    with client.sequence() as seq:
        assert _sums([seq(_x(5)), seq(_x(6))]) == [(5, 1), (11, 2)]
    assert seq.ended
    stray = client.sequence(sequence_id=seq.id)
    stray.started = True
    with pytest.raises(SequenceError, match="START flag"):  # the server no longer holds it
        stray(_x(1))


def test_a_plain_call_to_a_stateful_model_is_refused(client):
    with pytest.raises(SequenceError, match="stateful") as info:
        client(_x(1))
    assert "client.sequence()" in info.value.hint
    with pytest.raises(SequenceError, match="stateful"):
        client.stream(_x(1))


def test_sequence_on_a_model_without_a_sequence_batcher_is_refused(url):
    with Client(url, "plus_one") as client, pytest.raises(SequenceError, match="'plus_one' has no sequence_batching"):
        client.sequence()


def test_inputs_are_checked_as_one_sample(client):
    with client.sequence() as seq:
        with pytest.raises(InvalidInputError, match="shape"):
            seq(np.array([[1], [2]], np.int32))  # a batch is not a step
        assert not seq.started, "nothing reached the server, so the next step still starts the sequence"
        assert _sums([seq.end(_x(7))]) == [(7, 1)]


@pytest.mark.parametrize("bad", [0, "", -1, 2**64, 1.5, True])
def test_unusable_sequence_ids_are_refused(client, bad):
    with pytest.raises(InvalidInputError, match="sequence id"):
        client.sequence(sequence_id=bad)


def test_fresh_ids_fit_the_correlation_type():
    assert all(0 < new_sequence_id("INT32") < 2**31 for _ in range(100))
    ids = {new_sequence_id("UINT64") for _ in range(1000)}
    assert len(ids) == 1000 and all(0 < i < 2**63 for i in ids)
    assert isinstance(new_sequence_id("STRING"), str)


def test_the_servers_sequence_refusals_map_to_sequence_error():
    from tritonclient.utils import InferenceServerException

    from orinkit.client.errors import map_exception

    for message in ("inference request for sequence 9 to model 'm' must specify the START flag on the first "
                    "request of the sequence",
                    "inference request to model 'm' must specify a non-zero or non-empty correlation ID"):
        error = map_exception(InferenceServerException(message, status="StatusCode.INVALID_ARGUMENT"), url="u",
                              model="m")
        assert isinstance(error, SequenceError), message
