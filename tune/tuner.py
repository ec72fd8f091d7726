"""``tune()``: one model's serving configuration measured on the machine that will serve it, and the pick.

It starts a server for the repository (explicit model control) unless given one, sweeps the configurations with
the configured search, puts the model back as the repository has it, and with ``apply`` writes the pick through
:func:`orinkit.repo.change_config` and measures it once more as it now serves.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from orinkit.repo.errors import RepoError
from orinkit.repo.pbtxt import CONFIG_NAME, format_config, read_config
from orinkit.tune.errors import ApplyError, BudgetUnmetError, PowerModeChangedError, TuneInputError
from orinkit.tune.measure import DEFAULT_LEVELS, Budgets, Measurer
from orinkit.tune.memory import board_memory, group_memory
from orinkit.tune.search import closest, exhaustive, greedy, pick
from orinkit.tune.space import (
    DEFAULT_DELAYS_US,
    DEFAULT_INSTANCES,
    SearchSpace,
    batch_sizes_for,
    candidate_of,
    configure,
    tunable,
)

Progress = Callable[[str], None]
CONFIRM = 2  # the best configurations measured again before the pick
CONFIRM_S = 3.0  # seconds of that second measurement, at least
CONFIRM_WARMUP_S = 1.0  # uncounted load before it (and before --apply's run): both follow a fresh load


@dataclass(frozen=True)
class TuneOptions:
    name: str
    repository: Path
    url: str | None = None  # a running server with explicit model control; None: edge-tune starts one
    latency_budget_ms: float | None = None
    memory_budget_mb: float | None = None
    exhaustive: bool = False
    instances: tuple[int, ...] = DEFAULT_INSTANCES
    max_batch_size: int | None = None  # None: up to the model's own max_batch_size
    delays_us: tuple[int, ...] = DEFAULT_DELAYS_US
    kinds: tuple[str, ...] = ("auto",)
    levels: tuple[int, ...] = DEFAULT_LEVELS
    duration_s: float = 2.0
    inputs: Mapping[str, np.ndarray] | None = field(default=None, compare=False)
    payload: bytes | None = field(default=None, compare=False)  # fills BYTES inputs (an encoded image)
    apply: bool = False
    jetson_root: Path = Path("/")  # where the Jetson's facts are read (a captured tree in tests)
    server_log: Path | None = None  # the started server's log (default: a temporary file, removed after)

    def __post_init__(self) -> None:
        object.__setattr__(self, "repository", Path(self.repository))
        for name in ("latency_budget_ms", "memory_budget_mb"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise TuneInputError(f"--{name.replace('_', '-')} {value:g} is not above 0",
                                     hint="give a budget above 0, or none")
        if self.duration_s <= 0 or not self.levels or min(self.levels) < 1:
            raise TuneInputError("the duration must be above 0 and the concurrency levels 1 or more",
                                 hint="e.g. --duration 2 --concurrency 1,2,4,8")


@dataclass
class _Jetson:
    module: str | None
    power_mode: str | None
    clocks_pinned: bool | None
    dla_cores: int | None

    def describe(self) -> dict:
        return {"module": self.module, "power_mode": self.power_mode, "clocks_pinned": self.clocks_pinned}


def _jetson(root: Path) -> _Jetson | None:
    from orinkit.jetson.device import device_info
    from orinkit.jetson.errors import NotAJetsonError

    try:
        info = device_info(root)
    except NotAJetsonError:
        return None
    mode = info.power_mode
    return _Jetson(info.module, None if mode is None else f"{mode.name} (id {mode.id})", info.clocks_pinned,
                   info.dla_cores)


def _power_guard(root: Path, first: _Jetson | None) -> Callable[[], None]:
    if first is None:
        return lambda: None

    def guard() -> None:
        now = _jetson(root)
        if now is None or (now.power_mode, now.clocks_pinned) != (first.power_mode, first.clocks_pinned):
            was = f"{first.power_mode}, clocks {'pinned' if first.clocks_pinned else 'not pinned'}"
            became = "unreadable" if now is None else \
                f"{now.power_mode}, clocks {'pinned' if now.clocks_pinned else 'not pinned'}"
            raise PowerModeChangedError(f"the power mode changed mid-sweep ({was} -> {became}): measurements from "
                                        "both modes cannot be compared, so nothing was picked or applied",
                                        hint="set the mode you will serve in (nvpmodel, jetson_clocks), then tune "
                                             "again")

    return guard


def _space(options: TuneOptions, config, jetson: _Jetson | None, runtime) -> SearchSpace:
    from orinkit.repo.configs import Runtime

    for kind in options.kinds:
        if kind.startswith("dla"):
            core = int(kind[-1])
            if jetson is None:
                raise TuneInputError(f"--kinds {kind}: DLA instances exist only on a Jetson",
                                     hint="tune on the Orin, or drop the DLA kinds")
            if runtime is not Runtime.TENSORRT_PLAN:
                raise TuneInputError(f"--kinds {kind}: '{options.name}' is not a TensorRT engine, and only engines "
                                     "run on a DLA", hint=f"build one with edge-convert --dla-core {core}")
            if jetson.dla_cores is not None and core >= jetson.dla_cores:
                raise TuneInputError(f"--kinds {kind}: this {jetson.module or 'Jetson'} has {jetson.dla_cores} DLA "
                                     "core(s)", hint="drop that kind")
            if _engine_dla_core(options) is None:
                raise TuneInputError(f"--kinds {kind}: the engine of '{options.name}' was built for the GPU",
                                     hint=f"build one for the DLA with edge-convert --dla-core {core} and deploy it")
    floor, reason = _ensemble_floor(options.repository, options.name)
    return SearchSpace(options.instances, batch_sizes_for(config, options.max_batch_size, floor, reason),
                       options.delays_us, options.kinds)


def _ensemble_floor(repository: Path, name: str) -> tuple[int, str]:
    """The largest max_batch_size of the ensembles that run ``name`` as a step: tritonserver refuses an ensemble
    whose max_batch_size exceeds a step's, so a pick below it would leave a repository that does not load."""
    from orinkit.repo.layout import model_dirs

    floor, reason = 0, ""
    for folder in model_dirs(repository):
        try:
            config = read_config(folder / CONFIG_NAME)
        except (RepoError, OSError):
            continue  # edge-repo check names it; it is not this model's concern
        steps = {step.model_name for step in config.ensemble_scheduling.step}
        if config.platform == "ensemble" and name in steps and config.max_batch_size > floor:
            floor, reason = config.max_batch_size, f"the ensemble '{folder.name}' batches {config.max_batch_size}"
    return floor, reason


def _engine_dla_core(options: TuneOptions) -> int | None:
    """The DLA core the newest version's engine was built for (its manifest), None for a GPU engine."""
    from orinkit.formats.manifest import ManifestError, read_manifest
    from orinkit.repo.layout import version_folders

    versions = sorted(version_folders(options.repository / options.name))
    if not versions:
        return None
    try:
        manifest = read_manifest(options.repository / options.name / str(versions[-1]) / "model.plan")
    except ManifestError:
        return None
    return manifest.build.get("dla_core")


class _Server:
    """The server the sweep runs on: one started here (stopped at the end) or the one at ``url``."""

    def __init__(self, options: TuneOptions, jetson: _Jetson | None, progress: Progress) -> None:
        self.options, self.progress = options, progress
        self.process = None
        self._log_dir: tempfile.TemporaryDirectory | None = None
        self.url = options.url
        self.memory = board_memory(options.jetson_root) if jetson is not None else None
        self.memory_source = "board used memory" if jetson is not None else None

    def start(self) -> None:
        if self.url is not None:
            if self.memory is None and self.options.memory_budget_mb is not None:
                raise TuneInputError("--memory-budget-mb needs the server's memory: it is measured for a server "
                                     "edge-tune starts (its processes) or on a Jetson (the board's memory)",
                                     hint="drop --url so edge-tune starts the server, or drop the memory budget")
            return
        from orinkit.server.local import start_on_free_ports

        log = self.options.server_log
        if log is None:
            self._log_dir = tempfile.TemporaryDirectory(prefix="edge-tune-")
            log = Path(self._log_dir.name) / "tritonserver.log"
        self.progress(f"starting tritonserver for {self.options.repository} (explicit model control)")
        self.process = start_on_free_ports(self.options.repository, Path(log), model_control_mode="explicit",
                                           load_models=(self.options.name,))
        self.url = self.process.command.grpc_url
        if self.memory is None:
            self.memory = group_memory(self.process.pid)
            self.memory_source = "server processes (PSS)"

    def alive(self) -> str | None:
        if self.process is not None:
            code = self.process.returncode
            if code is None:
                return None
            tail = self.process.log_tail(3).strip().splitlines()
            return f"tritonserver exited with {code}" + (f" ({tail[-1][:200]})" if tail else "")
        import tritonclient.grpc as grpcclient

        try:
            with contextlib.closing(grpcclient.InferenceServerClient(self.url)) as client:
                live = client.is_server_live(client_timeout=3.0)
        except Exception as exc:  # noqa: BLE001 - any failure to answer means it is gone for this sweep
            return f"{self.url} stopped answering ({str(exc).splitlines()[0][:200] if str(exc) else exc})"
        return None if live else f"{self.url} says it is not live"

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        if self._log_dir is not None:
            self._log_dir.cleanup()


def tune(options: TuneOptions, *, progress: Progress = lambda message: None) -> dict:
    """Sweep, pick and (with ``options.apply``) apply; returns the report (see :mod:`orinkit.tune.report`).
    Raises BudgetUnmetError (with the report) when nothing meets the budgets, TuneServerError when the server
    dies, PowerModeChangedError when the Jetson's mode changes; none of them applies anything."""
    from orinkit.repo.configs import runtime_of

    config_path = options.repository / options.name / CONFIG_NAME
    if not config_path.is_file():
        raise TuneInputError(f"model '{options.name}' is not in {options.repository} (no {config_path})",
                             hint="give the model's name as its folder in --repo is called")
    try:
        config = read_config(config_path)
    except RepoError as exc:
        raise TuneInputError(exc.message, hint=exc.hint) from exc
    tunable(config)
    jetson = _jetson(options.jetson_root)
    space = _space(options, config, jetson, runtime_of(config))
    budgets = Budgets(options.latency_budget_ms, options.memory_budget_mb)
    server = _Server(options, jetson, progress)
    started = time.monotonic()
    server.start()
    try:
        report, chosen, inputs = _sweep(options, config, space, budgets, server, jetson, progress)
        report["seconds"] = round(time.monotonic() - started, 1)
        if options.apply:
            report["applied"] = _apply(options, config, chosen, server, report, inputs, progress)
        return report
    finally:
        server.stop()


def _sweep(options, config, space, budgets, server, jetson, progress) -> tuple[dict, object, dict]:
    from orinkit.client.bench import random_inputs
    from orinkit.client.client import Client

    with Client(server.url, options.name) as probe:
        info = probe.info
    inputs = dict(options.inputs) if options.inputs is not None else random_inputs(info, payload=options.payload)
    power_sampler = _tegrastats() if jetson is not None else None
    measurer = Measurer(server.url, options.name, config, inputs, levels=options.levels,
                        duration_s=options.duration_s, budgets=budgets, memory=server.memory,
                        power_sampler=power_sampler, alive=server.alive,
                        guard=_power_guard(options.jetson_root, jetson))
    search = "grid" if options.exhaustive else "greedy"
    size = len(space.grid())
    progress(f"tuning '{options.name}' on {server.url}: {search} search over {size} configurations "
             f"({budgets.describe()}; concurrency {','.join(map(str, options.levels))}, {options.duration_s:g} s "
             "each)")
    try:
        run = exhaustive if options.exhaustive else greedy
        measurements = run(space, measurer.measure, budgets, progress=progress)
        confirmed = _confirm(measurer, config, measurements, budgets, options.duration_s, progress)
        chosen = _confirmed_pick(measurements, budgets, confirmed)
        if chosen is not None and chosen.candidate in confirmed and len(confirmed) > 1:
            confirmed[chosen.candidate] = _figure(measurer, config, chosen, confirmed[chosen.candidate],
                                                  budgets, options.duration_s, progress)
    finally:
        if server.alive() is None:
            with contextlib.suppress(Exception):  # already failing: the error in flight says what happened
                measurer.load(None)
    report = {
        "model": options.name, "repository": str(options.repository), "url": server.url,
        "started_server": server.process is not None, "search": search, "grid_size": size,
        "budgets": {"latency_ms": budgets.latency_ms, "memory_mb": budgets.memory_mb},
        "memory_source": server.memory_source,
        "space": {"instances": list(space.instances), "max_batch_sizes": list(space.batch_sizes),
                  "delays_us": list(space.delays_us), "kinds": list(space.kinds)},
        "levels": list(options.levels), "duration_s": options.duration_s,
        "device": jetson.describe() if jetson is not None else {"cpus": os.cpu_count()},
        "current": candidate_of(config).to_dict(),
        "measurements": [m.to_dict(budgets) for m in measurements],
    }
    if chosen is None:
        near = closest(measurements, budgets)
        report["pick"] = None
        where = "" if near is None else f"; closest: {near[0].candidate.label()} ({near[1]})"
        raise BudgetUnmetError(f"no configuration of '{options.name}' met {budgets.describe()} "
                               f"({len(measurements)} measured){where}",
                               hint="relax the budget, or make the model cheaper (FP16, a smaller input)",
                               report=report)
    again = confirmed.get(chosen.candidate)
    report["pick"] = {"label": chosen.candidate.label(), "config": chosen.candidate.to_dict(),
                      "best": chosen.to_dict(budgets)["best"], "memory_mb": chosen.memory_mb,
                      "confirmed": None if again is None else asdict(again)}
    figure = again or chosen.best(budgets)
    report["pick"]["throughput"] = figure.throughput
    progress(f"pick: {chosen.candidate.label()}: {figure.throughput:.1f} infer/s at concurrency "
             f"{figure.concurrency}, p99 {figure.p99_ms:.1f} ms" + (" (measured again)" if again else ""))
    return report, chosen, inputs


def _confirm(measurer: Measurer, config, measurements, budgets: Budgets, duration_s: float,
             progress: Progress) -> dict:
    """The best few configurations measured once more, longer, at their best concurrency: the highest of many
    short, noisy runs overstates its configuration (the winner's curse), and the pick stands on this figure."""
    ranked = sorted((m for m in measurements if m.best(budgets) is not None),
                    key=lambda m: -m.best(budgets).throughput)[:CONFIRM]
    confirmed = {}
    for m in ranked:
        if measurer.load(configure(config, m.candidate)) is not None:
            continue
        level, _ = measurer.level(m.best(budgets).concurrency, max(CONFIRM_S, 2 * duration_s),
                                  warmup_s=CONFIRM_WARMUP_S)
        progress(f"again: {m.candidate.label()}: {level.throughput:.1f} infer/s at concurrency "
                 f"{level.concurrency}, p99 {level.p99_ms or 0:.1f} ms")
        if level.meets(budgets):
            confirmed[m.candidate] = level
    return confirmed


def _figure(measurer: Measurer, config, chosen, selected, budgets: Budgets, duration_s: float,
            progress: Progress):
    """The pick's own figure, measured once more after the choice: the better of two confirmations overstates the
    one it picks (the winner's curse again, smaller), and --apply's check compares against this figure."""
    if measurer.load(configure(config, chosen.candidate)) is not None:
        return selected
    level, _ = measurer.level(selected.concurrency, max(CONFIRM_S, 2 * duration_s), warmup_s=CONFIRM_WARMUP_S)
    progress(f"the pick once more: {level.throughput:.1f} infer/s at concurrency {level.concurrency}, p99 "
             f"{level.p99_ms or 0:.1f} ms")
    return level if level.meets(budgets) else selected


def _confirmed_pick(measurements, budgets: Budgets, confirmed: dict):
    """The best configuration by its second measurement where the best few had one, else by the sweep."""
    if not confirmed:
        return pick(measurements, budgets)
    best = max(confirmed.values(), key=lambda level: level.throughput).throughput
    near = [m for m in measurements if m.candidate in confirmed and confirmed[m.candidate].throughput >= best * 0.99]
    return min(near, key=lambda m: (m.candidate.instances, m.candidate.max_batch_size, m.candidate.delay_us))


def _tegrastats():
    import shutil

    if shutil.which("tegrastats") is None:
        return None
    from orinkit.jetson.sampler import TegrastatsSampler

    return TegrastatsSampler


def _apply(options, config, chosen, server, report, inputs, progress) -> dict:
    """Write the pick, load it as the repository now has it, and measure it once more at the pick's concurrency."""
    from orinkit.repo.config_change import change_config

    new = configure(config, chosen.candidate)
    level = dict(report["pick"]["confirmed"] or report["pick"]["best"])
    verify = Measurer(server.url, options.name, new, inputs, levels=(level["concurrency"],),
                      duration_s=max(options.duration_s, 3.0), alive=server.alive)
    checked = {}

    def accept() -> None:
        measured, _ = verify.level(level["concurrency"], warmup_s=CONFIRM_WARMUP_S)
        if not measured.requests or measured.errors:
            raise ApplyError(f"the applied config answered {measured.requests} requests with {measured.errors} "
                             f"failures: {measured.first_error}", hint="the server log says why")
        checked["level"] = measured

    try:
        change = change_config(options.repository, options.name, new, server=server.url, accept=accept,
                               progress=progress)
    except RepoError as exc:
        raise ApplyError(exc.message, hint=exc.hint) from exc
    measured = checked["level"]
    ratio = measured.throughput / level["throughput"] if level["throughput"] else None
    progress(f"applied to {change.path}: measured again {measured.throughput:.1f} infer/s, p99 "
             f"{measured.p99_ms:.1f} ms ({ratio:.2f}x the sweep's figure); undo with edge-tune {options.name} "
             f"--repo {options.repository} --revert")
    return {"config_path": str(change.path), "previous": str(change.previous), "config": format_config(new),
            "throughput": measured.throughput, "p99_ms": measured.p99_ms, "ratio_to_sweep": ratio}
