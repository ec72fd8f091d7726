"""The search logic of edge-tune on measured-looking landscapes (no server: the measure function is the model of
one), and the config a configuration writes, through Triton's protobuf."""

from __future__ import annotations

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from orinkit.repo.pbtxt import format_config, parse_config
from orinkit.tune import Budgets, Candidate, Level, Measurement, SearchSpace, configure, exhaustive, greedy, pick
from orinkit.tune.errors import TuneInputError
from orinkit.tune.search import closest
from orinkit.tune.space import batch_sizes_for, candidate_of

SPACE = SearchSpace(instances=(1, 2, 3, 4), batch_sizes=(1, 2, 4, 8, 16), delays_us=(0, 500, 2000))


def landscape(throughput, p99=lambda c: 5.0, memory=lambda c: 300.0):
    calls: list[Candidate] = []

    def measure(candidate: Candidate) -> Measurement:
        calls.append(candidate)
        level = Level(8, throughput(candidate), 1.0, p99(candidate), 100, 0)
        return Measurement(candidate, (level,), memory(candidate))

    return measure, calls


def batching_pays(c: Candidate) -> float:
    # Two cores: a second instance helps, more only contend; batches amortise per-request overhead up to 8;
    # a little delay helps the batcher fill.
    instances = {1: 1.0, 2: 1.6, 3: 1.55, 4: 1.5}[c.instances]
    batch = {1: 1.0, 2: 1.7, 4: 2.6, 8: 3.1, 16: 3.0}[c.max_batch_size]
    delay = {0: 1.0, 500: 1.08, 2000: 1.02}[c.delay_us]
    return 100 * instances * batch * delay


def test_greedy_finds_the_grid_best_in_a_third_of_the_measurements():
    measure, calls = landscape(batching_pays)
    walked = greedy(SPACE, measure, Budgets())
    grid = exhaustive(SPACE, landscape(batching_pays)[0], Budgets())
    best_walked = pick(walked, Budgets())
    best_grid = pick(grid, Budgets())
    assert best_walked.candidate == best_grid.candidate == Candidate(2, 8, 500)
    assert len(calls) == len(set(calls)) and len(calls) * 3 <= len(grid)  # each measured once


def test_the_walk_goes_back_down_when_batching_changes_what_instances_pay():
    def value(c: Candidate) -> float:  # instances pay while requests run alone; with batches, one instance is best
        batch = {1: 1.0, 2: 1.8, 4: 2.6, 8: 3.1, 16: 3.0}[c.max_batch_size]
        alone, batched = (1.0, 1.5, 1.6, 1.7), (1.3, 1.2, 1.1, 1.0)
        return 100 * batch * (alone if c.max_batch_size == 1 else batched)[c.instances - 1]

    measure, calls = landscape(value)
    chosen = pick(greedy(SPACE, measure, Budgets()), Budgets()).candidate
    assert (chosen.instances, chosen.max_batch_size) == (1, 8)
    assert Candidate(4, 8) in calls  # it went up first, then came back down


def test_a_latency_budget_caps_the_batch():
    measure, _ = landscape(batching_pays, p99=lambda c: 2.0 * c.max_batch_size)
    chosen = pick(greedy(SPACE, measure, Budgets(latency_ms=9)), Budgets(latency_ms=9))
    assert chosen.candidate.max_batch_size == 4


def test_a_memory_budget_caps_the_instances():
    measure, _ = landscape(lambda c: 100.0 * c.instances, memory=lambda c: 200.0 * c.instances)
    chosen = pick(greedy(SPACE, measure, Budgets(memory_mb=650)), Budgets(memory_mb=650))
    assert chosen.candidate.instances == 3


def test_near_equal_configurations_go_to_the_cheaper_one():
    flat = [Measurement(Candidate(i, 1), (Level(4, 100.0 + i * 0.3, 1, 2, 50, 0),), 100.0) for i in (1, 2, 3)]
    assert pick(flat, Budgets()).candidate.instances == 1


def test_nothing_within_budget_names_the_closest_and_by_how_much():
    measure, _ = landscape(lambda c: 100.0, p99=lambda c: 10.0 + c.instances)
    measured = exhaustive(SearchSpace(instances=(1, 2), batch_sizes=(0,)), measure, Budgets(latency_ms=5))
    assert pick(measured, Budgets(latency_ms=5)) is None
    near, why = closest(measured, Budgets(latency_ms=5))
    assert near.candidate == Candidate(1, 0) and why == "p99 11.0 ms > 5 ms at concurrency 8"


def test_failed_levels_and_refused_loads_are_never_picked():
    failing = Measurement(Candidate(2, 1), (Level(4, 900.0, 1, 2, 10, 3, "boom"),), 100.0)
    refused = Measurement(Candidate(3, 1), error="instance kind unsupported")
    fine = Measurement(Candidate(1, 1), (Level(4, 100.0, 1, 2, 50, 0),), 100.0)
    assert pick([failing, refused, fine], Budgets()) is fine


def base_config(max_batch: int = 8) -> mc.ModelConfig:
    return parse_config(f'''
name: "det"
backend: "python"
max_batch_size: {max_batch}
input {{ name: "x" data_type: TYPE_FP32 dims: [ 4 ] }}
output {{ name: "y" data_type: TYPE_FP32 dims: [ 4 ] }}
instance_group {{ count: 1 kind: KIND_CPU }}
dynamic_batching {{ preferred_batch_size: [ 2, 8 ] }}
parameters {{ key: "intra_op_threads" value {{ string_value: "1" }} }}
''')


def test_a_configuration_rewrites_only_instances_and_batching():
    config = configure(base_config(), Candidate(3, 4, 700))
    again = parse_config(format_config(config))
    assert again.instance_group[0].count == 3 and again.instance_group[0].kind == mc.ModelInstanceGroup.KIND_CPU
    assert again.max_batch_size == 4 and again.dynamic_batching.max_queue_delay_microseconds == 700
    assert list(again.dynamic_batching.preferred_batch_size) == [2]  # 8 no longer fits
    assert again.parameters["intra_op_threads"].string_value == "1" and again.input[0].name == "x"
    alone = configure(base_config(), Candidate(2, 1))
    assert alone.max_batch_size == 1 and not alone.HasField("dynamic_batching")
    assert candidate_of(config) == Candidate(3, 4, 700) and candidate_of(alone) == Candidate(2, 1)


def test_a_dla_configuration_is_a_gpu_instance_with_an_nvdla_secondary_device():
    group = configure(base_config(), Candidate(2, 1, 0, "dla1")).instance_group[0]
    assert group.kind == mc.ModelInstanceGroup.KIND_GPU and group.count == 2
    assert group.secondary_devices[0].kind == mc.ModelInstanceGroup.SecondaryDevice.KIND_NVDLA
    assert group.secondary_devices[0].device_id == 1


def test_batch_sizes_follow_the_model():
    assert batch_sizes_for(base_config(8)) == (1, 2, 4, 8)
    assert batch_sizes_for(base_config(6)) == (1, 2, 4, 6)
    assert batch_sizes_for(base_config(8), 16) == (1, 2, 4, 8, 16)
    assert batch_sizes_for(base_config(0)) == (0,)
    with pytest.raises(TuneInputError, match="does not batch"):
        batch_sizes_for(base_config(0), 8)


def test_a_step_of_an_ensemble_never_batches_less_than_the_ensemble(tmp_path):
    """tritonserver refuses an ensemble whose max_batch_size exceeds a step's (edge-repo check: ensemble-batch);
    a pick below the ensemble's would leave a repository that does not load. Written as edge-repo lays out "Your
    first model": the classify ensemble batches 8 over the classifier."""
    from orinkit.repo.check import check_repository
    from orinkit.tune.tuner import _ensemble_floor

    step = format_config(base_config(8)).replace('name: "det"', 'name: "classifier"')
    (tmp_path / "classifier" / "1").mkdir(parents=True)
    (tmp_path / "classifier" / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (tmp_path / "classifier" / "config.pbtxt").write_text(step)
    (tmp_path / "classify" / "1").mkdir(parents=True)
    (tmp_path / "classify" / "config.pbtxt").write_text('''name: "classify"
platform: "ensemble"
max_batch_size: 8
input { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }
output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }
ensemble_scheduling { step { model_name: "classifier" model_version: -1
  input_map { key: "x" value: "x" } output_map { key: "y" value: "y" } } }
''')
    assert not [f for f in check_repository(tmp_path, python=None) if f.severity == "error"]
    floor, reason = _ensemble_floor(tmp_path, "classifier")
    assert (floor, reason) == (8, "the ensemble 'classify' batches 8")
    assert batch_sizes_for(base_config(8), None, floor, reason) == (8,)
    assert _ensemble_floor(tmp_path, "classify") == (0, "")  # nothing runs the ensemble itself as a step
    with pytest.raises(TuneInputError, match="may not batch less than 8 .the ensemble 'classify' batches 8."):
        batch_sizes_for(base_config(8), 4, floor, reason)
    # What the pick would have written (max_batch_size 4) is what check refuses.
    (tmp_path / "classifier" / "config.pbtxt").write_text(step.replace("max_batch_size: 8", "max_batch_size: 4"))
    assert "ensemble-batch" in {f.code for f in check_repository(tmp_path, python=None)}


def test_the_grid_varies_the_delay_only_with_a_batcher():
    grid = SearchSpace(instances=(1, 2), batch_sizes=(1, 4), delays_us=(0, 100)).grid()
    assert len(grid) == 2 * (1 + 2)
    assert Candidate(1, 1, 0) in grid and Candidate(1, 1, 100) not in grid
