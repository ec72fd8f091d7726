"""Ensembles from a small spec (YAML or Python): the maps, the ensemble's own I/O and batch settings are filled
in from the step models' configs, and maps whose names, dtypes or shapes do not line up are refused."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from orinkit.repo.configs import signature_of
from orinkit.repo.errors import EnsembleError, RepoError
from orinkit.repo.layout import check_model_name, new_model_folder
from orinkit.repo.pbtxt import CONFIG_NAME, read_config, write_config
from orinkit.repo.signature import TensorSpec, dims_compatible


@dataclass(frozen=True)
class EnsembleStep:
    """One model in the flow: ``inputs`` maps the model's input names to ensemble tensors, ``outputs`` its
    output names to ensemble tensors."""

    model: str
    inputs: Mapping[str, str]
    outputs: Mapping[str, str]
    version: int = -1


@dataclass(frozen=True)
class EnsembleSpec:
    name: str
    steps: tuple[EnsembleStep, ...]
    outputs: tuple[str, ...]  # ensemble tensors the ensemble returns
    max_batch_size: int | None = None  # None: the smallest of the steps'

    @classmethod
    def from_dict(cls, data: Mapping) -> EnsembleSpec:
        known = {"name", "steps", "outputs", "max_batch_size"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise EnsembleError(f"ensemble spec has unknown keys: {', '.join(unknown)}",
                                hint=f"use only {', '.join(sorted(known))}")
        for index, step in enumerate(data.get("steps") or ()):
            extra = sorted(set(step) - {"model", "inputs", "outputs", "version"}) if isinstance(step, Mapping) else []
            if extra:
                raise EnsembleError(f"step {index + 1} has unknown keys: {', '.join(extra)}",
                                    hint="a step has model, inputs, outputs and version (stop_if_empty is for "
                                         "edge-repo step bls)")
        try:
            steps = tuple(
                EnsembleStep(
                    model=str(s["model"]),
                    inputs={str(k): str(v) for k, v in (s.get("inputs") or {}).items()},
                    outputs={str(k): str(v) for k, v in (s.get("outputs") or {}).items()},
                    version=int(s.get("version", -1)),
                )
                for s in data["steps"]
            )
            return cls(str(data["name"]), steps, tuple(str(o) for o in data["outputs"]), data.get("max_batch_size"))
        except (KeyError, TypeError, AttributeError) as exc:
            raise EnsembleError(
                f"ensemble spec is incomplete: {exc!r}",
                hint="give name, steps (each with model, inputs, outputs) and outputs",
            ) from exc

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> EnsembleSpec:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise EnsembleError(f"cannot read ensemble spec {path}: {exc.strerror or exc}",
                                hint="check the path") from exc
        return cls.from_yaml(text)

    @classmethod
    def from_yaml(cls, text: str) -> EnsembleSpec:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise EnsembleError(f"ensemble spec is not valid YAML: {exc}", hint="fix the YAML") from exc
        if not isinstance(data, dict):
            raise EnsembleError("ensemble spec must be a mapping", hint="start with name:, steps:, outputs:")
        return cls.from_dict(data)


def _where(index: int, step: EnsembleStep) -> str:
    return f"step {index + 1} (model '{step.model}')"


def _no_such(where: str, kind: str, name: str, names: list[str]) -> EnsembleError:
    """A map key the step's model lacks, with the model's closest name (a typo is the usual cause)."""
    close = difflib.get_close_matches(name, names, n=1)
    guess = f" (did you mean '{close[0]}'?)" if close else ""
    return EnsembleError(f"{where}: the model has no {kind} '{name}'{guess}", code="unknown-tensor",
                         hint=f"its {kind}s are {', '.join(names) or 'none'}")


def _ordered(spec: EnsembleSpec) -> list[int]:
    """Step indexes in an order where every tensor is produced before it is consumed; a cycle is an error."""
    producer = {t: i for i, s in enumerate(spec.steps) for t in s.outputs.values()}
    needs = {i: {producer[t] for t in s.inputs.values() if t in producer} for i, s in enumerate(spec.steps)}
    order, done = [], set()
    while len(order) < len(spec.steps):
        ready = [i for i in needs if i not in done and needs[i] <= done]
        if not ready:
            stuck = sorted(i for i in needs if i not in done)
            raise EnsembleError(
                f"ensemble '{spec.name}' has a cycle through {', '.join(_where(i, spec.steps[i]) for i in stuck)}",
                code="cycle",
                hint="a step may only consume tensors produced by steps before it or by the ensemble's inputs",
            )
        order.extend(ready)
        done.update(ready)
    return order


def build_ensemble_config(spec: EnsembleSpec, configs: Mapping[str, mc.ModelConfig]) -> mc.ModelConfig:
    """The ensemble's config, checked against the step models' ``configs`` (name → ModelConfig)."""
    check_model_name(spec.name)
    if not spec.steps:
        raise EnsembleError(f"ensemble '{spec.name}' has no steps", code="spec", hint="add at least one step")
    signatures = {}
    for i, step in enumerate(spec.steps):
        if step.model not in configs:
            raise EnsembleError(f"{_where(i, step)}: no such model in the repository",
                                code="unknown-model", hint="add that model first, or fix the name")
        signatures[i] = signature_of(configs[step.model])

    produced: dict[str, tuple[int, TensorSpec]] = {}
    for i, step in enumerate(spec.steps):
        sig = signatures[i]
        for model_name, tensor in step.outputs.items():
            spec_out = sig.output(model_name)
            if spec_out is None:
                raise _no_such(_where(i, step), "output", model_name, [t.name for t in sig.outputs])
            if tensor in produced:
                raise EnsembleError(
                    f"{_where(i, step)}: tensor '{tensor}' is already produced by "
                    f"{_where(produced[tensor][0], spec.steps[produced[tensor][0]])}",
                    code="duplicate-tensor", hint="give each produced tensor its own name",
                )
            produced[tensor] = (i, spec_out)
    _ordered(spec)

    consumed: dict[str, tuple[int, TensorSpec]] = {}
    for i, step in enumerate(spec.steps):
        sig = signatures[i]
        # Unknown keys first, as Triton checks them: a misspelt key also leaves the real input unmapped, and only
        # the key names the typo.
        for model_name in step.inputs:
            if sig.input(model_name) is None:
                raise _no_such(_where(i, step), "input", model_name, [t.name for t in sig.inputs])
        # Triton lets an ensemble leave a step's optional inputs unmapped.
        optional = {t.name for t in configs[step.model].input if t.optional}
        unmapped = [t.name for t in sig.inputs if t.name not in step.inputs and t.name not in optional]
        if unmapped:
            raise EnsembleError(f"{_where(i, step)}: inputs {', '.join(unmapped)} are not mapped",
                                code="unmapped-input", hint="map every model input to an ensemble tensor")
        for model_name, tensor in step.inputs.items():
            wanted = sig.input(model_name)
            source = produced.get(tensor) or consumed.get(tensor)
            if source is not None:
                have = source[1]
                if have.dtype != wanted.dtype:
                    raise EnsembleError(
                        f"{_where(i, step)}: input '{model_name}' takes {wanted.dtype}, but tensor '{tensor}' is "
                        f"{have.dtype}", code="dtype", hint="insert a step that casts, or fix the map")
                if not dims_compatible(have.dims, wanted.dims):
                    raise EnsembleError(
                        f"{_where(i, step)}: input '{model_name}' takes dims {list(wanted.dims)}, but tensor "
                        f"'{tensor}' has dims {list(have.dims)}", code="shape",
                        hint="fix the map or the models' shapes")
            if tensor not in produced and tensor not in consumed:
                consumed[tensor] = (i, wanted)

    missing = [t for t in spec.outputs if t not in produced]
    if missing:
        raise EnsembleError(f"ensemble '{spec.name}' outputs {', '.join(missing)}, which no step produces",
                            code="unproduced-output",
                            hint="map a step's output to that tensor, or drop it from outputs")

    limits = [signatures[i].max_batch_size for i in signatures]
    limit = min(limits)
    max_batch = limit if spec.max_batch_size is None else int(spec.max_batch_size)
    if max_batch > limit or (max_batch > 0 and 0 in limits):
        raise EnsembleError(
            f"ensemble '{spec.name}' max_batch_size {max_batch} exceeds a step's ({limit})",
            code="batch", hint=f"use at most {limit}; every step must batch for the ensemble to batch",
        )
    if max_batch == 0 and any(limits):
        if spec.max_batch_size is None:
            batching = [spec.steps[i].model for i in signatures if signatures[i].max_batch_size > 0]
            still = [spec.steps[i].model for i in signatures if signatures[i].max_batch_size == 0]
            raise EnsembleError(
                f"ensemble '{spec.name}' mixes steps that batch ({', '.join(batching)}) and steps that do not "
                f"({', '.join(still)})", code="batch", hint="place every step with a batch axis, or none")
        raise EnsembleError(f"ensemble '{spec.name}' does not batch while its steps do",
                            code="batch", hint="drop max_batch_size: 0 from the spec, or make every step "
                                               "non-batching")

    config = mc.ModelConfig(name=spec.name, platform="ensemble", max_batch_size=max_batch)
    for tensor, (_, t) in consumed.items():
        config.input.add(name=tensor, data_type=mc.DataType.Value(_config_type(t.dtype)), dims=t.dims or (1,))
    for tensor in spec.outputs:
        t = produced[tensor][1]
        config.output.add(name=tensor, data_type=mc.DataType.Value(_config_type(t.dtype)), dims=t.dims or (1,))
    for step in spec.steps:
        message = config.ensemble_scheduling.step.add(model_name=step.model, model_version=step.version)
        for key, value in step.inputs.items():
            message.input_map[key] = value
        for key, value in step.outputs.items():
            message.output_map[key] = value
    return config


def _config_type(name: str) -> str:
    from orinkit.formats.dtypes import dtype

    return dtype(name).config_name


def repository_configs(repository: Path) -> dict[str, mc.ModelConfig]:
    configs = {}
    for path in sorted(repository.glob(f"*/{CONFIG_NAME}")):
        try:
            configs[path.parent.name] = read_config(path)
        except RepoError:
            continue
    return configs


def add_ensemble(repository: str | os.PathLike[str], spec: EnsembleSpec | Mapping) -> Path:
    """Write the ensemble ``spec`` into ``repository`` (config and its empty version folder ``1/``)."""
    repository = Path(repository)
    if not isinstance(spec, EnsembleSpec):
        spec = EnsembleSpec.from_dict(spec)
    config = build_ensemble_config(spec, repository_configs(repository))
    with new_model_folder(repository, spec.name, hint="choose another name") as staging:
        (staging / "1").mkdir()
        write_config(staging / CONFIG_NAME, config)
    return repository / spec.name
