"""Task metrics written as a user would (``--metric user_metrics:NAME``), for the gate's tests."""

from __future__ import annotations

import numpy as np


def never_agrees(reference, candidate) -> bool:
    return False


def mean_within_1_percent(reference, candidate) -> float:
    """The share of samples whose mean output FP16 keeps within 1 % of FP32's."""
    close = [abs(float(np.mean(c[n])) - float(np.mean(r[n]))) <= 0.01 * abs(float(np.mean(r[n]))) + 1e-6
             for r, c in zip(reference, candidate) for n in r]
    return sum(close) / len(close)


def not_a_number(reference, candidate):
    return "yes"
