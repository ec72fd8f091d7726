"""The client tests' repository, laid out with orinkit's own repository library from tests/data/client_models."""

from __future__ import annotations

from pathlib import Path

from conftest import DATA

from orinkit.repo.add import add_model
from orinkit.repo.options import ModelOptions, SequenceBatching
from orinkit.repo.signature import TensorSpec

MODELS = DATA / "client_models"
TYPES = ["FP32:3", "FP16:3", "INT32:2", "INT64:2", "UINT8:4", "BYTES:1"]


def _specs(prefix: str, items) -> list[TensorSpec]:
    return [TensorSpec.parse(f"{prefix}_{item.split(':')[0]}:{item}") for item in items]


def build_client_repository(repository: Path) -> Path:
    add_model(repository, MODELS / "types_echo.py", name="types_echo", inputs=_specs("IN", TYPES),
              outputs=_specs("OUT", TYPES), options=ModelOptions(max_batch_size=8))
    add_model(repository, MODELS / "plus_one.py", name="plus_one", inputs=[TensorSpec.parse("X:FP32:2x3")],
              outputs=[TensorSpec.parse("Y:FP32:2x3")], options=ModelOptions(max_batch_size=0))
    add_model(repository, MODELS / "sleepy.py", name="sleepy", inputs=[TensorSpec.parse("MS:INT32:1")],
              outputs=[TensorSpec.parse("DONE:INT32:1")],
              options=ModelOptions(max_batch_size=4, instance_count=4))
    add_model(repository, MODELS / "frame_stats.py", name="frame_stats",
              inputs=[TensorSpec.parse("FRAME:FP32:3x360x640")],
              outputs=[TensorSpec.parse("MEANS:FP32:3"), TensorSpec.parse("ECHO:FP32:3x360x640")],
              options=ModelOptions(max_batch_size=2, instance_count=2))
    add_model(repository, MODELS / "row_sums.py", name="row_sums", inputs=[TensorSpec.parse("ROWS:FP32:-1x4")],
              outputs=[TensorSpec.parse("SUMS:FP32:4")], options=ModelOptions(max_batch_size=4))
    return repository


def add_bytes_model(repository: Path) -> Path:
    """bytes_lengths: a batching model whose BYTES input takes any number of items per sample (dims [-1]); it
    answers each item's length in bytes (what arrived, trailing NUL bytes included)."""
    add_model(repository, MODELS / "bytes_lengths.py", name="bytes_lengths", inputs=[TensorSpec.parse("TEXT:BYTES:-1")],
              outputs=[TensorSpec.parse("LENGTHS:INT64:-1")], options=ModelOptions(max_batch_size=4))
    return repository


def build_stream_repository(repository: Path, only: tuple[str, ...] | None = None) -> Path:
    """Decoupled models (count_stream, broken_stream), a stateful one (running_sum) and plus_one, which is neither;
    ``only`` some of them (fewer Python stubs: the server starts and stops faster)."""
    one = TensorSpec.parse
    models = {
        "count_stream": ([one("N:INT32:1"), one("DELAY_MS:INT32:1")], [one("VALUE:INT32:1")],
                         ModelOptions(max_batch_size=0, instance_count=2, decoupled=True)),
        "broken_stream": ([one("N:INT32:1")], [one("VALUE:INT32:1")], ModelOptions(max_batch_size=0, decoupled=True)),
        # START/END as INT32 0/1 and CORRID as UINT64, the sequence batcher's defaults in orinkit.
        "running_sum": ([one("X:INT32:1")], [one("SUM:INT32:1"), one("STEP:INT32:1")],
                        ModelOptions(max_batch_size=4, sequence=SequenceBatching())),
        "plus_one": ([one("X:FP32:2x3")], [one("Y:FP32:2x3")], ModelOptions(max_batch_size=0)),
    }
    for name, (inputs, outputs, options) in models.items():
        if only is None or name in only:
            add_model(repository, MODELS / f"{name}.py", name=name, inputs=inputs, outputs=outputs, options=options)
    return repository
