"""A BLS model (Python backend) that calls other models in order and stops early on an empty result.

The spec is an ensemble spec (``orinkit.repo.ensemble``) whose steps may also say ``stop_if_empty: TENSOR``:
when that tensor (an output of the step) comes back empty, the chain ends and the later steps never run. The
flow is checked against the step models' configs exactly as an ensemble's is, and the BLS model's inputs and
outputs are the ones the ensemble would have.

```yaml
name: plates
steps:
  - model: plate_detector
    inputs: {image__0: IMAGE}
    outputs: {output__0: BOXES}
    stop_if_empty: BOXES            # no plate: skip the crop and the reader
  - model: plate_reader
    inputs: {image__0: IMAGE, boxes__1: BOXES}
    outputs: {output__0: TEXT}
outputs: [BOXES, TEXT]
```
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from orinkit.repo.add import PlacedModel
from orinkit.repo.configs import Runtime
from orinkit.repo.ensemble import EnsembleSpec, _ordered, build_ensemble_config, repository_configs
from orinkit.repo.errors import EnsembleError
from orinkit.repo.layout import new_model_folder
from orinkit.repo.pbtxt import CONFIG_NAME, write_config
from orinkit.repo.python_model import write_python_files


@dataclass(frozen=True)
class BlsSpec:
    flow: EnsembleSpec
    stop_if_empty: Mapping[int, str]  # step index → tensor whose emptiness ends the chain

    @classmethod
    def from_dict(cls, data: Mapping) -> BlsSpec:
        if not isinstance(data, Mapping) or not isinstance(data.get("steps"), list):
            raise EnsembleError("a BLS spec needs name, steps and outputs", hint="see edge-repo step bls --help")
        stops, steps = {}, []
        for index, step in enumerate(data["steps"]):
            step = dict(step) if isinstance(step, Mapping) else step
            if isinstance(step, dict) and "stop_if_empty" in step:
                stops[index] = str(step.pop("stop_if_empty"))
            steps.append(step)
        return cls(EnsembleSpec.from_dict({**data, "steps": steps}), stops)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BlsSpec:
        import yaml

        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise EnsembleError(f"cannot read BLS spec {path}: {exc.strerror or exc}", hint="check the path") from None
        except yaml.YAMLError as exc:
            raise EnsembleError(f"BLS spec {path} is not valid YAML: {exc}", hint="fix the YAML") from None
        return cls.from_dict(data)


def build_bls_config(spec: BlsSpec, configs: Mapping[str, mc.ModelConfig]) -> mc.ModelConfig:
    flow = build_ensemble_config(spec.flow, configs)  # every map, dtype and shape checked as for an ensemble
    for index, tensor in spec.stop_if_empty.items():
        if tensor not in spec.flow.steps[index].outputs.values():
            raise EnsembleError(f"step {index + 1} (model '{spec.flow.steps[index].model}') stops on '{tensor}', "
                                "which it does not produce", code="spec",
                                hint="name one of that step's output tensors in stop_if_empty")
    order = _ordered(spec.flow)
    chain = {"steps": [{"model": spec.flow.steps[i].model, "inputs": dict(spec.flow.steps[i].inputs),
                        "outputs": dict(spec.flow.steps[i].outputs),
                        **({"stop_if_empty": spec.stop_if_empty[i]} if i in spec.stop_if_empty else {})}
                       for i in order]}
    config = mc.ModelConfig(name=spec.flow.name, backend="python", max_batch_size=flow.max_batch_size)
    config.input.extend(flow.input)
    config.output.extend(flow.output)
    config.instance_group.add(count=1, kind=mc.ModelInstanceGroup.KIND_CPU)
    config.parameters["chain"].string_value = json.dumps(chain)
    return config


def add_bls(repository: str | os.PathLike[str], spec: BlsSpec | Mapping) -> PlacedModel:
    """Write the BLS model ``spec`` describes into ``repository`` (its steps must be there already)."""
    repository = Path(repository)
    if not isinstance(spec, BlsSpec):
        spec = BlsSpec.from_dict(spec)
    config = build_bls_config(spec, repository_configs(repository))
    with new_model_folder(repository, spec.flow.name, hint="choose another name") as staging:
        write_python_files(staging / "1", "orinkit.repo.pymodels.bls_chain")
        write_config(staging / CONFIG_NAME, config)
    return PlacedModel(spec.flow.name, repository / spec.flow.name, 1, Runtime.PYTHON, config)
