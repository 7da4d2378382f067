"""`pipeline run`: one OS process per stage, a control plane, the live view, crash recovery and the run report."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

import msgpack
import yaml
import zmq

from pipeline import checkpoint, transport
from pipeline.config import PipelineConfig
from pipeline.ctl import windows_record
from pipeline.errors import UserError, refused_path
from pipeline.health import StageHealth
from pipeline.launch import Application, combined_exit_code
from pipeline.metrics import ViewCollector, serve_metrics
from pipeline.report import outputs_line, partition_report, render_report, root_causes, run_problems, run_warnings
from pipeline.security import stop_authenticators
from pipeline.views import progress_line, records_out

if TYPE_CHECKING:
    from pipeline.progress import Display

KILL_GRACE_S = 5.0
PUBLISH_INTERVAL_S = 0.5
FINAL_WAIT_S = 1.0  # a stage that exits non-zero has sent its report first: wait this long for it


@dataclass
class StageProcess:
    stage_id: str
    role: str
    popen: subprocess.Popen[bytes]
    metrics: dict[str, Any] = field(default_factory=dict)
    final: dict[str, Any] | None = None
    rate_in: float = 0.0
    rate_out: float = 0.0
    last_sample: tuple[float, int, int] | None = None
    said: set[str] = field(default_factory=set)  # what the stage asked to be shown (its progress' "notice"): once
    health: StageHealth = field(default_factory=lambda: StageHealth(time.monotonic()))


class Supervisor:
    def __init__(self, config: PipelineConfig, live: bool | None = None, run_id: str | None = None,
                 app: Application | None = None, fresh: bool = False, display: Display | None = None,
                 logs_to_file: bool = False, command: str | None = None) -> None:
        self.config = config
        self.display = display  # instead of the live view or progress lines (`pipeline import`'s bar)
        self.logs_to_file = logs_to_file  # the stages' log lines go to a file even off a terminal
        self.app = app  # `pipeline run CONFIG -- APP`: the profiled job, run beside the stages
        self.run_id = run_id or f"{config.run.name}-{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.live = sys.stdout.isatty() if live is None else live
        self.procs: dict[str, StageProcess] = {}
        self.view: dict[str, Any] = {}
        self.state = "running"
        self.interrupts = 0
        self.drain_timed_out: list[str] = []  # what each stage still waited for when the drain timed out
        self.started = time.monotonic()
        self.started_wall = time.time()  # files changed from here on are this run's (the outputs line)
        self.stamp = time.strftime("%Y%m%d%H%M%S")
        self.owns_socket_dir = False
        self.stage_log: TextIO | None = None  # the stages' stderr while the live view holds the terminal
        self.exporter: ViewCollector | None = None
        self.app_status: int | None = None
        self.zctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.fresh = fresh
        self.control_endpoint = ""
        self.checkpoint_s = config.run.checkpoint_s  # as configured (0 is written for the stages when off)
        self.participants = self._participants()
        self.recovery_off = self._recovery_off()
        self.epochs = checkpoint.EpochBook(self.participants)
        self.restarts: Counter[str] = Counter()
        self.recoveries: list[dict[str, Any]] = []
        self.resumed: dict[str, Any] | None = None  # this run continues one that was killed
        self.external: list[str] = []  # sources that write for the run and are not checkpointed (the simulator)
        self.external_lines: list[str] = []  # what each of them left, said when the run resumes
        self.resume_warnings: list[str] = []  # ... and what the run report must say of it (a job cut short)
        # the command that runs this again (`pipeline import PROF_DIR`), for the lines on resuming and starting over
        self.command = command or f"pipeline run {config.path}"
        self.saved_counts: dict[int, dict[str, tuple[int, int]]] = {}  # epoch → stage → (in, out) when saved
        self.checkpointed: dict[str, tuple[int, int]] = {}  # the same at the newest complete epoch
        self.complete_unrecorded = False  # the newest complete epoch could not be written (full disk): warned once

    # -- crash recovery -------------------------------------------------------------------
    def _participants(self) -> set[str]:
        """Stages that save checkpoints and restart together: all but sources with no outputs (a board)."""
        return {sid for sid, spec in self.config.enabled_stages().items()
                if (spec.cls.role != "source" or spec.cls.outputs) and not getattr(spec.cls, "remote", False)}

    def _recovery_off(self) -> str | None:
        """Why a crash ends this run instead of restarting stages from a checkpoint (None: it does not)."""
        if self.config.run.checkpoint_s <= 0:
            return "run.checkpoint_s is 0"
        sources = [spec for sid, spec in self.config.enabled_stages().items()
                   if spec.cls.role == "source" and sid in self.participants]
        if len(sources) != 1:
            return f"checkpoints need exactly one source with outputs, this run has {len(sources)}"
        if not getattr(sources[0].cls, "checkpoints", False):
            return f"source '{sources[0].stage_id}' ({sources[0].type_name}) does not cut checkpoint epochs"
        return None

    def _graph(self) -> list[list[str]]:
        specs = self.config.enabled_stages()
        return checkpoint.graph_of((sid, specs[sid].type_name, specs[sid].inputs)
                                   for sid in self.config.stages if sid in self.participants)

    def _prepare_checkpoints(self) -> int | None:
        """Resume a killed run from its newest complete epoch (returned), or clear what an earlier run left."""
        out_dir = self.config.output_dir
        complete = checkpoint.read_complete(out_dir)
        if self.recovery_off is not None:
            if self.config.run.checkpoint_s > 0:
                print(f"crash recovery is off: {self.recovery_off}", file=sys.stderr, flush=True)
            self.config.run.checkpoint_s = 0  # the stages keep no checkpoints either
            self.config.raw.setdefault("run", {})["checkpoint_s"] = 0
        if complete is None or self.fresh or self.recovery_off is not None:
            if complete is not None:
                print(f"starting over: the checkpoints of run {complete.run_id} in {out_dir} are discarded",
                      file=sys.stderr)
            checkpoint.remove_all(out_dir)
            return None
        if self.app is not None:
            raise UserError(f"{checkpoint.checkpoint_dir(out_dir)} holds checkpoints of run {complete.run_id}, "
                            "whose application was stopped: a new launch cannot go on with it",
                            f"start over with `{self.command} --fresh … -- APP`, or parse what the first launch "
                            "wrote with `pipeline import`")
        if complete.graph != self._graph():
            raise UserError(f"{checkpoint.checkpoint_dir(out_dir)} holds checkpoints of run {complete.run_id}, "
                            "whose stages differ from this config's",
                            f"resume it with the config it ran with, or start over with `{self.command} --fresh`")
        closed = checkpoint.closed_early(out_dir)
        if closed:  # their outputs hold what was read before the stop, and cannot be cut back to an epoch
            names = ", ".join(f"'{sid}'" for sid in closed)
            print(f"starting over: run {complete.run_id} was stopped after {names} closed outputs that cannot go "
                  f"back to checkpoint epoch {complete.epoch}; its outputs are made again under the same names",
                  file=sys.stderr, flush=True)
            self.stamp = complete.stamp
            checkpoint.remove_all(out_dir)
            return None
        self._check_external(complete)
        self.run_id, self.stamp = complete.run_id, complete.stamp
        checkpoint.discard_after(out_dir, complete.epoch)
        self.epochs.reset(complete.epoch)
        self.resumed = {"epoch": complete.epoch, "saved_at": complete.saved_at}
        age = time.time() - complete.saved_at
        print(f"resuming run {complete.run_id} from checkpoint epoch {complete.epoch} (saved {age:,.0f} s ago); "
              f"`{self.command} --fresh` starts over", flush=True)
        for line in self.external_lines:
            print(line, flush=True)
        return complete.epoch

    def _check_external(self, complete: checkpoint.CompleteEpoch) -> None:
        """Sources a resumed run does not start again (a simulated board): what they left decides whether the run
        can go on. One whose job ended (cut short or not) left all it will write; one killed mid-job never writes
        the rest, so the run would wait for ever: refused."""
        self.external = [sid for sid in self.config.enabled_stages() if sid not in self.participants]
        for sid in self.external:
            spec = self.config.stages[sid]
            look = getattr(spec.cls, "left_behind", None)
            left: checkpoint.LeftBehind | None = look(spec.config, self.config.output_dir) if look else None
            if left is None:
                self.external_lines.append(f"not started again: '{sid}' (the resumed run reads what it wrote, and "
                                           "waits for the rest of its job, which only a copy running elsewhere can "
                                           "write: Ctrl-C stops the wait)")
            elif not left.ended:
                raise UserError(f"run {complete.run_id} cannot be resumed: {left.line}, so the rest of its job "
                                "never comes",
                                f"start over with `{self.command} --fresh`{left.salvage}")
            else:
                self.external_lines.append(f"not started again: '{sid}': {left.line}")
                if left.cut_short:
                    self.resume_warnings.append(f"stage '{sid}': {left.line}")

    def _notices_at_start(self) -> dict[str, str]:
        """What a stage would say once it is up (a followed folder that is not there yet), said before the stages
        start: they take seconds to, and a wrong path should not look like a hang."""
        said = {}
        for sid, spec in self.config.enabled_stages().items():
            notice_at_start = getattr(spec.cls, "notice_at_start", None)
            notice = notice_at_start(spec.config, self.config.output_dir) if notice_at_start else None
            if notice:
                print(f"warning: {notice}", file=sys.stderr, flush=True)
                said[sid] = notice
        return said

    def _set_aside_unfinished_jobs(self) -> None:
        """A new run's sources that write a job (a simulated board) move aside what a killed one left unfinished."""
        for sid, spec in self.config.enabled_stages().items():
            set_aside = getattr(spec.cls, "set_aside_unfinished", None)
            for line in set_aside(spec.config, self.config.output_dir) if set_aside else []:
                print(f"stage '{sid}': {line}", file=sys.stderr, flush=True)

    def _on_checkpoint(self, proc: StageProcess, message: dict[str, Any]) -> None:
        if message.get("type") == "checkpoint_failed":
            if self.recovery_off is None:
                self.recovery_off = str(message.get("error"))
                print(f"warning: {self.recovery_off}; a crash now ends the run", file=sys.stderr, flush=True)
            return
        epoch = int(message.get("epoch", 0))
        if epoch > self.epochs.complete:
            self.saved_counts.setdefault(epoch, {})[proc.stage_id] = (int(message.get("in", 0)),
                                                                      int(message.get("out", 0)))
        if self.recovery_off is None and self.epochs.ack(proc.stage_id, epoch):
            self.checkpointed = self.saved_counts.get(epoch, {})
            self.saved_counts = {n: counts for n, counts in self.saved_counts.items() if n > epoch}
            out_dir = self.config.output_dir
            try:
                checkpoint.write_complete(out_dir, checkpoint.CompleteEpoch(epoch, self.run_id, self.stamp,
                                                                            self._graph(), time.time()))
            except OSError as exc:  # a full or read-only output disk: the epoch before stays the one on disk
                if not self.complete_unrecorded:
                    print(f"warning: checkpoint epoch {epoch} is not recorded on disk ({exc.strerror}); a restart "
                          "still uses it, a resumed run an older one", file=sys.stderr, flush=True)
                self.complete_unrecorded = True
                return
            self.complete_unrecorded = False
            checkpoint.prune_before(out_dir, epoch)

    def _crashed(self, proc: StageProcess, control: zmq.Socket[bytes]) -> bool:
        """Ended without its report (killed, or died before it could say why), or killed after it while a stage
        reading it had not reported (what it had not yet delivered is lost): a crash to recover from."""
        deadline = time.monotonic() + FINAL_WAIT_S
        while proc.final is None and (proc.popen.returncode or 0) > 0 and time.monotonic() < deadline:
            if control.poll(50):
                self._on_control(control.recv())
        return proc.final is None or (bool(proc.final.get("ok")) and self._unread(proc))

    def _consumers(self, proc: StageProcess) -> list[StageProcess]:
        return [other for other in self.procs.values()
                if any(producer == proc.stage_id for producer, _ in self.config.stages[other.stage_id].inputs)]

    def _unread(self, proc: StageProcess) -> bool:
        """A stage reading ``proc``'s outputs has not reported: it may not have read all that ``proc`` sent."""
        return any(other.final is None for other in self._consumers(proc))

    def _killed_after_report(self, proc: StageProcess) -> bool:
        """Ended by a signal after an ok report (while it waited for its consumers to read all, or exiting)."""
        return (proc.popen.returncode or 0) < 0 and bool(proc.final and proc.final.get("ok"))

    def _can_recover(self, proc: StageProcess) -> bool:
        """A sink that closed its outputs on streams cut short (Ctrl-C, then a crash in the drain) cannot go back
        to an epoch: then a crash ends the run."""
        return (proc.stage_id in self.participants and self.recovery_off is None and self.state != "aborted"
                and self.restarts[proc.stage_id] < self.config.run.max_restarts
                and not checkpoint.closed_early(self.config.output_dir))

    def _recover(self, crashed: StageProcess, control: zmq.Socket[bytes], publisher: zmq.Socket[bytes]) -> None:
        """Stop the other checkpointing stages and start them all again from the newest complete epoch."""
        sid, code = crashed.stage_id, crashed.popen.returncode
        self.state = "recovering"
        self.restarts[sid] += 1
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit {code} without a report"
        print(f"stage '{sid}' crashed ({how}): restarting the stages from checkpoint epoch {self.epochs.complete} "
              f"(restart {self.restarts[sid]} of {self.config.run.max_restarts} for '{sid}')",
              file=sys.stderr, flush=True)
        stopping = [self.procs[p] for p in self.participants]
        for proc in stopping:
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + KILL_GRACE_S
        while any(proc.popen.poll() is None for proc in stopping):
            if control.poll(100):  # acknowledgements still count: those stages saved their epoch
                self._on_control(control.recv())
            if time.monotonic() > deadline:
                for proc in stopping:
                    if proc.popen.poll() is None:
                        proc.popen.kill()
            publisher.send(msgpack.packb(self.snapshot(), use_bin_type=True))
        while control.poll(0):
            self._on_control(control.recv())
        if self.interrupts > 1:
            return  # aborted meanwhile (a second Ctrl-C): nothing is started again
        epoch = self.epochs.complete
        checkpoint.discard_after(self.config.output_dir, epoch)
        self.epochs.reset(epoch)
        self.saved_counts.clear()
        self.recoveries.append({"stage": sid, "exit": code, "resumed_epoch": epoch,
                                "at_s": round(time.monotonic() - self.started, 3)})
        self._spawn(self.control_endpoint, resume=epoch, only=self.participants)
        self._write_pids()
        self.state = "draining" if self.interrupts else "running"
        if self.interrupts:  # Ctrl-C came before or during the restart: the new sources stop too
            self._signal_sources()

    # -- processes ------------------------------------------------------------------------
    def _effective_config(self) -> Path:
        """The config as this run sees it (overrides applied), for the stage processes to load."""
        path = transport.socket_dir(self.config) / "config.yaml"
        # a restarted stage reads it while the run goes on: it sees the old file or the whole new one
        checkpoint.write_atomic(path, yaml.safe_dump(self.config.raw, sort_keys=False).encode())
        return path

    def _private_socket_dir(self) -> None:
        """Local ipc sockets of this run live in a directory no other run uses."""
        if self.config.run.socket_dir:
            return
        self.owns_socket_dir = True
        private = transport.socket_root() / f"{self.config.run.name[:16]}-{uuid.uuid4().hex[:8]}"
        self.config.run.socket_dir = str(private)
        self.config.raw.setdefault("run", {})["socket_dir"] = str(private)

    def _spawn(self, control: str, resume: int | None = None, only: set[str] | None = None) -> None:
        config_path = self._effective_config()
        order = {"sink": 0, "transform": 1, "source": 2}  # consumers bind before producers connect
        stages = sorted((spec for sid, spec in self.config.enabled_stages().items()
                         if (only is None or sid in only) and sid not in self.external
                         and not getattr(spec.cls, "remote", False)),  # a board agent starts on its board
                        key=lambda spec: order.get(spec.cls.role, 1))
        for spec in stages:
            command = [sys.executable, "-m", "pipeline", "stage", spec.stage_id, "--config", str(config_path),
                       "--run-id", self.run_id, "--control", control, "--output", str(self.config.output_dir),
                       "--stamp", self.stamp]
            if resume is not None and spec.stage_id in self.participants:
                command += ["--resume", str(resume)]
            popen = subprocess.Popen(command, start_new_session=True,  # Ctrl-C reaches the supervisor only
                                     stderr=self.stage_log)
            self.procs[spec.stage_id] = StageProcess(spec.stage_id, spec.cls.role, popen)

    def _signal_sources(self) -> None:
        for proc in self.procs.values():
            if proc.role == "source" and proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGTERM)

    def _write_pids(self) -> None:
        run_file = self.config.output_dir / "run.json"
        data = json.loads(run_file.read_text())
        data["stage_pids"] = {sid: proc.popen.pid for sid, proc in self.procs.items()}
        if self.app is not None:
            data["app"] = {"command": self.app.command, "pid": self.app.pid}
        checkpoint.write_atomic(run_file, json.dumps(data, indent=2).encode())  # read by `pipeline top`, ctl, tests

    def _stop_others(self) -> None:
        """A stage failed: stop the others now (they report what they had), kill stragglers later."""
        for proc in self.procs.values():
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGUSR1)

    def _kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.popen.poll() is None:
                proc.popen.kill()

    def _on_hangup(self, signum: int, frame: FrameType | None) -> None:
        """The terminal was closed: nothing can be shown on it any more (a write would fail), so the view and the
        report go nowhere; the run drains and writes run_report.json, as for Ctrl-C."""
        if self.interrupts == 0:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.dup2(devnull, sys.stderr.fileno())
            os.close(devnull)
        self._on_interrupt(signum, frame)

    def _on_interrupt(self, signum: int, frame: FrameType | None) -> None:
        self.interrupts += 1
        if self.interrupts == 1:
            if self.state != "failing":  # a failure before the Ctrl-C stays what the run is
                self.state = "draining"
            if self.app is not None and self.app.poll() is None:
                # The application gets the Ctrl-C (or SIGTERM); the collector drains once it has exited.
                print("\ninterrupted: stopping the application, then draining (Ctrl-C again to abort)",
                      file=sys.stderr, flush=True)
                self.app.signal(signum)
                return
            print("\ninterrupted: draining the pipeline (Ctrl-C again to abort)", file=sys.stderr, flush=True)
            self._signal_sources()
        else:
            self.state = "aborted"
            self._kill_all()
            if self.app is not None:
                self.app.kill()

    # -- control plane --------------------------------------------------------------------
    def _on_control(self, payload: bytes) -> None:
        try:
            message = msgpack.unpackb(payload, raw=False)
            proc = self.procs[message["stage"]]
        except Exception:
            return  # not ours: ignore
        sender = message.get("pid")
        if sender is not None and sender != proc.popen.pid:
            return  # from a process this supervisor has since replaced
        kind = message.get("type")
        for line in proc.health.heard(time.monotonic(), message.get("state") if kind == "metrics" else None,
                                      kind == "metrics"):
            print(f"stage '{proc.stage_id}' {line}", file=sys.stderr, flush=True)
        if kind == "metrics":
            notice = message.get("progress", {}).pop("notice", "")
            if notice and notice not in proc.said:
                print(f"warning: {notice}", file=sys.stderr, flush=True)
                proc.said.add(notice)
            proc.metrics = message
            now, received, sent = message["t"], message["in"], records_out(message)
            if proc.last_sample is not None:
                dt = now - proc.last_sample[0]
                if dt > 0:
                    proc.rate_in = (received - proc.last_sample[1]) / dt
                    proc.rate_out = (sent - proc.last_sample[2]) / dt
            proc.last_sample = (now, received, sent)
        elif kind == "final":
            proc.final = message
        elif kind == "view":  # the live sink sends statistics, the advice sink findings: keep both
            self.view.update(message["view"])
        elif kind in ("checkpoint", "checkpoint_failed"):
            self._on_checkpoint(proc, message)

    def _in_config_order(self) -> list[str]:
        return [sid for sid in self.config.stages if sid in self.procs]

    def snapshot(self) -> dict[str, Any]:
        stages = {}
        for sid in self._in_config_order():
            proc = self.procs[sid]
            metrics = proc.metrics
            stages[sid] = {"role": proc.role, "in": metrics.get("in", 0), "out": records_out(metrics),
                           "out_ports": metrics.get("out", {}), "out_links": metrics.get("out_links", {}),
                           "inputs": [f"{producer}.{port}" for producer, port in self.config.stages[sid].inputs],
                           "rejected": metrics.get("rejected", 0), "rate_in": proc.rate_in, "rate_out": proc.rate_out,
                           "progress": metrics.get("progress", {}), "rss_mb": metrics.get("rss_mb", 0.0),
                           "status": self._status(proc), "restarts": self.restarts[sid]}
            if self.config.stages[sid].partitions > 1:  # one of a partitioned stage's processes
                stages[sid]["group"] = self.config.stages[sid].group
            if sid in self.checkpointed:  # what a crash would not replay
                stages[sid]["checkpointed"] = dict(zip(("in", "out"), self.checkpointed[sid], strict=True))
        view = {"run": self.config.run.name, "run_id": self.run_id, "state": self._shown_state(stages),
                "elapsed_s": time.monotonic() - self.started, "stages": stages, "stats": self.view,
                "checkpoint": {"epoch": self.epochs.complete, "recovery": self.recovery_off or "on",
                               "restarts": sum(self.restarts.values())}}
        if self.app is not None:
            view["app"] = {"pid": self.app.pid, "exit_status": self.app_status}
        return view

    def _shown_state(self, stages: dict[str, dict[str, Any]]) -> str:
        """The run's state, and what holds it up while it runs (a paused output, a stuck stage)."""
        if self.state != "running":
            return self.state
        statuses = [stage["status"] for stage in stages.values()]
        if any(status.startswith("paused") for status in statuses):
            return "paused"
        if any(status.startswith("stuck") for status in statuses):
            return "running, a stage is stuck"
        return "running"

    @staticmethod
    def _status(proc: StageProcess) -> str:
        code = proc.popen.poll()
        if code is None:
            return proc.health.status(time.monotonic())
        if proc.final is not None and proc.final.get("ok"):
            return "done"
        if proc.health.killed:
            return f"killed (no heartbeat for {proc.health.killed_after_s:.0f} s)"
        return f"failed (exit {code})"

    def _check_heartbeats(self, now: float) -> None:
        """Stages that said nothing for run.heartbeat_timeout_s are stuck; killed if run.kill_stuck."""
        timeout = self.config.run.heartbeat_timeout_s
        for proc in self.procs.values():
            if proc.popen.poll() is not None or proc.final is not None:
                continue
            line = proc.health.check(now, timeout)
            if line is None:
                continue
            print(f"stage '{proc.stage_id}' {line}", file=sys.stderr, flush=True)
            if self.config.run.kill_stuck:
                proc.health.kill(now)
                print(f"stage '{proc.stage_id}' killed: no heartbeat for {timeout:g} s (run.kill_stuck)",
                      file=sys.stderr, flush=True)
                proc.popen.kill()

    def _curve_paths(self) -> dict[str, str | None] | None:
        """Key file paths (never their contents) for `pipeline top` on a tcp top endpoint."""
        curve = self.config.run.curve
        if curve is None:
            return None
        server = curve.server_key
        return {"secret_key": str(Path(curve.secret_key).expanduser().resolve()),
                "server_key": str(Path(server).expanduser().resolve()) if server else None}

    # -- main loop ------------------------------------------------------------------------
    def run(self) -> int:
        out_dir = self.config.output_dir
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / ".writable").touch()  # a read-only folder is said here, not by a stage later
            (out_dir / ".writable").unlink()
        except OSError as exc:
            raise refused_path(exc) from None
        _refuse_a_running_run(out_dir)
        if self.logs_to_file or (self.live and sys.stderr.isatty()):  # log lines would tear the live view apart
            log_path = out_dir / "logs" / f"stages_{self.stamp}.log"
            log_path.parent.mkdir(exist_ok=True)
            self.stage_log = open(log_path, "a", encoding="utf-8")  # closed in _finish
        resume = self._prepare_checkpoints()
        if resume is None:
            self._set_aside_unfinished_jobs()
        self._private_socket_dir()
        control_ep = self.control_endpoint = transport.control_endpoint(self.config)
        control = self.zctx.socket(zmq.PULL)
        control.bind(control_ep)
        publisher = self.zctx.socket(zmq.PUB)
        publisher.setsockopt(zmq.SNDHWM, 4)
        transport.secure_bind(self.zctx, publisher, transport.top_endpoint(self.config), self.config.curve_keys())
        publisher.bind(transport.top_endpoint(self.config))
        self.exporter = serve_metrics(self.config)
        checkpoint.write_atomic(out_dir / "run.json", json.dumps({  # `pipeline top` may read it at once
            "run_id": self.run_id, "config": str(self.config.path), "pid": os.getpid(),
            "top_endpoint": transport.top_endpoint(self.config), "curve": self._curve_paths(),
            "windows": windows_record(self.config)}, indent=2).encode())  # `pipeline ctl RUN_FOLDER` reads it
        previous = signal.signal(signal.SIGINT, self._on_interrupt)
        signal.signal(signal.SIGTERM, self._on_interrupt)
        signal.signal(signal.SIGHUP, self._on_hangup)
        if self.app is not None:
            self.app.reset()
        early = self._notices_at_start()
        self._spawn(control_ep, resume=resume)
        for sid, notice in early.items():  # said already: not again when the stage asks
            if sid in self.procs:
                self.procs[sid].said.add(notice)
        if self.app is not None:
            try:
                self.app.start()
            except BaseException:
                self._kill_all()  # the stages would wait for a job that never comes
                raise
        self._write_pids()
        display = self.display or (_LiveDisplay() if self.live else None)
        try:
            self._loop(control, publisher, display)
        finally:
            if display is not None:
                display.stop()
            signal.signal(signal.SIGINT, previous)
        final_view = self.snapshot()
        final_view["state"] = "ended"
        publisher.send(msgpack.packb(final_view, use_bin_type=True))
        control.close(0)
        publisher.close(0)
        stop_authenticators()
        self.zctx.term()
        if self.owns_socket_dir:  # never a directory the user named
            shutil.rmtree(transport.socket_dir(self.config), ignore_errors=True)
        return self._finish()

    def _loop(self, control: zmq.Socket[bytes], publisher: zmq.Socket[bytes], display: Display | None) -> None:
        poller = zmq.Poller()
        poller.register(control, zmq.POLLIN)
        last_publish = last_progress = 0.0
        failure_seen_at: float | None = None
        while True:
            if dict(poller.poll(100)):
                while True:
                    try:
                        self._on_control(control.recv(zmq.NOBLOCK))
                    except zmq.Again:
                        break
            now = time.monotonic()
            if now - last_publish >= PUBLISH_INTERVAL_S:
                last_publish = now
                view = self.snapshot()
                publisher.send(msgpack.packb(view, use_bin_type=True))
                if self.exporter is not None:
                    self.exporter.update(view)
                if display is not None:
                    display.update(view)
            if display is None and now - last_progress >= self.config.run.progress_s:
                last_progress = now
                print(progress_line(self.snapshot()), flush=True)
            self._check_heartbeats(now)
            running = [p for p in self.procs.values() if p.popen.poll() is None]
            app_running = self._app_running()
            failed = [p for p in self.procs.values() if p.popen.poll() not in (None, 0)
                      and not (self._killed_after_report(p) and not self._unread(p))]  # killed once all was read
            if failed and failure_seen_at is None:
                # a crash is recovered even when nothing else runs any more: its producers may have ended
                # just because it went (their last consumer left), a moment before this pass saw it
                crashed = next((p for p in failed if self._can_recover(p) and self._crashed(p, control)), None)
                if crashed is not None:
                    self._recover(crashed, control, publisher)
                    continue
            if not running and not app_running:
                self._drain_control(control)
                return
            if failed and failure_seen_at is None:
                failure_seen_at = now
                if self.state != "aborted":  # killed by the second Ctrl-C, not failed: the run stays aborted
                    self.state = "failing"
                self._stop_others()
                if app_running:  # a profiling failure does not stop the user's job
                    print("pipeline failed: waiting for the application to exit (Ctrl-C stops it)",
                          file=sys.stderr, flush=True)
            if failure_seen_at is not None and now - failure_seen_at > KILL_GRACE_S:
                self._kill_all()
            if self.state == "draining" and now - self.started > 0 and self._sources_done():
                self._enforce_drain_timeout(now)

    def _app_running(self) -> bool:
        """Whether the launched application still runs (its exit writes the collector's end marker)."""
        if self.app is None:
            return False
        status = self.app.poll()
        if status is None:
            return True
        if self.app_status is None:
            self.app_status = status
            print(f"application exited with status {status}; draining the pipeline", flush=True)
        return False

    def _sources_done(self) -> bool:
        return all(p.popen.poll() is not None for p in self.procs.values() if p.role == "source")

    def _enforce_drain_timeout(self, now: float) -> None:
        done_at = getattr(self, "_sources_done_at", None)
        if done_at is None:
            self._sources_done_at = now
        elif now - done_at > self.config.run.drain_timeout_s:
            print(f"drain timeout ({self.config.run.drain_timeout_s:g} s after the sources ended): stopping the "
                  "remaining stages", file=sys.stderr)
            self.drain_timed_out = self._still_waiting()
            for line in self.drain_timed_out:
                print(f"  {line}", file=sys.stderr)
            self._kill_all()

    def _still_waiting(self) -> list[str]:
        """For each stage still running: the inputs whose end it waits for, against what their producer sent."""
        lines = []
        for sid, proc in self.procs.items():
            if proc.popen.poll() is not None:
                continue
            for key, received in proc.metrics.get("awaiting_end", {}).items():
                producer, _, port = key.rpartition(".")
                source = self.procs.get(producer)
                final = source.final if source is not None else None
                if final is None:
                    state = "which has not ended"
                else:
                    sent = final.get("out", {}).get(port, "?")
                    state = f"which ended having sent {sent} records"
                lines.append(f"stage '{sid}' waits for the end of '{key}' ({received} records received), {state}")
        return lines

    def _drain_control(self, control: zmq.Socket[bytes]) -> None:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            if control.poll(100):
                self._on_control(control.recv())
            elif all(p.final is not None for p in self.procs.values()):
                return

    def _finish(self) -> int:
        finals = {sid: self.procs[sid].final for sid in self._in_config_order()}
        exit_codes = {sid: self.procs[sid].popen.returncode for sid in self._in_config_order()}
        timeout = self.config.run.heartbeat_timeout_s
        killed = [f"stage '{sid}' was killed: no heartbeat for {timeout:g} s (run.kill_stuck)"
                  for sid in self._in_config_order() if self.procs[sid].health.killed]
        cut_off = [proc for proc in self.procs.values() if self._killed_after_report(proc)
                   and not all((c.final or {}).get("ok") for c in self._consumers(proc))]
        killed += [f"stage '{p.stage_id}' was killed (signal {-(p.popen.returncode or 0)}) after its report, before "
                   "the stages reading it had read all it sent" for p in cut_off]
        problems = killed + run_problems(finals, exit_codes, interrupted=self.interrupts > 0)
        problems += [f"drain timeout: {line}" for line in self.drain_timed_out]
        if self.state == "running" or (self.state == "failing" and not problems):  # failing: a stage killed after
            self.state = "completed" if not problems else "failed"  # its report, its consumers stopped after theirs
        elif self.state == "draining":  # Ctrl-C, drained: whole outputs of what was read until then
            self.state = "interrupted" if not problems else "failed"
        now = time.monotonic()
        warnings = run_warnings(finals) + self.resume_warnings
        report = {"run_id": self.run_id, "stamp": self.stamp, "config": str(self.config.path), "state": self.state,
                  "wall_s": now - self.started, "stages": finals, "exit_codes": exit_codes,
                  "problems": problems, "warnings": warnings, "recovery": self._recovery_report(),
                  "stalls": {sid: self.procs[sid].health.stalls(now, self.started) for sid in self._in_config_order()
                             if self.procs[sid].health.stuck_episodes}}
        if self.app is not None:
            report["app"] = self.app.summary()
        if self.config.partition_groups():
            report["partitions"] = partition_report(finals, self.config.partition_groups())
        out_dir = self.config.output_dir
        self._keep_or_clear_checkpoints(finals)
        try:
            checkpoint.write_atomic(out_dir / "run_report.json", json.dumps(report, indent=2, default=str).encode())
        except OSError as exc:
            print(f"error: cannot write {out_dir / 'run_report.json'}: {exc.strerror} (free space or fix "
                  "permissions; the report follows on stdout)", file=sys.stderr)
        print(render_report(report), flush=True)
        for line in self._recovery_lines():
            print(f"  {line}", flush=True)
        print(outputs_line(out_dir, int(self._outputs_since())), flush=True)  # whole seconds: coarse file systems
        from pipeline.html_report import write_after_run  # loaded only here

        write_after_run(out_dir)  # report.html: the summary, charts and advice for a browser
        if self.stage_log is not None:
            self.stage_log.close()
            print(f"stage logs in {self.stage_log.name}", flush=True)
        for line in warnings:
            print(f"warning: {line}", file=sys.stderr)
        for line in root_causes(problems):
            if self.state == "aborted" and "ended without a report" in line:
                continue  # killed by the second Ctrl-C, as asked: the line below says what that cost
            print(f"error: {line}", file=sys.stderr)
        if self.state == "aborted":
            print(self._aborted_line(), file=sys.stderr)
            return 130
        code = 1 if problems else 0
        if problems and set(root_causes(problems)) <= _input_errors(finals):
            code = 2  # a stage refused the user's input (a path, a folder with no PROF_…), as a bad config is
        if self.app is not None and self.app_status:
            print(f"error: the application exited with status {self.app_status}"
                  + (" (and the pipeline reported the problems above)" if problems else ""), file=sys.stderr)
        return combined_exit_code(code, self.app_status)

    def _recovery_lines(self) -> list[str]:
        """Under the run table: the attempt this run resumed, and each restart after a crash."""
        lines = []
        if self.resumed is not None:
            lines.append(f"resumed from checkpoint epoch {self.resumed['epoch']} (an earlier attempt of this run "
                         "was stopped)")
        for event in self.recoveries:
            code = event["exit"]
            how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit {code} without a report"
            lines.append(f"restarted after stage '{event['stage']}' crashed ({how}) at {event['at_s']:.1f} s, from "
                         f"checkpoint epoch {event['resumed_epoch']}")
        return lines

    def _outputs_since(self) -> float:
        """When this run's outputs began: a resumed run's first attempt wrote some of them (its stamp says when)."""
        if self.resumed is None:
            return self.started_wall
        try:
            return min(self.started_wall, time.mktime(time.strptime(self.stamp, "%Y%m%d%H%M%S")))
        except ValueError:
            return self.started_wall

    def _recovery_report(self) -> dict[str, Any]:
        return {"enabled": self.recovery_off is None, "why_not": self.recovery_off,
                "checkpoint_s": self.checkpoint_s, "last_complete_epoch": self.epochs.complete,
                "restarts": dict(self.restarts), "recoveries": self.recoveries, "resumed": self.resumed,
                "not_restarted": self.external}

    def _keep_or_clear_checkpoints(self, finals: dict[str, dict[str, Any] | None]) -> None:
        """A run whose stages all ended well needs no checkpoints; one that did not can be resumed."""
        out_dir = self.config.output_dir
        if all((finals.get(sid) or {}).get("ok") for sid in self.participants):
            checkpoint.remove_all(out_dir)
        elif checkpoint.read_complete(out_dir) is not None:
            print(f"checkpoints kept in {checkpoint.checkpoint_dir(out_dir)}: `{self.command}` again resumes this "
                  "run, with `--fresh` it starts over", file=sys.stderr)

    def _aborted_line(self) -> str:
        """What a second Ctrl-C lost: records read from disk but not through every stage."""
        read = sum(sum(p.metrics.get("out", {}).values()) for p in self.procs.values() if p.role == "source")
        through = min((p.metrics.get("in", 0) for p in self.procs.values() if p.role == "transform"), default=0)
        lost = (f"{read:,} records were read but only {through:,} reached every transform; the rest are not in the "
                "outputs" if through < read else
                f"the {read:,} records read had all reached every transform; what the sinks had not written yet is "
                "not in the outputs")
        return f"aborted: {lost}. The raw files are untouched: `pipeline import` parses them completely."


class _LiveDisplay:
    """The `pipeline top` view inside `pipeline run` when stdout is a terminal."""

    def __init__(self) -> None:
        from rich.live import Live

        from pipeline.views import render_view

        self._render = render_view
        self._live = Live(refresh_per_second=4, transient=False)
        self._live.start()

    def update(self, view: dict[str, Any]) -> None:
        self._live.update(self._render(view))

    def stop(self) -> None:
        self._live.stop()


def run_pipeline(config: PipelineConfig, live: bool | None = None, app: Application | None = None,
                 fresh: bool = False, display: Display | None = None, logs_to_file: bool = False,
                 command: str | None = None) -> int:
    """``command``: how the user runs this again (default `pipeline run CONFIG`), for the lines on resuming and
    starting over."""
    return Supervisor(config, live=live, app=app, fresh=fresh, display=display, logs_to_file=logs_to_file,
                      command=command).run()


def read_run_file(output_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((output_dir / "run.json").read_text())
    return data


def _input_errors(finals: dict[str, dict[str, Any] | None]) -> set[str]:
    """The problem lines of stages that ended on the user's input rather than on a failure of their own."""
    return {final["error"].removeprefix("error: ") for final in finals.values()
            if final is not None and final.get("input_error") and final.get("error")}


def _refuse_a_running_run(out_dir: Path) -> None:
    """Two runs writing one folder would overwrite each other's run.json, acl.json and outputs."""
    try:
        other = json.loads((out_dir / "run.json").read_text())
        pid = int(other["pid"])
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except (OSError, ValueError, KeyError, TypeError):
        return  # no run there, or its supervisor is gone (a crash: this run may resume it)
    report = out_dir / "run_report.json"
    if pid == os.getpid() or b"pipeline" not in command or \
            (report.is_file() and report.stat().st_mtime_ns >= (out_dir / "run.json").stat().st_mtime_ns):
        return
    raise UserError(f"run {other.get('run_id', '?')} (pid {pid}) is writing to {out_dir}",
                    "wait for it, stop it with Ctrl-C where it runs, or pass another --output")
