"""Shared pieces of the msprof-compatible sinks: number printing, level names, run info.

Times arrive as integer nanoseconds; msprof prints µs with exactly three decimals made by
string arithmetic on the integer (as msprof's C++ ``DivideByPowersOfTenWithPrecision`` does), and
derived figures (averages, ratios, PMU metrics) with ``DoubleToStr`` semantics: rounded to
three decimals, trailing zeros dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pipeline.stage import Batch
from stages.schema import SymbolTable

NA = "N/A"
UINT32_NONE = 4294967295  # "no model / no context / no subtask" in msprof exports
DEFAULT_OUTPUT_DIR = "mindstudio_profiler_output"

# api level code -> (api_statistic / args "level" name, timeline event prefix)
LEVELS: dict[int, tuple[str, str]] = {
    20000: ("acl", "AscendCL"),
    15000: ("model", "Model"),
    10000: ("node", "Node"),
    5500: ("communication", "Communication"),
    5000: ("runtime", "Runtime"),
}
LEVEL_BY_NAME = {name: code for code, (name, _) in LEVELS.items()}
NODE_LEVEL = 10000
MSTX_EVENT_TYPES = {0: "marker", 1: "push/pop", 2: "start/end", 3: "marker_ex"}


def us(ns: int) -> str:
    """Integer ns -> µs string with exactly three decimals, exact (no float)."""
    if ns >= 1000:
        text = str(ns)
        return f"{text[:-3]}.{text[-3:]}"
    if ns < 0:
        return "-" + us(-ns)
    return f"0.{ns:03d}"


def us_trimmed(ns: int) -> str:
    """Integer ns -> µs string, at most three decimals, trailing zeros dropped (``DoubleToStr``)."""
    text = us(ns)
    return text.rstrip("0").rstrip(".")


def num3(value: float | int | None) -> str:
    """A derived figure as msprof's ``DoubleToStr``: three decimals, trailing zeros dropped."""
    if value is None:
        return NA
    text = f"{value:.3f}"
    text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


_NAN = float("nan")


def num3_rows(rows: list[list[float | None]], width: int) -> list[list[str]]:
    """:func:`num3` of each row's first ``width`` values (missing ones ``N/A``), a whole batch at once: one
    ``%`` format and one regex pass over all of them instead of a call per value."""
    flat: list[Any] = []
    for values in rows:
        flat += values if len(values) == width else [*values[:width], *[None] * (width - len(values))]
    if not flat:
        return [[] for _ in rows]
    nones = flat.count(None)
    numbers = [_NAN if value is None else value for value in flat] if nones else flat
    try:
        text = ("%.3f," * len(numbers)) % tuple(numbers)
    except TypeError:  # a value that is not a number: one at a time
        text = ""
    if not text or text.count("nan") != nones:  # a NaN of its own (num3 prints it "nan"): one at a time
        cells = [num3(value) for value in flat]
    else:
        # every cell ends in three decimals: whole numbers first, their comma marked so the decimals of the
        # others can be cut by plain replaces ("-0" is "0", as num3 has it)
        text = text.replace("-0.000,", "0.000,").replace(".000,", "|").replace("00,", ",").replace("0,", ",")
        text = text.replace("|", ",")
        if nones:
            text = text.replace("nan", NA)
        cells = text[:-1].split(",")
    return [cells[i : i + width] for i in range(0, len(cells), width)]


def us_to_ns(text: str) -> int:
    """Inverse of :func:`us` (tolerates msprof's trailing TAB)."""
    whole, _, frac = text.strip().partition(".")
    sign = -1 if whole.startswith("-") else 1
    return sign * (abs(int(whole or "0")) * 1000 + int((frac + "000")[:3]))


def level_code(value: Any) -> int | None:
    """An api level given as its code (20000) or its name ("acl")."""
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if value.isdigit():
            return int(value)
        return LEVEL_BY_NAME.get(value.lower())
    return None


def level_name(value: Any) -> str:
    code = level_code(value)
    if code in LEVELS:
        return LEVELS[code][0]
    return value if isinstance(value, str) else ""


def export_timestamp(configured: str | None) -> str:
    """The ``{timestamp}`` of output names: configured, else now (local time)."""
    return configured or time.strftime("%Y%m%d%H%M%S", time.localtime())


def learn_symbols(symbols: SymbolTable, batch: Batch) -> None:
    pairs = batch.meta.get("symbols")
    if pairs:
        symbols.learn(pairs)


def text_of(symbols: SymbolTable, value: Any) -> str:
    """A text cell that is either a symbol id or already a string (statistics rows)."""
    if value is None:
        return ""
    if isinstance(value, int):
        return symbols[value]
    return str(value)


@dataclass
class RunInfo:
    """The ``run_info`` row; every field has a default because the row is optional."""

    pid: int = 0
    pid_name: str = ""
    hostname: str = ""
    host_uid: str = "0"  # info.json hostUid; msprof's default when absent
    devices: dict[int, dict[str, Any]] = field(default_factory=dict)
    start_ns: int = 0
    end_ns: int = 0

    @classmethod
    def from_row(cls, info: dict[str, Any]) -> RunInfo:
        devices: dict[int, dict[str, Any]] = {}
        for key, value in (info.get("devices") or {}).items():
            try:
                devices[int(key)] = dict(value or {})
            except (TypeError, ValueError):
                continue
        return cls(
            pid=_as_int(info.get("pid")),
            pid_name=str(info.get("pid_name") or ""),
            hostname=str(info.get("hostname") or ""),
            host_uid=str(info.get("host_uid") or "0"),
            devices=devices,
            start_ns=_as_int(info.get("start_ns")),
            end_ns=_as_int(info.get("end_ns")),
        )


def _as_int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def num3_joined(numbers: list[float], width: int) -> list[str]:
    """Rows of ``width`` numbers (row after row in ``numbers``) -> each row's :func:`num3` cells joined by
    commas, as :func:`num3_rows` makes them (NaN: ``N/A``): one ``%`` format over all, a string per row."""
    if not numbers or width <= 0:
        return []
    text = (("%.3f," * (width - 1) + "%.3f;") * (len(numbers) // width)) % tuple(numbers)
    for end in ",;":
        text = text.replace(f"-0.000{end}", f"0.000{end}")
    text = text.replace(".000,", "|").replace(".000;", "#")
    text = text.replace("00,", ",").replace("0,", ",").replace("00;", ";").replace("0;", ";")
    return text.replace("|", ",").replace("#", ";").replace("nan", NA)[:-1].split(";")
