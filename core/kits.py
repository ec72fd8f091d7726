"""Task kits: what a task (lanes, object detection, ...) teaches the video pipeline, the device page and the gates.

A kit is a package of its own (``orinkit.lanes``, ``orinkit.detect``, or a user's) that exposes one
:class:`TaskKit` object under the entry-point group ``orinkit.kits`` (setup.cfg). video/, ui/ and convert/ find the
kit of a served model through :func:`kit_for` and never import a kit's package: a new task is a new kit, not an
edit in each of them, and the package graph keeps pointing one way (tests/test_layers.py).

A kit is asked about a model through its signature, ``info``: an ``orinkit.client.ModelInfo`` (name, inputs and
outputs with name, dtype and dims, the config's ``parameters``), which the Client reads from the server and the
page builds from the same config JSON (``ModelInfo.from_config``).

A kit that fails to load (a broken install, a missing dependency of its own) is left out with a warning: a video
stream of a classifier must not die because the lane kit cannot import.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from typing import Any

from orinkit.core.errors import EXIT_BAD_INPUT, OrinkitError

GROUP = "orinkit.kits"


class KitError(OrinkitError):
    """A task kit asked for by name that no installed package provides (exit 4)."""

    exit_code = EXIT_BAD_INPUT


class TaskKit:
    """The interface a task kit provides. Subclasses set ``name`` and override what their task has; the defaults
    say "this kit does not know this model" so that a kit may teach only part of it (the page but not video).

    * ``recognizes(info)``: this model answers this kit's task (decided from the signature and the config's
      parameters, never from the model's name).
    * ``describe(info)``: a few words for the page's models table, e.g. "detector, 3 classes".
    * ``adapter(info, **options)``: the video adapter (``orinkit.video.adapters.Adapter``: ``size``,
      ``inputs(frame)``, ``answer(outputs, frame) -> (answer, record)``, ``draw(image, answer)``, and the
      optional ``for_source(name)`` / ``summary()``); an option the kit does not take raises ``KitError``.
    * ``tryout(info, outputs, image_size)``: the page's answer for one uploaded image, a JSON-ready dict with a
      ``"kind"`` the page's script draws (``"lanes"``, ``"detections"``), or None to let the page's generic
      reading (classes, image, tensor) answer.
    * ``metric``: the gates' metric for this task, a ``--metric`` spec (``"module:function"``, or a built-in such as
      ``"boxes"``), or None; ``edge-convert --metric <kit name>`` judges by it.
    """

    name: str = ""
    metric: str | None = None

    def recognizes(self, info) -> bool:
        return False

    def describe(self, info) -> str:
        return self.name

    def adapter(self, info, **options):
        raise KitError(f"the {self.name} kit does not stream video",
                       hint="stream the model without a task, or use a kit that has a video adapter")

    def tryout(self, info, outputs: Mapping[str, Any], image_size: tuple[int, int]) -> dict | None:
        return None


@functools.lru_cache(maxsize=1)
def kits() -> tuple[TaskKit, ...]:
    """The installed kits, in the order of their entry-point names (loaded once per process)."""
    from importlib.metadata import entry_points

    found = []
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        try:
            kit = point.load()
        except Exception as exc:  # noqa: BLE001 - one broken kit must not take the others down
            warnings.warn(f"task kit '{point.name}' ({point.value}) does not load and is left out: {exc!r}",
                          RuntimeWarning, stacklevel=2)
            continue
        found.append(kit() if isinstance(kit, type) else kit)
    return tuple(found)


def kit_for(info) -> TaskKit | None:
    """The first installed kit that recognizes the model ``info`` describes, or None."""
    for kit in kits():
        try:
            if kit.recognizes(info):
                return kit
        except Exception as exc:  # noqa: BLE001 - a kit's guess that crashes is a kit that does not know the model
            warnings.warn(f"task kit '{kit.name}' failed on model '{getattr(info, 'name', '?')}': {exc!r}",
                          RuntimeWarning, stacklevel=2)
    return None


def kit_named(name: str) -> TaskKit:
    """The installed kit called ``name`` (``KitError`` naming the installed ones otherwise)."""
    for kit in kits():
        if kit.name == name:
            return kit
    known = ", ".join(k.name for k in kits()) or "none"
    raise KitError(f"no task kit named '{name}' is installed (installed: {known})",
                   hint="reinstall orinkit (pip install -e .) so its kits register, or give one of the installed")
