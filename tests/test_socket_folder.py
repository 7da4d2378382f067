"""The folder of a run's local sockets is the user's alone.

Its name is predictable (``ascend-pipeline-{uid}`` in ``$XDG_RUNTIME_DIR``, else the temp folder), so
another user may have made it first. Real runs, as root and as an ordinary user (``setpriv``), meet a
folder of another owner or with a loose mode: each ends with one line and exit 2, and the folder is
left as it was. With ``XDG_RUNTIME_DIR`` set, a run's folder is made under it, 0700 (as root: an
ordinary user here cannot start the stage processes, whose interpreter lies in root's home).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pipeline_runs import pipeline_env

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="needs root (to chown) and setpriv (to run as another user)")
NOBODY = 65534  # the ordinary user the runs switch to
STRANGER = 1234  # owner of a folder that is not the runner's


@pytest.fixture()
def shared() -> Iterator[Path]:
    """A folder every user can reach, as /tmp is (pytest's own temp folder is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="socket-folder-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _config(shared: Path) -> Path:
    config = shared / "run.yaml"
    config.write_text(f"""
run: {{name: sockets, output: "{shared / 'out'}"}}
stages:
  board: {{type: simulator, chip: mini, iterations: 3, rate: max, seed: 3, output: board}}
  collect: {{type: collector, path: board, follow: true, wait_s: 20}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats]}}
""")
    config.chmod(0o644)
    return config


def _run(shared: Path, uid: int, xdg: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = pipeline_env()
    env.update(TMPDIR=str(shared / "tmp"), HOME=str(shared))
    env.pop("XDG_RUNTIME_DIR", None)
    if xdg is not None:
        env["XDG_RUNTIME_DIR"] = str(xdg)
    command = [sys.executable, "-m", "pipeline", "run", str(_config(shared)), "--live", "off"]
    if uid != 0:
        command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *command]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=240, cwd=shared)


def _folder(shared: Path, uid: int, owner: int, mode: int) -> Path:
    (shared / "tmp").mkdir(mode=0o1777, exist_ok=True)
    (shared / "tmp").chmod(0o1777)
    folder = shared / "tmp" / f"ascend-pipeline-{uid}"
    folder.mkdir()
    os.chown(folder, owner, owner)
    folder.chmod(mode)
    return folder


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    text = result.stdout + result.stderr
    assert "Traceback" not in text, text[-3000:]
    (line,) = [line for line in text.splitlines() if line.startswith("error:")]
    return line


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "ordinary-user"])
def test_a_socket_folder_of_another_owner_is_refused(shared: Path, uid: int) -> None:
    folder = _folder(shared, uid, owner=STRANGER, mode=0o700)
    result = _run(shared, uid)
    assert result.returncode == 2, result.stdout + result.stderr
    line = _one_error_line(result)
    assert f"socket folder {folder} belongs to " in line, line
    assert f"uid {STRANGER})" in line or f"uid {STRANGER}," in line, line  # named too where it has an account
    assert ", not to you" in line, line
    assert "XDG_RUNTIME_DIR" in line  # what to do
    info = folder.stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (STRANGER, 0o700)  # left as it was
    assert not list(folder.iterdir())


@pytest.mark.parametrize("uid", [0, NOBODY], ids=["root", "ordinary-user"])
def test_a_socket_folder_others_can_enter_is_refused(shared: Path, uid: int) -> None:
    folder = _folder(shared, uid, owner=uid, mode=0o755)
    result = _run(shared, uid)
    assert result.returncode == 2, result.stdout + result.stderr
    line = _one_error_line(result)
    assert f"socket folder {folder} has mode 0755, not 0700" in line and f"chmod 700 {folder}" in line, line
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755


def test_a_run_keeps_its_sockets_under_xdg_runtime_dir(shared: Path) -> None:
    xdg = shared / "xdg"
    xdg.mkdir(mode=0o700)
    (shared / "tmp").mkdir(mode=0o1777)
    result = _run(shared, 0, xdg=xdg)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    folder = xdg / "ascend-pipeline-0"
    info = folder.lstat()
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o700
    assert not list((shared / "tmp").glob("ascend-pipeline-*"))  # nothing in the temp folder
    assert not list(folder.iterdir())  # the run's own folder inside went with the run
