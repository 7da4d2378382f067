"""`pipeline collect --ssh board.ini -- ./main`: profile an application on a board driven over SSH
(as the CANN profiling guide for SVP boards does).

The guide's ``msprof.pyc collect`` copies the project to an SVP board over SSH, runs it, and mounts the profiling
folder back. Here the ``ssh``/``scp`` binaries copy the application, the board agent (``pipeline_board``) and a
session's CURVE keys to ``workdir`` on the board, then one ``ssh -R`` session runs the application with
profiling on (acl.json in ``$PIPELINE_ACL_JSON``) and the agent beside it; the agent pushes through the
forwarded port to the decoder of a local ``pipeline run``, so records arrive live and no NFS mount is needed.

board.ini is the guide's ``[ssh_config]`` (ip, username, pwd, port) plus optional keys: ``key`` (an identity
file: key-based login, preferred), ``known_hosts``, ``workdir``, ``python`` (the board's interpreter with pyzmq
and msgpack). A password is used only when no key logs in, through ``SSH_ASKPASS``, and refused when the ini
is readable by other users (the guide warns that such files leak board credentials).
"""

from __future__ import annotations

import collections
import configparser
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TextIO

import structlog

from pipeline.errors import UserError
from pipeline.launch import ProfilerSwitches, write_acl_json
from pipeline.security import generate_keys

SECTION = "ssh_config"
AGENT_PACKAGE = Path(__file__).resolve().parents[1] / "pipeline_board"
SESSION_CONFIG = Path(__file__).resolve().parent / "builtin_configs" / "board-ssh.yaml"
END_GRACE_S = 15.0  # the board side ended in failure: how long the local run may go on draining
AGENT_FAILED = "pipeline-board: agent failed, exit"  # the board's line when the agent ends in failure
AGENT_EXIT = 98  # the session's status when only the agent failed
log = structlog.get_logger()


@dataclass(frozen=True)
class BoardLogin:
    ip: str
    username: str
    port: int = 22
    password: str | None = None
    key: str | None = None
    known_hosts: str | None = None
    workdir: str = "/tmp/pipeline-board"
    python: str = "python3"

    def target(self) -> str:
        return f"{self.username}@{self.ip}"

    def ssh_options(self) -> list[str]:
        options = ["-o", "StrictHostKeyChecking=accept-new", "-o", "ConnectTimeout=15",
                   "-o", "PreferredAuthentications=publickey,keyboard-interactive,password"]
        if self.key:
            options += ["-i", self.key, "-o", "IdentitiesOnly=yes"]
        if self.known_hosts:
            options += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        if self.password is None:
            options += ["-o", "BatchMode=yes"]  # no prompt: key-based login or a clear failure
        return options


def read_board_ini(path: Path) -> BoardLogin:
    """The SVP profiling guide's ``[ssh_config]`` ini; a password in it must not be readable by other users."""
    if not path.is_file():
        raise UserError(f"--ssh: {path} does not exist", "write an ini with an [ssh_config] section (docs/board.md)")
    parser = configparser.ConfigParser(interpolation=None)
    text = path.read_text(encoding="utf-8", errors="replace")
    one_line = re.fullmatch(rf"\s*\[{SECTION}\]((?:\s+\w+\s*=\s*\S+)+)\s*", text)
    if one_line:  # the guide prints the ini on one line: `[ssh_config] ip = … username = … pwd = … port = …`
        text = f"[{SECTION}]\n" + "\n".join(f"{k} = {v}" for k, v in re.findall(r"(\w+)\s*=\s*(\S+)",
                                                                                 one_line.group(1)))
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as exc:
        raise UserError(f"--ssh: {path} is not an ini file: {str(exc).splitlines()[0]}") from None
    if not parser.has_section(SECTION):
        raise UserError(f"--ssh: {path} has no [{SECTION}] section",
                        "ip = …, username = …, port = 22 (as in the CANN profiling guide for SVP boards)")
    section = parser[SECTION]
    missing = [key for key in ("ip", "username") if not section.get(key, "").strip()]
    if missing:
        raise UserError(f"--ssh: {path} [{SECTION}] lacks {', '.join(missing)}")
    password = section.get("pwd", "").strip() or None
    mode = stat.S_IMODE(path.stat().st_mode)
    if password is not None and mode & 0o077:
        raise UserError(f"--ssh: {path} holds a password and is readable by others (mode {mode:04o})",
                        f"chmod 600 {path}, or better drop pwd and set key = ~/.ssh/id_ed25519 (key-based login)")
    try:
        port = int(section.get("port", "22"))
    except ValueError:
        raise UserError(f"--ssh: {path} [{SECTION}] port is not a number: {section.get('port')!r}") from None
    key = section.get("key", "").strip() or None
    known_hosts = section.get("known_hosts", "").strip() or None
    workdir = section.get("workdir", "").strip() or BoardLogin.workdir
    if not workdir.startswith("/"):
        raise UserError(f"--ssh: {path} [{SECTION}] workdir must be an absolute path on the board, not {workdir!r}")
    return BoardLogin(section["ip"].strip(), section["username"].strip(), port, password,
                      str(Path(key).expanduser()) if key else None,
                      str(Path(known_hosts).expanduser()) if known_hosts else None, workdir,
                      section.get("python", "").strip() or BoardLogin.python)


class SshSession:
    """ssh and scp to one board, with the password (if any) handed over by SSH_ASKPASS, never on a command line."""

    def __init__(self, login: BoardLogin, private_dir: Path) -> None:
        self.login = login
        self.env = dict(os.environ)
        if login.password is not None:
            askpass = private_dir / "askpass"
            askpass.write_text('#!/bin/sh\nprintf "%s\\n" "$PIPELINE_BOARD_PASSWORD"\n')
            askpass.chmod(0o700)
            self.env.update(SSH_ASKPASS=str(askpass), SSH_ASKPASS_REQUIRE="force", DISPLAY=":0",
                            PIPELINE_BOARD_PASSWORD=login.password)

    def ssh(self, *extra: str) -> list[str]:
        return ["ssh", "-p", str(self.login.port), *self.login.ssh_options(), *extra, self.login.target()]

    def run(self, command: str, what: str) -> None:
        result = subprocess.run([*self.ssh(), command], env=self.env, stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise UserError(f"--ssh: {what} failed on {self.login.target()}: "
                            f"{_last_line(result.stderr) or f'exit {result.returncode}'}",
                            "check board.ini (ip, port, username, key) and that `ssh` logs in with it")

    def copy(self, sources: list[Path], remote_dir: str) -> None:
        command = ["scp", "-P", str(self.login.port), "-p", "-r", "-q", *self.login.ssh_options(),
                   *map(str, sources), f"{self.login.target()}:{remote_dir}/"]
        result = subprocess.run(command, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=300)
        if result.returncode != 0:
            raise UserError(f"--ssh: copying {', '.join(s.name for s in sources)} to the board failed: "
                            f"{_last_line(result.stderr) or f'exit {result.returncode}'}")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _session_keys(folder: Path) -> None:
    """A fresh CURVE pair for each side, made for this session (the board gets its secret and our public key)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True, mode=0o700)
    generate_keys(folder, "workstation")
    generate_keys(folder, "board")
    (folder / "allowed").mkdir(mode=0o700)
    shutil.copy(folder / "board.key", folder / "allowed" / "board.key")


def remote_script(login: BoardLogin, app: list[str], remote_port: int) -> str:
    """What runs on the board: the agent in the background, the application, its status for the agent."""
    work = shlex.quote(login.workdir)
    agent = " ".join(shlex.quote(part) for part in (
        login.python, "-m", "pipeline_board.agent", f"{login.workdir}/profiling", "--connect",
        f"tcp://127.0.0.1:{remote_port}", "--secret-key", f"{login.workdir}/keys/board.key_secret",
        "--server-key", f"{login.workdir}/keys/workstation.key", "--end-marker", f"{login.workdir}/app_exit"))
    agent += ' --since "$started"'  # the application may write its directory before the agent is up
    command = " ".join(shlex.quote(part) for part in app)
    return "\n".join([
        f"cd {work} || exit 97",
        "rm -f app_exit",
        "started=$(date +%s)",
        f"export PIPELINE_ACL_JSON={work}/acl.json PYTHONPATH={work}${{PYTHONPATH:+:$PYTHONPATH}}",
        # the agent's failure is said at once (the workstation stops waiting for its data), not at the app's end
        f'({agent}; code=$?; if [ $code -ne 0 ]; then echo "{AGENT_FAILED} $code" >&2; fi; exit $code) & agent=$!',
        f"(cd app && {command}); status=$?",
        "echo $status > app_exit",
        "wait $agent; agent_status=$?",
        'echo "pipeline-board: application exit $status, agent exit $agent_status" >&2',
        'if [ "$status" -ne 0 ]; then exit "$status"; fi',
        f'if [ "$agent_status" -ne 0 ]; then exit {AGENT_EXIT}; fi',
        "exit 0",
    ])


def collect_over_ssh(ini: Path, app: list[str], output: Path, copy: list[Path], switches: ProfilerSwitches,
                     config: Path | None = None) -> int:
    """Copy, launch and stream; the exit status is the application's when it failed, else the pipeline's."""
    login = read_board_ini(ini)
    for tool in ("ssh", "scp"):
        if shutil.which(tool) is None:
            raise UserError(f"--ssh: the `{tool}` program is not installed", "install the OpenSSH client")
    local_file = Path(app[0])
    to_copy = ([local_file] if local_file.is_file() else []) + copy
    for path in to_copy:
        if not path.exists():
            raise UserError(f"--ssh: {path} does not exist", "--copy names local files to put beside the app")
    if local_file.is_file():
        app = [f"./{local_file.name}", *app[1:]]
    output.mkdir(parents=True, exist_ok=True)
    keys = output / "keys"
    _session_keys(keys)
    local_port, remote_port = _free_port(), _free_port()
    with tempfile.TemporaryDirectory(prefix="pipeline-ssh-") as private:
        session = SshSession(login, Path(private))
        acl = write_acl_json(Path(private) / "acl.json",
                             ProfilerSwitches(**{**switches.__dict__, "output": f"{login.workdir}/profiling"}))
        session.run(f"mkdir -p {shlex.quote(login.workdir)}/app {shlex.quote(login.workdir)}/keys "
                    f"&& rm -rf {shlex.quote(login.workdir)}/pipeline_board", "making the work folder")
        session.copy([AGENT_PACKAGE, acl], login.workdir)
        session.copy([keys / "board.key_secret", keys / "workstation.key"], f"{login.workdir}/keys")
        if to_copy:
            session.copy(to_copy, f"{login.workdir}/app")
        log.info("board ready", board=login.target(), workdir=login.workdir, copied=[p.name for p in to_copy])
        env = dict(os.environ, PIPELINE_BOARD_PORT=str(local_port), PIPELINE_BOARD_KEYS=str(keys),
                   PIPELINE_BOARD_OUTPUT=str(output), PIPELINE_BOARD=login.target())
        pipeline = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config or SESSION_CONFIG),
                                     "--live", "off"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        remote = subprocess.Popen([*session.ssh("-R", f"127.0.0.1:{remote_port}:127.0.0.1:{local_port}",
                                                "-o", "ExitOnForwardFailure=yes"),
                                   remote_script(login, app, remote_port)], env=session.env, stdin=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
        local = [_Relay(pipeline.stdout, sys.stdout), _Relay(pipeline.stderr, sys.stderr)]
        board = _Relay(remote.stderr, sys.stderr)
        try:
            app_status, pipeline_status = _session(login, remote, pipeline, board, local)
        except KeyboardInterrupt:
            remote.terminate()
            pipeline.send_signal(signal.SIGINT)
            remote.wait()
            pipeline.wait()
            return 130
        finally:
            for relay in (board, *local):
                relay.join(5)
                if not relay.is_alive():  # else still copying: its pipe goes with the process
                    relay.stream.close()
    agent_line = board.agent_line()
    if agent_line is not None:
        print(f"error: --ssh: the board agent failed: {agent_line} (the job's profiling data, if any, stays on "
              f"the board in {login.workdir}/profiling)", file=sys.stderr)
        return app_status if app_status not in (0, AGENT_EXIT) else 1
    if app_status == 255:
        print(f"error: --ssh: the ssh session to {login.target()} failed (see above)", file=sys.stderr)
        return 2
    return app_status if app_status else pipeline_status


def _session(login: BoardLogin, remote: subprocess.Popen[bytes], pipeline: subprocess.Popen[bytes], board: _Relay,
             local: list[_Relay]) -> tuple[int, int]:
    """Wait for the board session; (its exit status, the local pipeline's)."""
    while remote.poll() is None and not board.agent_failed.wait(0.2):
        pass
    if board.agent_failed.is_set():  # nothing more will come from the board: the local run is stopped, quietly
        _abort_quietly(pipeline, local)
        if remote.poll() is None:
            print(f"board agent failed: waiting for the application on {login.target()} to exit (Ctrl-C stops it)",
                  file=sys.stderr, flush=True)
        return remote.wait(), pipeline.wait()
    app_status = remote.wait()
    if app_status not in range(0, 97):  # the board side failed before or apart from the app: no end of stream
        _abort_quietly(pipeline, local, grace_s=END_GRACE_S)
    return app_status, pipeline.wait()


def _abort_quietly(pipeline: subprocess.Popen[bytes], local: list[_Relay], grace_s: float = 0.0) -> None:
    """No end of stream will come from the board: after ``grace_s`` (data in flight may still land), stop the run
    as a second Ctrl-C does. Its lines about stages it stopped say nothing the board's error does not."""
    deadline = time.monotonic() + grace_s
    while pipeline.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    for relay in local:
        relay.mute()
    for _ in range(2):  # the first asks for a drain, which would wait for the board; the second aborts
        if pipeline.poll() is None:
            pipeline.send_signal(signal.SIGINT)
            try:
                pipeline.wait(1.0)
            except subprocess.TimeoutExpired:
                pass


class _Relay(threading.Thread):
    """Copies a child's output to ours line by line as it comes, until muted; watches for the agent's failure."""

    def __init__(self, stream: IO[bytes] | None, to: TextIO) -> None:
        super().__init__(daemon=True)
        assert stream is not None, "the child's output is a pipe"
        self.stream, self.to = stream, to
        self.muted = False
        self.recent: collections.deque[str] = collections.deque(maxlen=50)
        self.agent_failed = threading.Event()
        self.start()

    def mute(self) -> None:
        self.muted = True

    def run(self) -> None:
        for raw in self.stream:
            line = raw.decode("utf-8", errors="replace")
            if not self.muted:
                self.to.write(line)
                self.to.flush()
            self.recent.append(line.rstrip("\n"))
            if line.startswith(AGENT_FAILED):
                self.agent_failed.set()

    def agent_line(self) -> str | None:
        """The agent's own error line (else its last line, a traceback's end) when it failed; None when it did not."""
        lines = list(self.recent)
        ends = [i for i, line in enumerate(lines) if line.startswith(AGENT_FAILED)]
        if not ends:
            return None
        before = [line.strip() for line in lines[:ends[-1]] if line.strip()]
        said = [line for line in before if line.startswith("agent: error: ")]
        if said:
            return said[-1][len("agent: error: "):]
        return before[-1] if before else f"it exited with status {lines[ends[-1]].split()[-1]}"
