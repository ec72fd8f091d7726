"""A ResNet classifier rolled out to version 2 under load, then rolled back, with no failed request.

Lays out ``classify`` = image step (64x64 RGB, ImageNet mean/std) -> ResNet-18 (seeded, untrained: nothing is
downloaded) -> top-5, starts tritonserver in explicit model control, unloads and loads the ensemble as
``edge-repo unload``/``load`` do, then deploys a differently seeded ResNet as version 2 while a thread keeps
classifying, checks the served answer is version 2's, rolls back and checks version 1's answer is back.

    python examples/resnet_rollout.py [--work DIR]
"""

from __future__ import annotations

import io
import itertools
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch
import torchvision
from _runner import run_example
from PIL import Image

from orinkit.client import Client
from orinkit.convert import export_torch
from orinkit.core.errors import OrinkitError
from orinkit.repo.add import add_model
from orinkit.repo.deploy import deploy_version, load_versions, rollback
from orinkit.repo.ensemble import add_ensemble
from orinkit.repo.journal import record_loaded
from orinkit.repo.server_api import RepositoryAPI
from orinkit.repo.steps import ImagePreprocess, TopK, add_step
from orinkit.server.local import start_on_free_ports

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def export_resnet(seed: int, path: Path, image: np.ndarray) -> int:
    """A seeded ResNet-18 exported for 3x64x64 with a dynamic batch; returns its top-1 for ``image`` in torch."""
    torch.manual_seed(seed)
    model = torchvision.models.resnet18(weights=None).eval()
    pixels = torch.from_numpy(((image / 255 - MEAN) / STD).transpose(2, 0, 1)[None].astype(np.float32))
    export_torch(model, [pixels], path, input_names=["input"], output_names=["logits"], dynamic_batch=True)
    with torch.no_grad():
        return int(model(pixels).argmax())


def build_repository(repo: Path, v1: Path) -> None:
    add_model(repo, v1, name="resnet")
    add_step(repo, ImagePreprocess(width=64, height=64, color_order="RGB", mean=MEAN, std=STD), name="classify_pre")
    add_step(repo, TopK(k=5, num_classes=1000), name="classify_top")
    add_ensemble(repo, {
        "name": "classify",
        "steps": [
            {"model": "classify_pre", "inputs": {"IMAGE": "image"}, "outputs": {"TENSOR": "pixels"}},
            {"model": "resnet", "inputs": {"input": "pixels"}, "outputs": {"logits": "logits"}},
            {"model": "classify_top", "inputs": {"LOGITS": "logits"},
             "outputs": {"SCORES": "scores", "CLASS_IDS": "class_ids"}},
        ],
        "outputs": ["scores", "class_ids"],
    })


def states(api: RepositoryAPI, name: str) -> str:
    return ", ".join(f"v{m.version or '-'} {m.state or 'NOT LOADED'}" + (f" ({m.reason})" if m.reason else "")
                     for m in api.index() if m.name == name)


def top1(classify: Client, png: bytes) -> int:
    return int(classify(np.array([png], dtype=np.object_), outputs=["class_ids"])[0])


def keep_classifying(url: str, png: bytes, halt: threading.Event, seen: list) -> None:
    """Classify ``png`` until ``halt``; ``seen`` gets each answer (a class id) or failure (its message)."""
    with Client(url, "classify") as classify:  # default retries: what a real client of the server would use
        while not halt.is_set():
            try:
                seen.append(top1(classify, png))
            except OrinkitError as exc:
                seen.append(str(exc))


def run(work: Path) -> dict:
    image = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "PNG")  # 64x64 already: the image step's resize changes nothing
    png = buffer.getvalue()
    answers = {v: export_resnet(v, work / f"resnet_v{v}.onnx", image) for v in (1, 2)}  # seeds 1 and 2
    print(f"top-1 in torch: version 1 says class {answers[1]}, version 2 says class {answers[2]}")
    repo = work / "models"
    build_repository(repo, work / "resnet_v1.onnx")

    models = ("classify_pre", "resnet", "classify_top", "classify")
    server = start_on_free_ports(repo, work / "tritonserver.log", model_control_mode="explicit", load_models=models)
    url, facts, seen, halt = server.command.grpc_url, {"answers": answers}, [], threading.Event()
    load = threading.Thread(target=keep_classifying, args=(url, png, halt, seen), daemon=True)
    try:
        record_loaded(repo, server.command.http_url)  # as edge-serve does: these versions are proven to load
        with Client(url, "classify") as classify, RepositoryAPI(url) as api:
            facts["served_v1"] = top1(classify, png)
            print(f"served top-1 (version 1): {facts['served_v1']}")
            api.unload("classify")  # edge-repo unload classify
            api.wait_unloaded("classify", 60.0)
            facts["unloaded_state"] = states(api, "classify")
            print(f"after unload: classify {facts['unloaded_state']}")
            load_versions(repo, "classify", server=url)  # edge-repo load classify
            facts["loaded_state"] = states(api, "classify")
            print(f"after load:   classify {facts['loaded_state']}")

            load.start()
            time.sleep(1.0)  # requests are flowing before the rollout starts
            started = time.perf_counter()
            deployed = deploy_version(repo, "resnet", work / "resnet_v2.onnx", server=url, progress=print)
            print(f"deploy took {time.perf_counter() - started:.1f} s (placing, checking, loading)")
            facts["served_v2"] = top1(classify, png)
            print(f"served top-1 after the deploy (version {deployed.version}): {facts['served_v2']}")
            back = rollback(repo, "resnet", server=url, progress=print)
            facts["served_after_rollback"] = top1(classify, png)
            print(f"served top-1 after the rollback (version {back.now_latest}): {facts['served_after_rollback']}")
            time.sleep(0.5)
    finally:
        halt.set()
        if load.is_alive():
            load.join()
        server.stop()
    failures = [s for s in seen if isinstance(s, str)]
    runs = [(answer, len(list(group))) for answer, group in itertools.groupby(s for s in seen if isinstance(s, int))]
    facts.update(requests=len(seen), failures=len(failures), answer_runs=runs)
    print(f"during the rollout and rollback: {len(seen)} requests, {len(failures)} failed; answers in order: "
          + ", ".join(f"class {answer} x{count}" for answer, count in runs))
    for failure in failures[:3]:
        print(f"  failed: {failure}")
    return facts


def main(argv: list[str] | None = None, facts: dict | None = None) -> int:
    return run_example(__doc__, run, lambda m: (m["failures"] == 0 and m["served_v2"] == m["answers"][2]
                           and m["served_v1"] == m["served_after_rollback"] == m["answers"][1]),
                       argv, facts, prefix="rollout")


if __name__ == "__main__":
    sys.exit(main())
