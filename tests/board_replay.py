"""Writes a finished PROF directory again, a little at a time, as a board would while its job runs.

Control files come first, and the name dictionaries (``hash_dic``, ``type_info_dic``) whole, as a
runtime that registered its names early writes them; then every other data stream grows in
``steps`` equal steps (slices filled in order, cut at any byte, each ``.done`` written when its
slice is whole); ``end_info`` comes last.
The bytes are those of the finished directory, so a run that follows the replay must give what a
run over the finished directory gives.
"""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

GATE_TIMEOUT_S = 300.0
DICTIONARIES = ("hash_dic", "type_info_dic")


@dataclass
class _Stream:
    slices: list[Path] = field(default_factory=list)  # in slice order
    written: int = 0  # bytes of the stream written so far

    @property
    def total(self) -> int:
        return sum(path.stat().st_size for path in self.slices)


def _slice_index(path: Path) -> tuple[str, int] | None:
    base, sep, index = path.name.rpartition(".slice_")
    return (base, int(index)) if sep and index.isdigit() else None


class BoardReplay(threading.Thread):
    """Replays ``source`` (a PROF_… directory) into ``target``. After each step in ``holds`` it waits for the
    next :meth:`release`, so a test can act while the job is known to be unfinished."""

    def __init__(self, source: Path, target: Path, steps: int = 20, pause_s: float = 0.15,
                 holds: tuple[int, ...] = ()) -> None:
        super().__init__(daemon=True)
        self.source, self.target = source, target
        self.steps, self.pause_s = steps, pause_s
        self.gates = {step: threading.Event() for step in holds}
        self.error: BaseException | None = None
        self.streams: dict[Path, _Stream] = {}
        self.last: list[Path] = []  # end_info files: the job has ended
        self.control: list[Path] = []
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            rel = path.relative_to(source)
            if path.name.endswith(".done") and path.with_name(path.name[:-5]).is_file() and \
                    _slice_index(path.with_name(path.name[:-5])):
                continue  # a slice's .done follows its slice
            parsed = _slice_index(path) if rel.parent.name == "data" else None
            if parsed is not None:
                self.streams.setdefault(rel.parent / parsed[0], _Stream()).slices.append(path)
            elif path.name.startswith("end_info"):
                self.last.append(path)
            else:
                self.control.append(path)
        for stream in self.streams.values():
            stream.slices.sort(key=lambda p: _slice_index(p)[1])  # type: ignore[index]

    def release(self) -> None:
        """Let the replay go on to its next hold (or to the end)."""
        waiting = [self.gates[step] for step in sorted(self.gates) if not self.gates[step].is_set()]
        if waiting:
            waiting[0].set()

    def release_all(self) -> None:
        for gate in self.gates.values():
            gate.set()

    def run(self) -> None:
        try:
            for path in self.control:
                self._copy(path)
            for step in range(1, self.steps + 1):
                for name, stream in self.streams.items():
                    whole = step == self.steps or name.name.endswith(DICTIONARIES)
                    self._grow(stream, stream.total if whole else stream.total * step // self.steps)
                if step in self.gates and not self.gates[step].wait(GATE_TIMEOUT_S):
                    raise TimeoutError(f"the replay was never released at step {step}")
                time.sleep(self.pause_s)
            for path in self.last:
                self._copy(path)
        except BaseException as exc:  # reported by the test through .error
            self.error = exc

    def _copy(self, path: Path) -> None:
        destination = self.target / path.relative_to(self.source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)

    def _grow(self, stream: _Stream, upto: int) -> None:
        offset = 0
        for path in stream.slices:
            size = path.stat().st_size
            start, end = max(stream.written, offset), min(upto, offset + size)
            if start < end:
                destination = self.target / path.relative_to(self.source)
                destination.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "rb") as source, open(destination, "ab") as out:
                    source.seek(start - offset)
                    out.write(source.read(end - start))
                stream.written = end
                done = path.with_name(path.name + ".done")
                if end == offset + size and done.is_file():
                    self._copy(done)
            offset += size
            if offset >= upto:
                return
