"""How a Client retries a call the server could not take (UNAVAILABLE: restarting, overloaded, not ready)."""

from __future__ import annotations

from dataclasses import dataclass

from orinkit.client.errors import InvalidInputError


@dataclass(frozen=True)
class Retry:
    """UNAVAILABLE is retried (inference is idempotent) until the call's deadline (``timeout_s``), waiting
    ``backoff_s`` doubled each time up to ``max_backoff_s``, each wait ending as soon as the server reports ready
    again. ``attempts`` caps the tries; without a deadline the cap is 8. A shared-memory region the server forgot
    (it restarted) is registered again and the call repeated, within the same deadline."""

    attempts: int | None = None
    backoff_s: float = 0.05
    max_backoff_s: float = 1.0

    def __post_init__(self) -> None:
        if self.attempts is not None and self.attempts < 1:
            raise InvalidInputError(f"Retry(attempts={self.attempts}) makes no call",
                                    hint="use 1 or more, or None for 'until the deadline'")
        if self.backoff_s < 0 or self.max_backoff_s < self.backoff_s:
            raise InvalidInputError("Retry needs 0 <= backoff_s <= max_backoff_s", hint="e.g. Retry(backoff_s=0.05)")
