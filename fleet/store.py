"""The agent's own folder beside the repository: staging for downloads, and each placed version's gate and result.

``<repository's parent>/.<repository name>.fleet/`` by default: on the repository's filesystem (placing a version
is a rename), outside the repository (Triton would take any folder in it for a model). The gates are kept so that
the heartbeat can measure latency and a restarted agent knows which serving versions passed. Python 3.10.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from orinkit.core.files import atomic_write_text
from orinkit.fleet.gate import Gate


def default_state_dir(repository: Path) -> Path:
    repository = Path(repository).resolve()
    return repository.parent / f".{repository.name}.fleet"


class LocalStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.staging_root = self.root / "staging"
        self.staging_root.mkdir(parents=True, exist_ok=True)
        # Gates hold real inputs (camera frames, say): only the agent's user reads them.
        os.chmod(self.root, 0o700)

    def staging(self, model: str, version: int) -> Path:
        return self.staging_root / f"{model}-{version}"

    def clear_staging(self, model: str, version: int) -> None:
        shutil.rmtree(self.staging(model, version), ignore_errors=True)

    def _gate_dir(self, model: str, version: int) -> Path:
        return self.root / "gates" / model / str(version)

    def keep_gate(self, model: str, version: int, npz: Path | None, spec: dict | None) -> None:
        folder = self._gate_dir(model, version)
        folder.mkdir(parents=True, exist_ok=True)
        if npz is not None:
            shutil.copyfile(npz, folder / "gate.npz")
            atomic_write_text(folder / "gate.json", json.dumps(spec or {}))
        else:
            (folder / "gate.npz").unlink(missing_ok=True)
            atomic_write_text(folder / "gate.json", "null")

    def gate(self, model: str, version: int) -> tuple[bool, Gate | None]:
        """(known, gate): known is False when this version's gate was never fetched here."""
        folder = self._gate_dir(model, version)
        try:
            spec = json.loads((folder / "gate.json").read_text())
        except (OSError, ValueError):
            return False, None
        if spec is None:
            return True, None
        try:
            return True, Gate.load(folder / "gate.npz", spec)
        except (OSError, ValueError):
            return False, None

    def record_result(self, model: str, version: int, status: str) -> None:
        folder = self._gate_dir(model, version)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "result.json", json.dumps({"status": status}))

    def result(self, model: str, version: int) -> str | None:
        try:
            return json.loads((self._gate_dir(model, version) / "result.json").read_text())["status"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def forget_older(self, model: str, keep: set[int]) -> None:
        folder = self.root / "gates" / model
        if folder.is_dir():
            for path in folder.iterdir():
                if path.name.isdigit() and int(path.name) not in keep:
                    shutil.rmtree(path, ignore_errors=True)

