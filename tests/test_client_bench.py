"""edge-bench against the real local server: both clients under the same load, reported side by side."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from click.testing import CliRunner
from client_fixtures import build_client_repository

from orinkit.cli.bench import main
from orinkit.client import InvalidInputError
from orinkit.client.bench import percentile, run_load


@pytest.fixture(scope="module")
def url(triton_server_factory, tmp_path_factory):
    repository = build_client_repository(tmp_path_factory.mktemp("bench") / "models")
    return triton_server_factory(repository).command.grpc_url


def test_edge_bench_reports_both_clients_per_level(url):
    result = CliRunner().invoke(main, ["--url", url, "--model", "plus_one", "--concurrency", "1,2", "--requests",
                                       "40", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    assert [level["concurrency"] for level in report["levels"]] == [1, 2]
    for level in report["levels"]:
        for side in ("orinkit", "tritonclient"):
            assert level[side]["requests"] == 40 and level[side]["errors"] == 0
            assert 0 < level[side]["p50_ms"] <= level[side]["p99_ms"]
            # The server's own statistics over the same run: every request counted, its time inside the client's.
            server = level[side]["server"]
            assert server["requests"] == 40 and server["failures"] == 0 and server["inferences"] == 40
            parts = [server[k] for k in ("queue_ms", "compute_input_ms", "compute_infer_ms", "compute_output_ms")]
            assert all(p > 0 for p in parts) and server["server_ms"] == pytest.approx(sum(parts))
            assert server["server_ms"] <= server["request_ms"] < level[side]["mean_ms"]
        assert level["throughput_ratio"] > 0
    assert "throughput ratio orinkit / tritonclient" in result.output
    assert result.output.count("ms mean per request (queue ") == 4
    assert result.output.count("; 40 ok, 0 failed at the server)") == 4, result.output


def test_edge_bench_with_shared_memory_and_input_file(url, tmp_path):
    data = tmp_path / "frame.npz"
    np.savez(data, FRAME=np.zeros((1, 3, 360, 640), np.float32))
    result = CliRunner().invoke(main, ["--url", url, "--model", "frame_stats", "--concurrency", "1",
                                       "--duration", "0.5", "--data", str(data), "--shared-memory"])
    assert result.exit_code == 0, result.output
    assert result.output.count(" ok, 0 failed)") == 2, result.output


def test_bad_options_exit_non_zero(url):
    runner = CliRunner()
    assert runner.invoke(main, ["--url", url, "--model", "plus_one", "--concurrency", "0"]).exit_code == 4
    both = runner.invoke(main, ["--url", url, "--model", "plus_one", "--duration", "1", "--requests", "5"])
    assert both.exit_code == 4 and "not both" in both.output
    unknown = runner.invoke(main, ["--url", url, "--model", "nope", "--requests", "1"])
    assert unknown.exit_code == 4 and "nope" in unknown.output


def test_run_load_counts_requests_and_failures():
    calls = iter(range(1000))

    def make():
        def call():
            if next(calls) % 5 == 0:
                raise RuntimeError("every fifth call fails")
        return call

    result = run_load(make, concurrency=3, requests=50)
    assert result.requests + result.errors == 50 and result.errors == 10
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5


def test_run_load_warm_up_is_run_but_not_counted():
    """A model just loaded serves its first requests slower: they run, and neither the count, the latencies nor
    the seconds include them."""
    made = []

    def make():
        def call():
            made.append(time.perf_counter())
            # The first request of each worker is slow; the rest return at once. The slow ones take far longer
            # than any fast one can, even on a loaded machine, so the latencies tell which were counted (no
            # figure is asserted here: benchmarks/client.py measures).
            time.sleep(0.25 if len(made) <= 2 else 0.0)
        return call

    result = run_load(make, concurrency=2, duration_s=0.3, warmup_s=0.4)
    assert len(made) > result.requests > 0
    assert result.p99_ms < 250, "the slow first requests fell in the warm-up"
    assert result.seconds >= 0.29, "the measured window is the duration after the warm-up"
    with pytest.raises(InvalidInputError, match="warm-up goes with a duration"):
        run_load(make, concurrency=1, requests=5, warmup_s=1.0)


def test_power_and_energy_per_inference_from_tegrastats(url):
    """The sampler runs the tegrastats TEST DOUBLE (tests/data/jetson/fake_tegrastats.py: tegrastats exists only
    on a Jetson), replaying lines captured on an Orin Nano."""
    import sys
    from functools import partial

    from conftest import DATA

    from orinkit.client.bench import bench
    from orinkit.jetson.sampler import TegrastatsSampler

    replay = [sys.executable, str(DATA / "jetson" / "fake_tegrastats.py"), "--interval", "20", "--fixture",
              str(DATA / "jetson" / "tegrastats" / "jp6_orin_nano.txt")]
    messages = []
    report = bench(url, "plus_one", levels=(1,), duration_s=0.6,
                   power_sampler=partial(TegrastatsSampler, command=replay), progress=messages.append)
    power = report["levels"][0]["power"]
    assert power["samples"] > 0 and power["input_power_mw"] > 0
    assert power["energy_per_inference_j"] == pytest.approx(power["energy_j"] / report["levels"][0]["orinkit"]
                                                            ["requests"])
    assert "mJ per inference" in messages[0]
