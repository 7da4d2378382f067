"""`pipeline collect --ssh board.ini -- ./main` against a real OpenSSH server on loopback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pipeline_runs import ROOT, pipeline_env, run_cli

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
BOARD_PYTHON = "/tmp/py37-board/bin/python"  # .ci/run makes it (CPython 3.7, pyzmq, msgpack); else ours


def _ini(tmp_path: Path, body: str, mode: int) -> Path:
    path = tmp_path / "board.ini"
    path.write_text(body)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("body", ["[ssh_config]\nip = 127.0.0.1\nusername = HwHiAiUser\npwd = secret\nport = 22\n",
                                  "[ssh_config] ip = 127.0.0.1 username = HwHiAiUser pwd = secret port = 22\n"])
def test_a_password_readable_by_others_is_refused_in_one_line(tmp_path: Path, body: str) -> None:
    ini = _ini(tmp_path, body, 0o644)  # the seed's ini, also in the one-line form it prints
    result = run_cli("collect", "--ssh", str(ini), "--output", str(tmp_path / "out"), "--", "./main")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: --ssh: {ini} holds a password and is readable by others (mode 0644)")
    assert result.stderr.count("\n") <= 2 and "Traceback" not in result.stderr  # the line and its hint
    assert not (tmp_path / "out").exists()  # refused before anything was made or sent


@pytest.mark.parametrize("body, message", [
    ("[board]\nip = 1.2.3.4\n", "has no [ssh_config] section"),
    ("ip = 1.2.3.4\n", "is not an ini file"),
    ("[ssh_config]\nip = 1.2.3.4\n", "[ssh_config] lacks username"),
    ("[ssh_config]\nip = 1.2.3.4\nusername = u\nport = twenty\n", "port is not a number"),
])
def test_a_bad_ini_is_one_clear_line(tmp_path: Path, body: str, message: str) -> None:
    result = run_cli("collect", "--ssh", str(_ini(tmp_path, body, 0o600)), "--", "./main")
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """An OpenSSH server on a high loopback port admitting one key made here: (port, its private key)."""
    if not Path(SSHD).is_file():
        pytest.skip("no OpenSSH server here (apt-get install openssh-server; .ci/run installs it)")
    if os.geteuid() != 0:
        pytest.skip("sshd on loopback needs root here (it switches to the logged-in user)")
    folder = tmp_path / "sshd"
    folder.mkdir()
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
    port = _free_port()
    (folder / "sshd_config").write_text(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {folder}/host_key
AuthorizedKeysFile {folder}/authorized_keys
PidFile {folder}/sshd.pid
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
Subsystem sftp /usr/lib/openssh/sftp-server
""")
    Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation folder
    server = subprocess.Popen([SSHD, "-D", "-e", "-f", str(folder / "sshd_config")], stderr=subprocess.PIPE,
                              text=True)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"sshd did not start: {server.stderr.read() if server.stderr else ''}")
            time.sleep(0.1)
    try:
        yield port, folder / "client_key"
    finally:
        server.terminate()
        server.wait(10)


def _app(tmp_path: Path, iterations: int, exit_code: int = 0) -> Path:
    """`./main`: the simulated inference application, as the file a user would copy to the board."""
    main = tmp_path / "project" / "main"
    main.parent.mkdir()
    main.write_text(f"#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m stages.simulator.app "
                    f"--iterations {iterations} --rate max --exit-code {exit_code}\n")
    main.chmod(0o755)
    return main


@pytest.mark.slow
def test_collect_over_ssh_copies_runs_and_streams_back(tmp_path: Path, sshd: tuple[int, Path]) -> None:
    port, key = sshd
    workdir = tmp_path / "on-board"
    python = BOARD_PYTHON if Path(BOARD_PYTHON).is_file() else sys.executable
    ini = _ini(tmp_path, f"[ssh_config]\nip = 127.0.0.1\nusername = root\nport = {port}\nkey = {key}\n"
                         f"known_hosts = {tmp_path / 'known_hosts'}\nworkdir = {workdir}\npython = {python}\n", 0o644)
    main = _app(tmp_path, iterations=25)
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "pipeline", "collect", "--ssh", str(ini), "--output", str(out),
                             "--", str(main)], cwd=ROOT, env=pipeline_env(), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    assert (workdir / "app" / "main").read_bytes() == main.read_bytes()  # copied, and run from there
    assert (workdir / "pipeline_board" / "agent.py").is_file()
    assert "application exit 0, agent exit 0" in result.stderr

    profs = sorted((workdir / "profiling").glob("PROF_*"))
    assert len(profs) == 1  # written on the board, under the acl.json output the session set
    local = tmp_path / "local"
    assert run_cli("import", str(profs[0]), "--output", str(local), cwd=ROOT).returncode == 0
    for module in ("op_statistic", "api_statistic", "op_summary", "task_time"):
        streamed = next((out / "mindstudio_profiler_output").glob(f"{module}_[0-9]*.csv")).read_text()
        imported = next((local / "mindstudio_profiler_output").glob(f"{module}_[0-9]*.csv")).read_text()
        assert streamed == imported, module
        assert len(streamed.splitlines()) > 1, module


@pytest.mark.slow
def test_the_applications_failure_is_the_sessions_exit_status(tmp_path: Path, sshd: tuple[int, Path]) -> None:
    port, key = sshd
    python = BOARD_PYTHON if Path(BOARD_PYTHON).is_file() else sys.executable
    ini = _ini(tmp_path, f"[ssh_config]\nip = 127.0.0.1\nusername = root\nport = {port}\nkey = {key}\n"
                         f"known_hosts = {tmp_path / 'known_hosts'}\nworkdir = {tmp_path / 'b'}\npython = {python}\n",
               0o600)
    result = subprocess.run([sys.executable, "-m", "pipeline", "collect", "--ssh", str(ini), "--output",
                             str(tmp_path / "out"), "--", str(_app(tmp_path, iterations=5, exit_code=3))],
                            cwd=ROOT, env=pipeline_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 3, result.stderr[-3000:]
    assert "application exit 3, agent exit 0" in result.stderr



def _python_without_zmq() -> str | None:
    """A Python on this machine without pyzmq: a board interpreter the agent cannot run on."""
    for candidate in ("/usr/bin/python3", shutil.which("python3") or ""):
        if candidate and subprocess.run([candidate, "-c", "import zmq"], capture_output=True).returncode != 0:
            return candidate
    return None


def _collect(tmp_path: Path, port: int, key: Path, python: str, main: Path) -> subprocess.CompletedProcess[str]:
    ini = _ini(tmp_path, f"[ssh_config]\nip = 127.0.0.1\nusername = root\nport = {port}\nkey = {key}\n"
                         f"known_hosts = {tmp_path / 'known_hosts'}\nworkdir = {tmp_path / 'b'}\npython = {python}\n",
               0o600)
    return subprocess.run([sys.executable, "-m", "pipeline", "collect", "--ssh", str(ini), "--output",
                           str(tmp_path / "out"), "--", str(main)],
                          cwd=ROOT, env=pipeline_env(), capture_output=True, text=True, timeout=300)


def _ends_with_the_agents_line(result: subprocess.CompletedProcess[str], line: str) -> None:
    assert result.returncode == 1, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: --ssh: the board agent failed: {line}"), result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    for noise in ("drain timeout", "ended without a report", "interrupted: draining"):
        assert noise not in result.stderr, result.stderr[-3000:]  # the stopped local run stays quiet


@pytest.mark.slow
def test_an_agent_error_ends_the_session_with_its_line(tmp_path: Path, sshd: tuple[int, Path]) -> None:
    port, key = sshd
    main = tmp_path / "project" / "main"
    main.parent.mkdir()
    main.write_text("#!/bin/sh\nexit 0\n")  # profiles nothing: the agent finds no PROF_… directory
    main.chmod(0o755)
    python = BOARD_PYTHON if Path(BOARD_PYTHON).is_file() else sys.executable
    result = _collect(tmp_path, port, key, python, main)
    _ends_with_the_agents_line(result, "the application ended without writing a PROF_… directory in "
                                       f"{tmp_path / 'b' / 'profiling'}")
    assert "application exit 0, agent exit 2" in result.stderr


@pytest.mark.slow
def test_an_agent_that_cannot_start_ends_the_session_once_the_app_ends(tmp_path: Path,
                                                                       sshd: tuple[int, Path]) -> None:
    python = _python_without_zmq()
    if python is None:
        pytest.skip("every Python here has pyzmq: none to stand for a board without it")
    port, key = sshd
    result = _collect(tmp_path, port, key, python, _app(tmp_path, iterations=25))
    _ends_with_the_agents_line(result, f"Python module 'zmq' is missing for {python}")
    assert "application exit 0, agent exit 2" in result.stderr  # the application was not stopped
    assert any((tmp_path / "b" / "profiling").glob("PROF_*"))  # its profiling stays on the board
