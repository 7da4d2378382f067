"""How far `pipeline import` / `export` (and the parse that `show` / `compare` run first) have come.

The collector reports the bytes it has read and the bytes on disk; from the records it framed per byte the
directory's record count is estimated (exact once the collector has ended). Progress is the records that went
through every transform (decode, aggregate), the slow part: the collector reads far ahead of them. On a terminal
a rich bar with records/s and the time left; otherwise a few plain lines.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from pipeline.views import backlog

RATE_WINDOW_S = 5.0  # records/s (and so the time left) over this much of the recent past
LINE_EVERY_S = 30.0  # off a terminal: a line at least this often, besides one per quarter done
QUARTERS = (25, 50, 75)


class Display(Protocol):
    """What the supervisor drives with each view it publishes (twice a second) until the stages have ended."""

    def update(self, view: dict[str, Any]) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class Figures:
    """One view's figures for the progress of an import."""

    elapsed_s: float
    state: str
    mb_read: float = 0.0
    mb_on_disk: float = 0.0
    expected: int | None = None  # records in the directory: estimated from the bytes until the collector ends
    exact: bool = False
    through: int = 0  # records that went through every transform

    @property
    def fraction(self) -> float | None:
        if not self.expected:
            return None
        return min(1.0, self.through / self.expected)

    @property
    def writing(self) -> bool:
        """Every record has gone through the transforms: the sinks finish their files."""
        return self.exact and self.expected is not None and self.through >= self.expected


def figures_of(view: dict[str, Any]) -> Figures:
    stages: dict[str, dict[str, Any]] = view.get("stages", {})
    elapsed, state = float(view.get("elapsed_s", 0.0)), str(view.get("state", ""))
    collector = next((s for s in stages.values() if s["role"] == "source" and "MB_read" in s["progress"]), None)
    if collector is None:
        return Figures(elapsed, state)
    progress = collector["progress"]
    mb_read, on_disk = float(progress["MB_read"]), float(progress.get("MB_on_disk", 0.0))
    on_disk = max(on_disk, mb_read)
    sent = int(collector["out"])
    exact = collector["status"] == "done"
    expected = sent if exact else (round(sent * on_disk / mb_read) if mb_read > 0 else None)
    transforms = [int(s["in"]) for s in stages.values() if s["role"] == "transform"]
    through = min(transforms) if transforms else sent
    if any("group" in s for s in stages.values()):  # partitions by device: each takes a share of the records
        queued = sum(backlog(sid, s, stages) or 0 for sid, s in stages.items() if s["role"] == "transform")
        through = max(0, sent - queued)  # backlogs count decoded records too: never below nothing
    return Figures(elapsed, state, mb_read, on_disk, expected, exact, through)


class RateMeter:
    """Records per second over the last RATE_WINDOW_S."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, t: float, count: int) -> None:
        self.samples.append((t, count))
        while len(self.samples) > 2 and t - self.samples[1][0] >= RATE_WINDOW_S:
            self.samples.popleft()

    def rate(self) -> float | None:
        if len(self.samples) < 2:
            return None
        (t0, c0), (t1, c1) = self.samples[0], self.samples[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else None


def seconds_left(figures: Figures, rate: float | None) -> float | None:
    if figures.expected is None or not rate or rate <= 0:
        return None
    return max(0.0, (figures.expected - figures.through) / rate)


def clock(seconds: float) -> str:
    """0:09, 1:05:30."""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def megabytes(value: float) -> str:
    """`86.0`; under 0.1 MB `0.042` (the collector gives small sizes to a thousandth)."""
    return f"{value:.1f}" if value >= 0.1 or value == 0 else f"{value:.3f}"


def records_text(figures: Figures) -> str:
    if figures.expected is None:
        return f"{figures.through:,} records"
    return f"{figures.through:,}/{'' if figures.exact else '~'}{figures.expected:,} records"


def figures_line(figures: Figures, rate: float | None) -> str:
    """`86.0/86.0 MB read · 572,345/~982,729 records · 48,120 rec/s · 0:09 left`"""
    parts = [f"{megabytes(figures.mb_read)}/{megabytes(figures.mb_on_disk)} MB read", records_text(figures)]
    if figures.writing:
        return " · ".join([*parts, "writing the outputs"])
    parts.append(f"{rate:,.0f} rec/s" if rate is not None else "– rec/s")
    left = seconds_left(figures, rate)
    parts.append(f"{clock(left)} left" if left is not None else "estimating the time left")
    return " · ".join(parts)


class BarDisplay:
    """A rich bar on a terminal: the verb, the bar, percent, elapsed; the figures on the line below."""

    def __init__(self, verb: str, stream: TextIO) -> None:
        self.verb = verb
        self.console = Console(file=stream)
        self.live: Live | None = None
        self.meter = RateMeter()

    def update(self, view: dict[str, Any]) -> None:
        figures = figures_of(view)
        self.meter.add(figures.elapsed_s, figures.through)
        if self.live is None:
            self.live = Live(console=self.console, auto_refresh=False, transient=False)
            self.live.start()
        self.live.update(self.render(figures, self.meter.rate()), refresh=True)

    def render(self, figures: Figures, rate: float | None) -> Group:
        fraction = figures.fraction
        row = Table.grid(expand=True, padding=(0, 1))
        row.add_column(no_wrap=True)
        row.add_column(ratio=1)
        row.add_column(justify="right", no_wrap=True)
        label = self.verb if figures.state in ("running", "") else f"{self.verb} ({figures.state})"
        percent = f"{fraction:4.0%}" if fraction is not None else "   –"
        row.add_row(Text(label, style="bold"),
                    ProgressBar(total=1.0, completed=fraction or 0.0, pulse=fraction is None),
                    f"{percent}  {clock(figures.elapsed_s)}")
        below = Text(figures_line(figures, rate) if figures.mb_on_disk else "starting the stages…",
                     no_wrap=True, overflow="ellipsis", style="dim")
        return Group(row, below)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


class LineDisplay:
    """Off a terminal: what the directory holds, a line per quarter done (and at least every LINE_EVERY_S),
    and one when the sinks are writing the last of the outputs."""

    def __init__(self, verb: str, stream: TextIO) -> None:
        self.verb = verb
        self.stream = stream
        self.meter = RateMeter()
        self.said_size = False
        self.said_writing = False
        self.quarters_said = 0
        self.last_line_s = 0.0

    def update(self, view: dict[str, Any]) -> None:
        figures = figures_of(view)
        self.meter.add(figures.elapsed_s, figures.through)
        line = self.line_for(figures)
        if line is not None:
            self.last_line_s = figures.elapsed_s
            print(f"{self.verb}: {line}", file=self.stream, flush=True)

    def line_for(self, figures: Figures) -> str | None:
        if not figures.mb_on_disk:
            return None
        if not self.said_size:
            self.said_size = True
            return f"{megabytes(figures.mb_on_disk)} MB of raw data on disk"
        if figures.writing:
            if self.said_writing:
                return None
            self.said_writing = True
            return f"all {figures.expected:,} records decoded and aggregated; writing the outputs"
        fraction = figures.fraction
        reached = sum(1 for quarter in QUARTERS if fraction is not None and fraction * 100 >= quarter)
        if reached > self.quarters_said or figures.elapsed_s - self.last_line_s >= LINE_EVERY_S:
            self.quarters_said = max(self.quarters_said, reached)
            return self.progress_text(figures)
        return None

    def progress_text(self, figures: Figures) -> str:
        fraction, rate = figures.fraction, self.meter.rate()
        text = f"{fraction:.0%} " if fraction is not None else ""
        text += f"({records_text(figures)}; {megabytes(figures.mb_read)}/{megabytes(figures.mb_on_disk)} MB read)"
        if rate is not None:
            text += f", {rate:,.0f} records/s"
        left = seconds_left(figures, rate)
        if left is not None:
            text += f", about {clock(left)} left"
        return text

    def stop(self) -> None:
        """Nothing to clear: the lines stay."""


def progress_display(verb: str, stream: TextIO) -> Display:
    """A bar when ``stream`` is a terminal, plain lines otherwise."""
    return BarDisplay(verb, stream) if stream.isatty() else LineDisplay(verb, stream)
