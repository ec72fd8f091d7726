"""Parse tegrastats lines: JetPack 5, 6 and 7 on Orin (and the JetPack 7 lines of Thor).

One line is one sample, a run of labelled fields::

    [MM-DD-YYYY HH:MM:SS] RAM 775/7620MB (lfb 3x4MB) SWAP 0/3810MB (cached 0MB) CPU [1%@729,off,...]
    EMC_FREQ 3%@2133 GR3D_FREQ 0%  NVENC 79%@166 NVDLA0 off APE 174  cpu@48.4C tj@49.1C
    VDD_IN 4761mW/4778mW VDD_CPU_GPU_CV 515mW/501mW ...

How the releases differ, from captured lines (tests/data/jetson/tegrastats):

* JetPack 5 reports each GPU GPC as its own field (``GR3D_FREQ 0%@114 GR3D2_FREQ 0%@114``) and engines as a bare
  clock (``VIC_FREQ 729``); sensors that are powered off read ``-256C``.
* JetPack 6 writes the GPC clocks as a list (``GR3D_FREQ 0%@[0,0]``), or only the load (``GR3D_FREQ 0%``).
* JetPack 7 keeps the list (``GR3D_FREQ 12%@[1300,1300]``; Thor drops the load: ``@[314,314,314]``), names
  engines ``NVENC0``/``NVDLA0`` (``off``, ``X%@MHz`` or ``NVENC0_FREQ @MHz``), may leave out SWAP, and adds a
  maximum to temperatures (``cpu@52.9C/52.9C``) and power rails (``cur/avg/max mW``).

Every token must be understood: a line cut short or corrupted raises :class:`TegrastatsError` rather than
yielding a sample with silently missing numbers. :func:`parse_lines` skips and counts such lines instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from orinkit.jetson.errors import TegrastatsError

_TIMESTAMP = re.compile(r"^(\d{2}-\d{2}-\d{4} \d{2}:\d{2}:\d{2})\s+")
_USED_TOTAL_MB = re.compile(r"^(\d+)/(\d+)MB$")
_LFB = re.compile(r"^(\d+x\d+[kM]B)\)$")
_CACHED = re.compile(r"^(\d+)MB\)$")
_CPU_LIST = re.compile(r"^\[([^\]]*)\]$")
_CORE = re.compile(r"^(\d+(?:\.\d+)?)%(?:@(\d+))?$")
# "3%@2133", "0%", "@2133", "12%@[1300,1300]", "@[314,314,314]"
_LOAD_FREQ = re.compile(r"^(?:(\d+(?:\.\d+)?)%)?(?:@(?:(\d+)|\[(\d+(?:,\d+)*)\]))?$")
_TEMPERATURE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)@(-?\d+(?:\.\d+)?)C(?:/(-?\d+(?:\.\d+)?)C)?$")
_RAIL_VALUE = re.compile(r"^(\d+)(?:mW)?/(\d+)(?:mW)?(?:/(\d+)(?:mW)?)?$")
_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_SENSOR_OFF = -256.0
# AGX Orin and Thor have no VDD_IN rail: the module's input is the sum of the three rails of its first power
# monitor. VDDQ_VDD2_1V8AO (AGX Orin's second monitor) is a memory sub-rail, so adding it would count twice.
_MODULE_RAILS = (("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"), ("VDD_GPU", "VDD_CPU_SOC_MSS", "VIN_SYS_5V0"))


@dataclass(frozen=True)
class CpuCore:
    online: bool
    load_percent: float | None = None
    freq_mhz: int | None = None


@dataclass(frozen=True)
class Clock:
    """A load and clock pair: EMC, the GPU (GR3D) and the other engines."""

    load_percent: float | None
    freqs_mhz: tuple[int, ...] = ()  # one per GPC when tegrastats gives a list, else at most one

    @property
    def freq_mhz(self) -> int | None:
        """The GPCs run from one clock, so they agree; the highest stands for them when they do not."""
        return max(self.freqs_mhz) if self.freqs_mhz else None


@dataclass(frozen=True)
class Engine:
    name: str  # as printed, without a "_FREQ" suffix: "NVENC0", "NVDLA0", "VIC", "APE", "GR3D2"
    on: bool
    load_percent: float | None = None
    freq_mhz: int | None = None


@dataclass(frozen=True)
class Temperature:
    name: str  # as printed: "cpu", "tj", "SOC0", "Tboard"
    celsius: float
    max_celsius: float | None = None  # JetPack 7


@dataclass(frozen=True)
class Rail:
    name: str
    current_mw: int
    average_mw: int  # tegrastats' running average since it started
    peak_mw: int | None = None  # JetPack 7


@dataclass(frozen=True)
class Sample:
    timestamp: datetime | None
    ram_used_mb: int
    ram_total_mb: int
    lfb: str | None  # largest free block: count x size, "466x4MB"
    swap_used_mb: int | None
    swap_total_mb: int | None
    swap_cached_mb: int | None
    cpus: tuple[CpuCore, ...]
    emc: Clock | None
    gr3d: Clock | None
    engines: tuple[Engine, ...]
    temperatures: tuple[Temperature, ...]
    rails: tuple[Rail, ...]

    def engine(self, name: str) -> Engine | None:
        return next((e for e in self.engines if e.name == name), None)

    def rail(self, name: str) -> Rail | None:
        return next((r for r in self.rails if r.name == name), None)

    def temperature(self, name: str) -> float | None:
        """By sensor name in any case: JetPack 5 writes ``CPU@``, JetPack 6 ``cpu@``."""
        return next((t.celsius for t in self.temperatures if t.name.lower() == name.lower()), None)

    @property
    def input_power_mw(self) -> int | None:
        """What the module draws: VDD_IN where the board reports it (Orin NX and Nano), else the sum of the
        module rails (AGX Orin, Thor); None when neither is there."""
        return module_input_mw({r.name: r.current_mw for r in self.rails})


def _number(text: str | None) -> float | None:
    return float(text) if text is not None else None


def _clock(text: str) -> Clock | None:
    match = _LOAD_FREQ.match(text)
    if not match or not any(match.groups()):
        return None
    load, single, listed = match.groups()
    freqs = tuple(int(f) for f in listed.split(",")) if listed else ((int(single),) if single else ())
    return Clock(_number(load), freqs)


def _cpus(text: str, line: str) -> tuple[CpuCore, ...]:
    match = _CPU_LIST.match(text)
    if not match:
        raise TegrastatsError(line, f"CPU list {text!r} is not [load%@MHz,...]")
    cores = []
    for entry in match[1].split(","):
        if entry == "off":
            cores.append(CpuCore(online=False))
            continue
        core = _CORE.match(entry)
        if not core:
            raise TegrastatsError(line, f"CPU entry {entry!r} is neither load%@MHz nor off")
        cores.append(CpuCore(True, float(core[1]), int(core[2]) if core[2] else None))
    return tuple(cores)


def _used_total(tokens: list[str], index: int, label: str, line: str) -> tuple[int, int]:
    text = tokens[index + 1] if index + 1 < len(tokens) else ""
    match = _USED_TOTAL_MB.match(text)
    if not match:
        raise TegrastatsError(line, f"{label} value {text!r} is not used/totalMB")
    return int(match[1]), int(match[2])


def parse_line(line: str) -> Sample:
    """One tegrastats line → :class:`Sample`; :class:`TegrastatsError` when it is not a whole tegrastats line."""
    text = line.strip()
    timestamp = None
    stamp = _TIMESTAMP.match(text)
    if stamp:
        try:
            timestamp = datetime.strptime(stamp[1], "%m-%d-%Y %H:%M:%S")
        except ValueError as exc:
            raise TegrastatsError(line, f"bad timestamp {stamp[1]!r}") from exc
        text = text[stamp.end():]
    tokens = text.split()
    fields: dict = {"lfb": None, "swap": (None, None), "swap_cached": None, "cpus": (), "emc": None, "gr3d": None}
    ram = None
    engines: list[Engine] = []
    temperatures: list[Temperature] = []
    rails: list[Rail] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if token == "RAM":
            ram = _used_total(tokens, i, "RAM", line)
            i += 2
            if i < len(tokens) and tokens[i] == "(lfb":
                lfb = _LFB.match(tokens[i + 1]) if i + 1 < len(tokens) else None
                if not lfb:
                    raise TegrastatsError(line, "RAM's (lfb NxSIZE) is cut short")
                fields["lfb"] = lfb[1]
                i += 2
        elif token == "SWAP":
            fields["swap"] = _used_total(tokens, i, "SWAP", line)
            i += 2
            if i < len(tokens) and tokens[i] == "(cached":
                cached = _CACHED.match(tokens[i + 1]) if i + 1 < len(tokens) else None
                if not cached:
                    raise TegrastatsError(line, "SWAP's (cached NMB) is cut short")
                fields["swap_cached"] = int(cached[1])
                i += 2
        elif token == "IRAM":  # older boards: "IRAM 0/252kB(lfb 252kB)"
            i += 1
            while i < len(tokens) and not tokens[i].endswith(")"):
                i += 1
            i += 1
        elif token == "CPU" and following is not None and following.startswith("["):
            fields["cpus"] = _cpus(following, line)
            i += 2
        elif token in ("EMC_FREQ", "GR3D_FREQ"):
            clock = _clock(following or "")
            if clock is None:
                raise TegrastatsError(line, f"{token} value {following!r} is not load%@MHz")
            fields["emc" if token == "EMC_FREQ" else "gr3d"] = clock
            i += 2
        elif token == "MTS" and following == "fg":  # older boards: "MTS fg 0% bg 0%"
            i += 5
        elif _TEMPERATURE.match(token):
            match = _TEMPERATURE.match(token)
            celsius = float(match[2])
            if celsius != _SENSOR_OFF:
                temperatures.append(Temperature(match[1], celsius, _number(match[3])))
            i += 1
        elif _NAME.match(token) and following is not None:
            rail = _RAIL_VALUE.match(following)
            name = token[: -len("_FREQ")] if token.endswith("_FREQ") else token
            if rail:
                if token != "NC":  # an unconnected monitor channel
                    rails.append(Rail(token, int(rail[1]), int(rail[2]), int(rail[3]) if rail[3] else None))
            elif following.lower() == "off":
                engines.append(Engine(name, False))
            elif following.isdigit():
                engines.append(Engine(name, True, None, int(following)))
            else:
                clock = _clock(following)
                if clock is None:
                    raise TegrastatsError(line, f"{token} value {following!r} is not understood")
                engines.append(Engine(name, True, clock.load_percent, clock.freq_mhz))
            i += 2
        else:
            raise TegrastatsError(line, f"unexpected {token!r}")
    if ram is None:
        raise TegrastatsError(line, "no RAM field")
    return Sample(
        timestamp=timestamp,
        ram_used_mb=ram[0],
        ram_total_mb=ram[1],
        lfb=fields["lfb"],
        swap_used_mb=fields["swap"][0],
        swap_total_mb=fields["swap"][1],
        swap_cached_mb=fields["swap_cached"],
        cpus=fields["cpus"],
        emc=fields["emc"],
        gr3d=fields["gr3d"],
        engines=tuple(engines),
        temperatures=tuple(temperatures),
        rails=tuple(rails),
    )


def parse_lines(lines: Iterable[str]) -> tuple[list[Sample], int]:
    """Parse every line; malformed ones are skipped and counted, blank ones ignored. Never raises for content."""
    samples, skipped = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            samples.append(parse_line(line))
        except TegrastatsError:
            skipped += 1
    return samples, skipped


def module_input_mw(rails: Mapping[str, float]) -> float | None:
    """What the module draws from rail readings (mW by name): VDD_IN where the board reports it (Orin NX and Nano),
    else the sum of the AGX Orin or Thor module rails; None when neither is there (a sum of whatever rails exist
    would not be the total)."""
    if "VDD_IN" in rails:
        return rails["VDD_IN"]
    for names in _MODULE_RAILS:
        if all(name in rails for name in names):
            return sum(rails[name] for name in names)
    return None
