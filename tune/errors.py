"""Errors of ``orinkit.tune``.

::

    TuneError
    ├── TuneInputError         a model, option or budget the tuner cannot use (exit 4)
    ├── BudgetUnmetError       no configuration met the budgets; names the closest one (exit 9)
    ├── TuneServerError        the server died or stopped answering mid-sweep; nothing was applied (exit 6)
    ├── PowerModeChangedError  the Jetson's power mode or clocks changed mid-sweep; nothing was applied (exit 9)
    └── ApplyError             the pick could not be written or did not load; the old config serves (exit 6)
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, EXIT_BUDGET, EXIT_SERVER, OrinkitError


class TuneError(OrinkitError):
    exit_code = EXIT_SERVER


class TuneInputError(TuneError):
    exit_code = EXIT_BAD_INPUT


class BudgetUnmetError(TuneError):
    """``report`` holds every measurement, so a caller can still show what was tried."""

    exit_code = EXIT_BUDGET

    def __init__(self, message: str, *, hint: str | None = None, report: dict | None = None) -> None:
        super().__init__(message, hint=hint)
        self.report = report


class TuneServerError(TuneError):
    pass


class PowerModeChangedError(TuneError):
    exit_code = EXIT_BUDGET


class ApplyError(TuneError):
    pass
