"""A ring's desired state in the bucket (``rings/RING.json``): read it, and replace it whole with the next
generation.

Writing is a compare-and-swap on the ETag read just before (``If-Match``; ``If-None-Match: *`` for a ring's first
state), so two rollouts writing one ring at once cannot both take the same generation: the loser gets a
:class:`StaleWriteError` and may simply run again. A store without conditional writes ignores the condition and
the last writer wins.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from orinkit.fleet.bucket import Bucket
from orinkit.fleet.errors import StaleWriteError, UnknownVersionError, VersionExistsError
from orinkit.fleet.layout import MANIFEST, DesiredState, checked_name, ring_key, version_prefix


def read_desired_state(bucket: Bucket, ring: str) -> tuple[DesiredState | None, str | None]:
    """The ring's desired state and its ETag; ``(None, None)`` when the ring has none yet."""
    data, etag = bucket.read_if_changed(ring_key(ring), None)
    return (DesiredState.from_json(data), etag) if data is not None else (None, None)


def write_desired_state(bucket: Bucket, ring: str, models: Mapping[str, int], note: str = "") -> DesiredState:
    """Replace the ring's desired state with ``models`` (model → version; models left out are no longer wanted
    on the ring) as the next generation. Every named version must have its manifest in the bucket."""
    models = {checked_name("model", name): int(version) for name, version in models.items()}
    missing = [f"{name} version {version}" for name, version in sorted(models.items())
               if not bucket.exists(f"{version_prefix(name, version)}/{MANIFEST}")]
    if missing:
        raise UnknownVersionError(f"{bucket.url} holds no {', '.join(missing)} (no manifest there)",
                                  hint="push it first: edge-repo push REPO " + str(bucket.url))
    previous, etag = read_desired_state(bucket, ring)
    state = DesiredState(ring, models, (previous.generation if previous else 0) + 1, time.time(), note)
    try:
        if etag is None:
            bucket.write(ring_key(ring), state.to_json(), if_absent=True)
        else:
            bucket.write(ring_key(ring), state.to_json(), if_match=etag)
    except VersionExistsError as exc:  # the ring's first state, written by someone else meanwhile
        raise StaleWriteError(f"ring {ring}'s desired state was written by another rollout meanwhile",
                              hint="run the command again: it starts from the state now in the bucket") from exc
    return state
