"""msprof's AICORE_FREQ table, kept current: the AI Core clock of each 910B / 310B-class device over the session.

As msprof's exporter writes it: a row at the session start with the clock then in effect (the last change
before the start, else info.json's ``aic_frequency``), a row per change point from the start on, and, once
end_info is written, a row at the session end with the last clock. ``dieId`` is −1. The change points go in
as they arrive; the start and end rows are updated in place when what they depend on changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from stages.schema import AICORE_FREQ_PLATFORMS
from stages.sinks import _msprof_db as msdb
from stages.sinks._format import RunInfo

NO_DIE = -1


class Connection(Protocol):
    """What the table needs of the sink's connection (stages.sinks.sqlite.Writer)."""

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None: ...

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]: ...

    def insert(self, table: msdb.Table, rows: Sequence[Sequence[Any]]) -> None: ...


@dataclass
class _Device:
    default_mhz: float = 0.0
    before_start: tuple[int, float] | None = None  # latest change before the session start
    latest: tuple[int, float] | None = None  # latest change from the start on
    pending: list[tuple[int, float]] = field(default_factory=list)  # changes while the start is unknown
    start_row: int | None = None  # rowids of the boundary rows
    end_row: int | None = None


@dataclass
class AicoreFreqTable:
    devices: dict[int, _Device] = field(default_factory=dict)
    start_ns: int = 0
    end_ns: int = 0

    def run_info(self, conn: Connection, info: RunInfo) -> None:
        self.start_ns, self.end_ns = info.start_ns, info.end_ns
        for device, facts in info.devices.items():
            if int(facts.get("platform") or -1) in AICORE_FREQ_PLATFORMS:
                state = self.devices.setdefault(device, _Device())
                state.default_mhz = float(facts.get("aic_frequency_mhz") or 0)
        for device, state in self.devices.items():
            if self.start_ns and state.pending:
                points, state.pending = state.pending, []
                self._add(conn, device, state, points)
            self._boundaries(conn, device, state)

    def changes(self, conn: Connection, rows: list[list[int]]) -> None:
        by_device: dict[int, list[tuple[int, float]]] = {}
        for device, at, mhz in rows:
            by_device.setdefault(int(device), []).append((int(at), float(mhz)))
        for device, points in by_device.items():
            state = self.devices.setdefault(device, _Device())
            if not self.start_ns:
                state.pending.extend(points)
                continue
            self._add(conn, device, state, points)
            self._boundaries(conn, device, state)

    def _add(self, conn: Connection, device: int, state: _Device, points: list[tuple[int, float]]) -> None:
        rows = []
        for at, mhz in points:
            if at < self.start_ns:  # msprof keeps only the clock it leaves the start with
                if state.before_start is None or at >= state.before_start[0]:
                    state.before_start = (at, mhz)
                continue
            rows.append((device, at, mhz, NO_DIE))
            if state.latest is None or at >= state.latest[0]:
                state.latest = (at, mhz)
        if rows:
            conn.execute(msdb.AICORE_FREQ.create_sql())
            conn.insert(msdb.AICORE_FREQ, rows)

    def _boundaries(self, conn: Connection, device: int, state: _Device) -> None:
        if not self.start_ns or not state.default_mhz:
            return
        start_mhz = state.before_start[1] if state.before_start else state.default_mhz
        state.start_row = self._put(conn, state.start_row, device, self.start_ns, start_mhz)
        if self.end_ns:
            end_mhz = state.latest[1] if state.latest else start_mhz
            state.end_row = self._put(conn, state.end_row, device, self.end_ns, end_mhz)

    @staticmethod
    def _put(conn: Connection, rowid: int | None, device: int, at: int, mhz: float) -> int:
        conn.execute(msdb.AICORE_FREQ.create_sql())
        if rowid is not None:
            conn.execute("UPDATE AICORE_FREQ SET timestampNs = ?, freq = ? WHERE rowid = ?", (at, mhz, rowid))
            return rowid
        [(rowid,)] = conn.query(f"{msdb.AICORE_FREQ.insert_sql()} RETURNING rowid", (device, at, mhz, NO_DIE))
        return int(rowid)
