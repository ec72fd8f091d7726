"""A OneFlow saved model laid out for Triton's OneFlow backend, and the two layout mistakes edge-repo check catches.

This machine's tritonserver has no OneFlow backend, so nothing is served: the model is placed as
``<repo>/<name>/1/model/`` with its config and checked without a server. Then the two ways a hand-made
layout goes wrong are shown: an empty ``model/`` folder, and the saved folder nested one level too deep
(``1/model/model/...``, what placing the folder *around* the export gives).

    python examples/oneflow_layout.py [--work DIR]
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from _runner import run_example

from orinkit.repo.add import add_model
from orinkit.repo.check import check_repository, server_defaults
from orinkit.repo.errors import ArtifactError
from orinkit.repo.options import ModelOptions
from orinkit.repo.signature import TensorSpec

# OneFlow's backend binds tensors by position through the names INPUT_<index> and OUTPUT_<index>.
IO = {"inputs": [TensorSpec.parse("INPUT_0:FP32:3x224x224")], "outputs": [TensorSpec.parse("OUTPUT_0:FP32:1000")]}


def stand_in_saved_model(folder: Path) -> Path:
    """A stand-in for what ``flow.save(graph, folder)`` writes for an nn.Graph (its graph, and a folder of
    ``meta`` and data per parameter). OneFlow is not installable here, so the files hold placeholder bytes:
    enough for the layout and the check, never for a server."""
    for parameter in ("fc.weight", "fc.bias"):
        (folder / parameter).mkdir(parents=True, exist_ok=True)
    (folder / "meta").write_text("stand-in graph of a ResNet-50 nn.Graph (OneFlow is not installable here)\n")
    for parameter in ("fc.weight", "fc.bias"):
        (folder / parameter / "meta").write_text(f"stand-in meta of {parameter}\n")
        (folder / parameter / "out").write_bytes(bytes(64))
    return folder


def show(findings, title: str) -> list[tuple[str, str]]:
    print(f"{title}: {len(findings) or 'no'} finding(s)")
    for finding in findings:
        print(f"  {finding}")
    return [(f.model, f.code) for f in findings]


def run(work: Path) -> dict:
    repo = work / "models"
    options = ModelOptions(max_batch_size=8)  # dims above exclude the batch axis
    saved = stand_in_saved_model(work / "export" / "model")
    placed = add_model(repo, saved, name="resnet50_oneflow", runtime="oneflow", options=options, **IO)
    print(f"placed {placed.name} as {placed.runtime.value}:")
    for path in sorted(placed.path.rglob("*")):
        print(f"  {path.relative_to(repo)}{'/' if path.is_dir() else ''}")
    # Portable check: no backend folder or stub Python to judge by, so it judges the layout and configs only
    # (what the Orin's OneFlow-enabled server needs).
    facts = {"clean": show(check_repository(repo, backend_directory=None, python=None), "check (portable)")}
    backends, _, _ = server_defaults()
    if backends is not None:  # judged by this machine's server instead, the missing backend is what stands out
        local = check_repository(repo, backend_directory=backends, python=None)
        facts["local_server"] = show(local, "check against this machine's tritonserver")

    # Mistake 1: the export went elsewhere (or failed), leaving an empty folder. Mistake 2: the folder *around*
    # the export is given, so the files would land in 1/model/model/. add refuses both before placing anything:
    empty = work / "empty_export" / "model"
    empty.mkdir(parents=True, exist_ok=True)
    refusals = []
    for name, folder in (("empty_oneflow", empty), ("nested_oneflow", work / "export")):
        try:
            add_model(repo, folder, name=name, runtime="oneflow", options=options, **IO)
        except ArtifactError as exc:
            refusals.append(name)
            print(f"add refused {name}: {exc}")
    facts["refused_by_add"] = refusals
    # Folders copied by hand (rsync, a script) get no such guard: check finds the same two mistakes there.
    for name, fill in (("empty_oneflow", None), ("nested_oneflow", saved)):
        shutil.copytree(placed.path, repo / name, ignore=shutil.ignore_patterns("model", ".orinkit-*"))
        (repo / name / "config.pbtxt").write_text(
            (placed.path / "config.pbtxt").read_text().replace('"resnet50_oneflow"', f'"{name}"'))
        target = repo / name / "1" / "model"
        target.mkdir()
        if fill is not None:
            shutil.copytree(fill, target / "model")
    facts["mistakes"] = show(check_repository(repo, backend_directory=None, python=None),
                             "check after copying the two mistakes in by hand")
    return facts


def main(argv: list[str] | None = None, facts: dict | None = None) -> int:
    def passed(m):
        expected = [("empty_oneflow", "oneflow-layout"), ("nested_oneflow", "oneflow-layout")]
        return m["clean"] == [] and len(m["refused_by_add"]) == 2 and sorted(m["mistakes"]) == expected

    return run_example(__doc__, run, passed, argv, facts, prefix="oneflow")


if __name__ == "__main__":
    sys.exit(main())
