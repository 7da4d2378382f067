"""What the supervisor knows about a stage's health: its heartbeat and the state it reports.

Every stage sends metrics at least every 0.5 s while its loop runs, also while it waits for a
consumer or for a full disk. A stage silent for ``run.heartbeat_timeout_s`` is stuck (its loop
is blocked inside a call that does not return); it is shown as such and, with
``run.kill_stuck``, killed. The stage's own state (``paused: disk full: …``,
``peer disconnected: …``, ``waiting for 'db' to read``) is shown as it reports it; entering and
leaving a pause (and a change of its reason: a full disk that turns read-only) or a peer disconnect is
printed once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ANNOUNCED = ("paused", "peer disconnected")  # states worth a line on the supervisor's stderr


def _kind(state: str | None) -> str | None:
    """What a state is worth a line for: ``paused: <reason>`` (a disk that filled and then turned read-only is
    two lines), ``peer disconnected``; None for the rest."""
    if state is None:
        return None
    kind = next((kind for kind in ANNOUNCED if state.startswith(kind)), None)
    if kind == "paused":
        return ": ".join(state.split(": ")[:2])
    return kind


@dataclass
class StageHealth:
    last_heard: float  # time.monotonic() of the stage's last control message (or of its start)
    said_hello: bool = False
    state: str | None = None
    state_since: float = 0.0
    stuck_since: float | None = None
    stuck_episodes: list[list[float | None]] = field(default_factory=list)  # [start, end or None]
    killed: bool = False
    killed_after_s: float = 0.0

    def heard(self, now: float, state: str | None, has_state: bool) -> list[str]:
        """A control message arrived (``has_state``: a metrics message, which carries the state).
        Returns the lines worth printing."""
        lines: list[str] = []
        self.said_hello = True
        if self.stuck_since is not None:
            lines.append(f"is responding again after {now - self.stuck_since:.1f} s without a heartbeat")
            self.stuck_episodes[-1][1] = now
            self.stuck_since = None
        self.last_heard = now
        if has_state:
            before, after = _kind(self.state), _kind(state)
            if before != after:
                paused_before, paused_after = (before or "").startswith("paused"), (after or "").startswith("paused")
                if before is not None and not (paused_before and paused_after):  # a new reason is not a resume
                    again = "resumed" if paused_before else "peer connected again"
                    lines.append(f"{again} after {now - self.state_since:.1f} s")
                if after is not None:
                    hint = "; it goes on by itself when the disk takes writes again" if paused_after else ""
                    lines.append(f"{state}{hint}")
                self.state_since = now
            self.state = state
        return lines

    def check(self, now: float, timeout_s: float) -> str | None:
        """A line when the stage has just become stuck, else None."""
        if not self.said_hello or self.stuck_since is not None or now - self.last_heard <= timeout_s:
            return None
        self.stuck_since = self.last_heard
        self.stuck_episodes.append([self.last_heard, None])
        return f"is stuck: no heartbeat for {now - self.last_heard:.0f} s"

    def kill(self, now: float) -> None:
        self.killed = True
        self.killed_after_s = now - (self.stuck_since if self.stuck_since is not None else self.last_heard)

    def status(self, now: float) -> str:
        """The `pipeline top` status of a stage whose process is alive."""
        if self.stuck_since is not None:
            return f"stuck (no heartbeat for {now - self.stuck_since:.0f} s)"
        if not self.said_hello:
            return "starting"
        return self.state or "running"

    def stalls(self, now: float, run_started: float) -> list[dict[str, Any]]:
        """Stuck episodes for the run report: when (s into the run), how long, and whether it ended."""
        return [{"at_s": round(start - run_started, 3), "for_s": round((end if end is not None else now) - start, 3),
                 "ended": end is not None}
                for start, end in self.stuck_episodes if start is not None]
