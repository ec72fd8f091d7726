"""``edge-tune`` as a library: a model's serving configuration (instances, batching, queue delay, on an Orin the
instance kind) measured on the machine that serves it, under latency and memory budgets.

>>> from orinkit.tune import TuneOptions, tune
>>> report = tune(TuneOptions("classifier", "models", latency_budget_ms=20))  # doctest: +SKIP
>>> report["pick"]["label"]  # doctest: +SKIP
'2 inst, batch 8 delay 500 us'
"""

from orinkit.tune.errors import (
    ApplyError,
    BudgetUnmetError,
    PowerModeChangedError,
    TuneError,
    TuneInputError,
    TuneServerError,
)
from orinkit.tune.measure import Budgets, Level, Measurement, Measurer
from orinkit.tune.report import plot, table, write_json
from orinkit.tune.search import exhaustive, greedy, pick
from orinkit.tune.space import Candidate, SearchSpace, configure
from orinkit.tune.tuner import TuneOptions, tune

__all__ = [
    "ApplyError",
    "Budgets",
    "BudgetUnmetError",
    "Candidate",
    "Level",
    "Measurement",
    "Measurer",
    "PowerModeChangedError",
    "SearchSpace",
    "TuneError",
    "TuneInputError",
    "TuneOptions",
    "TuneServerError",
    "configure",
    "exhaustive",
    "greedy",
    "pick",
    "plot",
    "table",
    "tune",
    "write_json",
]
