"""Fault soak: SIGKILL a random stage every few seconds through an import or a live run; the outputs must equal an
undisturbed run's, and no process of the run may be left once it has ended.

    python bench/fault_soak.py import [--records 5M | --prof PROF_DIR] [--reference DIR] [--every 5] [--seed 0]
                                     [--work DIR] [--timeout 3600]
    python bench/fault_soak.py live [--records 300k] [--rate 20k] [--every 5] [--max-restarts 100] [--work DIR]

import: simulates a directory (``pipeline simulate --chip cloud --rate max``, about 655 records per iteration;
``--prof`` takes an existing one), imports it undisturbed into WORK/reference (``--reference`` takes an earlier
import of the same directory), then imports it again into WORK/disturbed while SIGKILLing stage processes (PIDs
from the run's run.json, checked against /proc/PID/cmdline before the kill). The supervisor restarts the stages
from the newest complete checkpoint; the import config's restart limit (run.max_restarts, per stage and run) is
respected: a stage is killed at most that many times.

live: ``pipeline run`` of configs/live.yaml with the simulated board writing ``--records`` at ``--rate`` (chip
cloud) into WORK/live, killing random stages but the board; then ``pipeline import`` of the PROF directory the
board wrote (WORK/live/board/PROF_…) into WORK/import is the undisturbed run. ``--every 0`` kills nothing (a
control run: the differences a live run has from its import without faults).

A kill waits until the run is running again after the previous restart and a checkpoint epoch newer than the one
it restarted from is complete (the run has moved on), or ``--patience`` seconds past its time: without that,
kills every few seconds with 10 s between epochs would throw the run back to the same epoch until the restart
limit ends it.

Compared: every CSV of mindstudio_profiler_output byte for byte (by name without the run's stamp), the timeline
JSON's events as a multiset of lines (over all its files), every SQLite table's rows as a multiset, with
STRING_IDS ids resolved to their text and a task's globalTaskId to the TASK row it names (STRING_IDS itself: its
set of texts). Then every process whose command line names the run's output folder or run id is listed (after
``--grace`` seconds); its socket folder must be gone too. Prints a table of kills, restarts, the exit state, a
verdict per output and what was left; exit status 1 when anything differs or is left.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from functools import partial
from itertools import zip_longest
from pathlib import Path
from typing import Any

import msgpack
import yaml
import zmq

ROOT = Path(__file__).resolve().parents[1]
RECORDS_PER_ITERATION = 655  # the simulated Ascend 910 (--chip cloud): records per image, host and device
OUTPUT_FOLDER = "mindstudio_profiler_output"

# STRING_IDS columns of each table the sqlite sink writes; globalTaskId columns name a TASK row
STRING_COLUMNS = {
    "TASK": {"taskType"},
    "COMPUTE_TASK_INFO": {"name", "taskType", "opType", "inputFormats", "inputDataTypes", "inputShapes",
                          "outputFormats", "outputDataTypes", "outputShapes", "attrInfo", "opState", "hf32Eligible",
                          "gridDim", "blockDim"},
    "COMMUNICATION_SCHEDULE_TASK_INFO": {"name", "taskType", "opType"},
    "CANN_API": {"name"},
    "MSTX_EVENTS": {"message", "domainId"},
    "TASK_PMU_INFO": {"name"},
}
TASK_IDENTITY = ("startNs", "endNs", "deviceId", "connectionId", "globalPid", "taskType", "contextId", "streamId",
                 "taskId", "modelId")


# -- comparisons --------------------------------------------------------------------------------------------

@dataclass
class Verdict:
    output: str
    equal: bool
    detail: str


class MultisetDigest:
    """An order-free digest of many items: their count and the sum of their hashes (mod 2^128)."""

    def __init__(self) -> None:
        self.count = 0
        self.total = 0

    def add(self, item: bytes) -> None:
        self.count += 1
        self.total = (self.total + int.from_bytes(hashlib.blake2b(item, digest_size=16).digest(), "big")) % (1 << 128)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MultisetDigest) and (self.count, self.total) == (other.count, other.total)

    __hash__ = None  # type: ignore[assignment]


def _differences(got: Iterable[bytes], want: Iterable[bytes], examples: int = 2) -> str:
    """What differs between two multisets (read again when their digests differ): counts and a few items."""
    got_items, want_items = Counter(got), Counter(want)
    extra, missing = got_items - want_items, want_items - got_items
    shown = [f"extra {item[:160]!r}" for item in list(extra)[:examples]]
    shown += [f"missing {item[:160]!r}" for item in list(missing)[:examples]]
    return f"{sum(extra.values()):,} extra, {sum(missing.values()):,} missing; " + "; ".join(shown)


def _compare_multisets(name: str, got: Callable[[], Iterable[bytes]], want: Callable[[], Iterable[bytes]],
                       unit: str) -> Verdict:
    digests = []
    for items in (got, want):
        digest = MultisetDigest()
        for item in items():
            digest.add(item)
        digests.append(digest)
    if digests[0] == digests[1]:
        return Verdict(name, True, f"{digests[0].count:,} {unit}")
    return Verdict(name, False, f"{digests[0].count:,} {unit}, the reference {digests[1].count:,}: "
                                + _differences(got(), want()))


def _unstamped(path: Path, stamp: str) -> str:
    """A file's name without the run's stamp (op_summary_20261127121149.csv → op_summary.csv)."""
    return path.name.replace(f"_{stamp}", "")


def _stamp(out: Path) -> str:
    stamp: str = json.loads((out / "run_report.json").read_text())["stamp"]
    return stamp


def _first_difference(got: Path, want: Path) -> str:
    with got.open("rb") as left, want.open("rb") as right:
        for number, (a, b) in enumerate(zip_longest(left, right), 1):
            if a != b:
                return f"line {number}: {(a or b'<end>')[:100]!r} vs {(b or b'<end>')[:100]!r}"
    return "same lines"


def _same_bytes(got: Path, want: Path, chunk: int = 1 << 20) -> bool:
    if got.stat().st_size != want.stat().st_size:
        return False
    with got.open("rb") as left, want.open("rb") as right:
        while True:
            a, b = left.read(chunk), right.read(chunk)
            if a != b:
                return False
            if not a:
                return True


def compare_csvs(out: Path, reference: Path) -> list[Verdict]:
    files = [{_unstamped(path, _stamp(folder)): path for path in (folder / OUTPUT_FOLDER).glob("*.csv")}
             for folder in (out, reference)]
    got, want = files
    verdicts = []
    for name in sorted(got.keys() | want.keys()):
        if name not in got or name not in want:
            verdicts.append(Verdict(name, False, "only in the reference" if name in want else "not in the reference"))
        elif _same_bytes(got[name], want[name]):
            verdicts.append(Verdict(name, True, f"{got[name].stat().st_size:,} bytes"))
        else:
            verdicts.append(Verdict(name, False, f"{got[name].stat().st_size:,} bytes, the reference "
                                                 f"{want[name].stat().st_size:,}; first at "
                                                 + _first_difference(got[name], want[name])))
    return verdicts


def timeline_lines(out: Path) -> Iterator[bytes]:
    """The timeline's events, one a line (the files are JSON arrays written so), over all its files."""
    for path in sorted((out / OUTPUT_FOLDER).glob("msprof*.json")):
        with path.open("rb") as handle:
            for line in handle:
                event = line.strip().rstrip(b",")
                if event not in (b"", b"[", b"]"):
                    yield event


def compare_timeline(out: Path, reference: Path) -> Verdict:
    files = len(list((out / OUTPUT_FOLDER).glob("msprof*.json")))
    return _compare_multisets(f"timeline ({files} file{'s' * (files != 1)})", lambda: timeline_lines(out),
                              lambda: timeline_lines(reference), "events")


def _database(out: Path) -> Path:
    (path,) = out.glob("msprof_*.db")
    return path


def _tables(db: sqlite3.Connection) -> set[str]:
    return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def table_rows(path: Path, table: str) -> Iterator[bytes]:
    """A table's rows, string ids as their text, a globalTaskId as the TASK row's identity (ids are numbered in
    arrival order, which a restart may change)."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        if table == "STRING_IDS":  # a text may have two ids (a memo of messages): the set of texts
            for (value,) in db.execute("SELECT DISTINCT value FROM STRING_IDS"):
                yield repr(value).encode()
            return
        text = dict(db.execute("SELECT id, value FROM STRING_IDS"))
        columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
        strings = STRING_COLUMNS.get(table, set())
        joined = table != "TASK" and "globalTaskId" in columns
        kept = [c for c in columns if not (c == "globalTaskId" and (table == "TASK" or joined))]
        select = ", ".join(f"x.{c}" for c in kept)
        query = f"SELECT {select} FROM {table} x"
        if joined:
            query = (f"SELECT {select}, {', '.join(f't.{c}' for c in TASK_IDENTITY)} FROM {table} x "
                     "LEFT JOIN TASK t ON t.globalTaskId = x.globalTaskId")
        names = kept + [f"task.{c}" for c in TASK_IDENTITY] if joined else kept
        resolve = [name in strings or name == "task.taskType" for name in names]
        for row in db.execute(query):
            yield repr(tuple(text.get(v, f"<no string {v}>") if r else v
                             for v, r in zip(row, resolve, strict=True))).encode()


def compare_databases(out: Path, reference: Path) -> list[Verdict]:
    got, want = _database(out), _database(reference)
    with closing(sqlite3.connect(got)) as left, closing(sqlite3.connect(want)) as right:
        got_tables, want_tables = _tables(left), _tables(right)
    verdicts = []
    for table in sorted(got_tables | want_tables):
        name = f"db {table}"
        if table not in got_tables or table not in want_tables:
            verdicts.append(Verdict(name, False, "only in the reference" if table in want_tables
                                    else "not in the reference"))
        else:
            unit = "texts" if table == "STRING_IDS" else "rows"
            verdicts.append(_compare_multisets(name, partial(table_rows, got, table), partial(table_rows, want, table),
                                               unit))
    return verdicts


def compare_outputs(out: Path, reference: Path) -> list[Verdict]:
    return [*compare_csvs(out, reference), compare_timeline(out, reference), *compare_databases(out, reference)]


# -- processes ----------------------------------------------------------------------------------------------

def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _is_stage(pid: int, stage: str, run_id: str) -> bool:
    """PID is still this run's stage process (not ended, its PID not taken by another process)."""
    args = _cmdline(pid)
    return _alive(pid) and run_id in args and any(args[i:i + 2] == ["stage", stage] for i in range(len(args)))


def left_behind(needles: Iterable[str]) -> list[str]:
    """Processes (but this one) whose command line holds one of ``needles``: 'PID state command'."""
    needles = [n for n in needles if n]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        command = " ".join(_cmdline(int(entry.name)))
        if any(needle in command for needle in needles):
            try:
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            found.append(f"{entry.name} {state} {command[:150]}")
    return found


def wait_left_behind(needles: list[str], grace_s: float) -> tuple[list[str], list[str]]:
    """(processes at the run's end, those still there after ``grace_s``)."""
    at_end = left_behind(needles)
    deadline = time.monotonic() + grace_s
    remaining = at_end
    while remaining and time.monotonic() < deadline:
        time.sleep(0.5)
        remaining = left_behind(needles)
    return at_end, remaining


def pipeline_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline", *args]


def pipeline_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PROF_DIR", None)
    return env


# -- the killer ---------------------------------------------------------------------------------------------

@dataclass
class Kill:
    at_s: float
    stage: str
    pid: int
    restarted: str = "not seen"  # what the run's view showed after the kill


@dataclass
class RunView:
    """The newest snapshot of the run's live view (what `pipeline top` shows), from its publisher."""
    out: Path
    snapshot: dict[str, Any] = field(default_factory=dict)
    socket: zmq.Socket[bytes] | None = None

    def poll(self, context: zmq.Context[zmq.Socket[bytes]]) -> dict[str, Any]:
        if self.socket is None:
            endpoint = _run_file(self.out).get("top_endpoint")
            if not endpoint:
                return self.snapshot
            self.socket = context.socket(zmq.SUB)
            self.socket.setsockopt(zmq.CONFLATE, 1)
            self.socket.setsockopt(zmq.SUBSCRIBE, b"")
            self.socket.setsockopt(zmq.LINGER, 0)
            self.socket.connect(endpoint)
        while self.socket.poll(0):
            self.snapshot = msgpack.unpackb(self.socket.recv(), raw=False)
        return self.snapshot

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close(0)

    @property
    def state(self) -> str:
        return str(self.snapshot.get("state", ""))

    @property
    def epoch(self) -> int:
        return int(self.snapshot.get("checkpoint", {}).get("epoch", 0))


def _run_file(out: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return data


@dataclass
class Killer:
    """SIGKILLs a random eligible stage of a running run, once the run has moved on since the last restart."""
    out: Path
    every_s: float
    patience_s: float
    limit: int  # kills per stage (the run's restart limit)
    spared: frozenset[str]
    rng: random.Random
    kills: list[Kill] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    due: float = 0.0
    base_epoch: int = -1  # the epoch the run restarted from after the last kill
    awaiting: Kill | None = None
    awaiting_since: float = 0.0
    exhausted: bool = False

    def __post_init__(self) -> None:
        self.due = self.started + self._interval()

    def _interval(self) -> float:
        return self.rng.uniform(0.5 * self.every_s, 1.5 * self.every_s)

    def step(self, view: RunView) -> None:
        now = time.monotonic()
        if self.awaiting is not None:
            self._follow_restart(view, now)
            return
        if self.every_s <= 0 or self.exhausted or now < self.due or not view.state.startswith("running"):
            return
        if view.epoch <= self.base_epoch and now < self.due + self.patience_s:
            return  # the run has not saved a newer epoch since it restarted: a kill now would undo nothing new
        self._kill(view, now)

    def _follow_restart(self, view: RunView, now: float) -> None:
        kill = self.awaiting
        assert kill is not None
        restarts = view.snapshot.get("stages", {}).get(kill.stage, {}).get("restarts", 0)
        if restarts >= sum(k.stage == kill.stage for k in self.kills) and view.state.startswith("running"):
            kill.restarted = f"restarted from epoch {view.epoch} after {now - self.awaiting_since:.1f} s"
            self.base_epoch, self.awaiting = view.epoch, None
        elif view.state and not view.state.startswith(("running", "recovering")):
            kill.restarted = f"run {view.state}"
            self.awaiting = None
        elif now - self.awaiting_since > 120:
            kill.restarted = "no restart within 120 s"
            self.awaiting = None
        if self.awaiting is None:
            self.due = now + self._interval()

    def _kill(self, view: RunView, now: float) -> None:
        run = _run_file(self.out)
        run_id = str(run.get("run_id", ""))
        counts = Counter(k.stage for k in self.kills)
        victims = [(sid, pid) for sid, pid in run.get("stage_pids", {}).items()
                   if sid not in self.spared and counts[sid] < self.limit and _is_stage(pid, sid, run_id)]
        if not victims:
            if all(counts[sid] >= self.limit for sid in run.get("stage_pids", {}) if sid not in self.spared):
                self.exhausted = True
                print(f"fault soak: every stage killed {self.limit} times (the run's restart limit): no more kills",
                      flush=True)
            self.due = now + 1
            return
        stage, pid = self.rng.choice(sorted(victims))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        kill = Kill(round(now - self.started, 1), stage, pid)
        self.kills.append(kill)
        print(f"fault soak: {kill.at_s:7.1f} s  SIGKILL {stage} (pid {pid}), epoch {view.epoch}", flush=True)
        self.awaiting, self.awaiting_since = kill, now


@dataclass
class Outcome:
    exit_code: int | None
    wall_s: float
    kills: list[Kill]
    log: Path


def run_with_kills(command: list[str], out: Path, log: Path, killer: Killer, timeout_s: float) -> Outcome:
    """Run ``command`` (a pipeline run writing into ``out``), the killer at work until it ends."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    view = RunView(out)
    started = time.monotonic()
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=pipeline_env(),
                                   start_new_session=True)
        try:
            while process.poll() is None:
                if time.monotonic() - started > timeout_s:
                    print(f"fault soak: the run did not end in {timeout_s:.0f} s: interrupting it", flush=True)
                    process.send_signal(signal.SIGINT)
                    try:
                        process.wait(120)
                    except subprocess.TimeoutExpired:
                        process.kill()
                    break
                killer.step(view)
                view.poll(context)
                time.sleep(0.2)
        finally:
            view.close()
            context.term()
    return Outcome(process.wait(), time.monotonic() - started, killer.kills, log)


# -- the two modes ------------------------------------------------------------------------------------------

def count(text: str) -> int:
    """300k, 1M, 2.5M, 50000 → records."""
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def checked_run(command: list[str], what: str, log: Path) -> None:
    with log.open("w") as sink:
        code = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, env=pipeline_env()).returncode
    if code != 0:
        raise SystemExit(f"fault soak: {what} failed (exit {code}); see {log}")


def simulated_directory(work: Path, records: int, seed: int) -> Path:
    folder = work / "simulated"
    iterations = max(1, math.ceil(records / RECORDS_PER_ITERATION))
    print(f"fault soak: simulating {iterations:,} iterations (about {records:,} records) into {folder}", flush=True)
    checked_run(pipeline_command("simulate", str(folder), "--chip", "cloud", "--iterations", str(iterations),
                                 "--rate", "max", "--seed", str(seed)), "pipeline simulate", work / "simulate.log")
    (prof,) = folder.glob("PROF_*")
    return prof


def fresh_folder(path: Path) -> Path:
    if path.exists():
        raise SystemExit(f"fault soak: {path} exists: remove it or name another --work folder")
    return path


def import_mode(args: argparse.Namespace, work: Path) -> Report:
    prof = Path(args.prof).resolve() if args.prof else simulated_directory(work, count(args.records), args.seed)
    if args.reference:
        reference = Path(args.reference).resolve()
        undisturbed_s = float(json.loads((reference / "run_report.json").read_text())["wall_s"])
    else:
        reference = fresh_folder(work / "reference")
        print(f"fault soak: undisturbed import of {prof} into {reference}", flush=True)
        started = time.monotonic()
        checked_run(pipeline_command("import", str(prof), "--output", str(reference)), "the undisturbed import",
                    work / "reference.log")
        undisturbed_s = time.monotonic() - started
    out = fresh_folder(work / "disturbed")
    print(f"fault soak: import into {out}, a stage killed every {args.every:g} s or so", flush=True)
    killer = Killer(out, args.every, args.patience, import_restart_limit(), frozenset(), random.Random(args.seed))
    outcome = run_with_kills(pipeline_command("import", str(prof), "--output", str(out)), out,
                             work / "disturbed.log", killer, args.timeout)
    return Report(out, reference, outcome, undisturbed_s, args.grace)


def import_restart_limit() -> int:
    """run.max_restarts of the config `pipeline import` runs."""
    from pipeline.config import load_config

    config = load_config(ROOT / "pipeline" / "builtin_configs" / "import.yaml")
    return int(config.run.max_restarts)


def live_config(out: Path, records: int, rate: str, seed: int, max_restarts: int) -> str:
    """configs/live.yaml with the simulated board on (chip cloud, ``records`` at ``rate``) writing into ``out``."""
    config = yaml.safe_load((ROOT / "configs" / "live.yaml").read_text())
    config["run"].update(name=f"fault-soak-{os.getpid()}", output=str(out), max_restarts=max_restarts)
    board = config["stages"]["board"]
    board.pop("enabled", None)
    board.update(chip="cloud", iterations=max(1, math.ceil(records / RECORDS_PER_ITERATION)), rate=rate, seed=seed)
    config["stages"]["collect"]["path"] = "board"
    return "# written by bench/fault_soak.py from configs/live.yaml\n" + yaml.safe_dump(config, sort_keys=False)


def live_mode(args: argparse.Namespace, work: Path) -> Report:
    out = fresh_folder(work / "live")
    config = work / "live.yaml"
    config.write_text(live_config(out, count(args.records), args.rate, args.seed, args.max_restarts))
    print(f"fault soak: pipeline run {config} (about {count(args.records):,} records at {args.rate}/s), a stage "
          f"but the board killed every {args.every:g} s or so", flush=True)
    killer = Killer(out, args.every, args.patience, args.max_restarts, frozenset({"board"}), random.Random(args.seed))
    outcome = run_with_kills(pipeline_command("run", str(config), "--live", "off"), out, work / "live.log", killer,
                             args.timeout)
    truth = json.loads((out / "board" / "simulator_truth.json").read_text())
    reference = fresh_folder(work / "import")
    print(f"fault soak: undisturbed import of {truth['prof_dir']} into {reference}", flush=True)
    started = time.monotonic()
    checked_run(pipeline_command("import", truth["prof_dir"], "--output", str(reference)), "the import",
                work / "import.log")
    return Report(out, reference, outcome, time.monotonic() - started, args.grace)


# -- the report ---------------------------------------------------------------------------------------------

@dataclass
class Report:
    out: Path
    reference: Path
    outcome: Outcome
    undisturbed_s: float
    grace_s: float

    def print(self) -> bool:
        """Prints the tables; True when the outputs are equal and nothing was left behind."""
        report = _read_json(self.out / "run_report.json")
        run = _run_file(self.out)
        print(f"\nkills ({len(self.outcome.kills)})")
        print(f"  {'#':>3}  {'at s':>7}  {'stage':<10} {'pid':>8}  after the kill")
        for number, kill in enumerate(self.outcome.kills, 1):
            print(f"  {number:>3}  {kill.at_s:>7.1f}  {kill.stage:<10} {kill.pid:>8}  {_after(kill, report)}")
        recovery = report.get("recovery", {})
        print(f"\nrestarts in run_report.json: {recovery.get('restarts', {})} "
              f"({len(recovery.get('recoveries', []))} recoveries)")
        collected = sum(((report.get("stages", {}).get("collect") or {}).get("out") or {}).values())
        print(f"run {run.get('run_id', '?')}: {collected:,} records collected, exit {self.outcome.exit_code}, state "
              f"{report.get('state', '?')}, {self.outcome.wall_s:.1f} s (undisturbed: {self.undisturbed_s:.1f} s); "
              f"problems: {report.get('problems') or 'none'}")
        ok = self.outcome.exit_code == 0 and report.get("state") == "completed"
        ok = self._print_outputs() and ok
        return self._print_left_behind(run) and ok

    def _print_outputs(self) -> bool:
        print(f"\noutputs of {self.out} vs {self.reference}")
        try:
            verdicts = compare_outputs(self.out, self.reference)
        except (OSError, ValueError, sqlite3.Error, KeyError) as exc:
            print(f"  cannot compare: {exc}")
            return False
        width = max(len(v.output) for v in verdicts)
        for verdict in verdicts:
            print(f"  {verdict.output:<{width}}  {'equal' if verdict.equal else 'DIFFERS'}  {verdict.detail}")
        return all(v.equal for v in verdicts)

    def _print_left_behind(self, run: dict[str, Any]) -> bool:
        needles = [str(self.out), str(run.get("run_id", ""))]
        at_end, remaining = wait_left_behind(needles, self.grace_s)
        print(f"\nprocesses naming {self.out} or the run id ({', '.join(map(str, run.get('stage_pids', {}).values()))}"
              " were its last stages)")
        if not at_end:
            print("  none")
        for line in at_end:
            print(f"  {'LEFT' if line in remaining else f'gone within {self.grace_s:g} s'}: {line}")
        sockets = Path(str(run.get("top_endpoint", "")).removeprefix("ipc://")).parent
        socket_left = str(sockets) != "." and sockets.exists()
        print(f"socket folder {sockets}: {'LEFT' if socket_left else 'removed'}")
        return not remaining and not socket_left


def _after(kill: Kill, report: dict[str, Any]) -> str:
    """What the kill led to; a stage killed after its report (waiting for its consumers to read the end, or exiting)
    that the run did not restart: nothing was lost, its consumers had read all."""
    final = (report.get("stages", {}).get(kill.stage) or {})
    if kill.restarted == "run ended" and report.get("exit_codes", {}).get(kill.stage) == -signal.SIGKILL \
            and final.get("ok"):
        return "killed after its report, its consumers had read all: not restarted"
    return kill.restarted


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("import", "live"))
    parser.add_argument("--records", help="records to simulate (import: 200k, live: 300k; 5M for the full soak)")
    parser.add_argument("--prof", help="import: an existing PROF_… directory instead of a simulated one")
    parser.add_argument("--reference", help="import: an undisturbed import of that directory made earlier")
    parser.add_argument("--rate", default="20k", help="live: the board's records per second (default 20k)")
    parser.add_argument("--max-restarts", type=int, default=100, help="live: run.max_restarts (default 100)")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between kills, on average (0: none)")
    parser.add_argument("--patience", type=float, default=30.0,
                        help="seconds a kill waits past its time for a newer checkpoint epoch (default 30)")
    parser.add_argument("--seed", type=int, default=0, help="the simulator's seed and the victims' order")
    parser.add_argument("--work", help="folder for the directory, the runs and their logs (default: a new one)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds the disturbed run may take")
    parser.add_argument("--grace", type=float, default=10.0,
                        help="seconds the run's processes may take to end after it has (default 10)")
    args = parser.parse_args(argv)
    args.records = args.records or ("200k" if args.mode == "import" else "300k")
    work = Path(args.work).resolve() if args.work else Path(tempfile.mkdtemp(prefix="fault-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    report = import_mode(args, work) if args.mode == "import" else live_mode(args, work)
    ok = report.print()
    print(f"\nfault soak {args.mode}: {'PASS' if ok else 'FAIL'} (work folder {work}, seed {args.seed}, "
          f"load average {os.getloadavg()[0]:.1f})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
