"""Losses of raw data end the run failed, one line per loss naming the file and what it cost; what can be
accounted for (a host slice copied under the next name) is counted apart and said in a warning.

Each test damages a copy of one simulated PROF directory, as a person or a faulty copy would, and runs a real
`pipeline import` on it; the undisturbed import of the same directory is the reference.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pipeline_runs import pipeline_env, read_report, run_cli
from run_outputs import assert_same_outputs, csv_rows

NO_TRACEBACK = "Traceback"


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated PROF directory of several slices per stream (never changed: tests damage copies)."""
    folder = tmp_path_factory.mktemp("board")
    result = run_cli("simulate", str(folder), "--chip", "cloud", "--iterations", "30", "--rate", "max",
                     "--slice-bytes", "65536")
    assert result.returncode == 0, result.stderr
    return Path(json.loads((folder / "simulator_truth.json").read_text())["prof_dir"])


@pytest.fixture(scope="module")
def reference(board: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The undisturbed import of ``board``."""
    out = tmp_path_factory.mktemp("reference")
    result = run_cli("import", str(board), "--output", str(out))
    assert result.returncode == 0 and not _error_lines(result.stderr), result.stderr[-2000:]
    return out


def _copy(board: Path, tmp_path: Path) -> Path:
    prof = tmp_path / board.name
    shutil.copytree(board, prof, symlinks=True)
    return prof


def _import(prof: Path, out: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*prefix, sys.executable, "-m", "pipeline", "import", str(prof), "--output", str(out)],
                            capture_output=True, text=True, timeout=300, env=pipeline_env())
    assert NO_TRACEBACK not in result.stderr, result.stderr[-3000:]
    return result


def _error_lines(stderr: str) -> list[str]:
    return [line.removeprefix("error: ") for line in stderr.splitlines() if line.startswith("error:")]


def _warning_lines(stderr: str) -> list[str]:
    return [line.removeprefix("warning: ") for line in stderr.splitlines() if line.startswith("warning:")]


def _failed_with(result: subprocess.CompletedProcess[str], out: Path) -> list[str]:
    """The run ended failed (exit 1) with its problems as its error lines, every stage drained: the lines."""
    assert result.returncode == 1, result.stderr[-3000:]
    errors = _error_lines(result.stderr)
    report = read_report(out)
    assert report["state"] == "failed" and report["problems"] == errors
    assert all(final["ok"] for final in report["stages"].values())  # a loss of input, not a failure of a stage
    return errors


def _without_dac_override() -> tuple[str, ...]:
    """A prefix that runs a command without the capabilities that let root read any file."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("root without setpriv: file modes cannot keep the collector out")
    return ("setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all")


def test_an_unreadable_slice_is_named_with_why_and_what_it_held(board: Path, tmp_path: Path) -> None:
    prof = _copy(board, tmp_path)
    last_api = prof / "host" / "data" / "unaging.api_event.data.slice_2"
    middle_hwts = prof / "device_0" / "data" / "hwts.data.0.slice_1"
    deleted = prof / "device_0" / "data" / "aicore.data.0.slice_1"
    for path in (last_api, middle_hwts):
        path.chmod(0)
    deleted.unlink()

    out = tmp_path / "out"
    errors = _failed_with(_import(prof, out, _without_dac_override()), out)
    api_records = last_api.stat().st_size // 40
    assert sorted(errors) == sorted([
        f"collector: {deleted} is missing (deleted, or never written): its 65,536 bytes (about 512 aicore records) "
        "are missing from the outputs (copy it again from the board's PROF_… directory and import again)",
        f"collector: {middle_hwts} cannot be read (Permission denied): its 65,536 bytes (about 1,024 hwts "
        "records) are missing from the outputs (let the user running pipeline read it and import again)",
        f"collector: {last_api} cannot be read (Permission denied): its {last_api.stat().st_size:,} bytes (about "
        f"{api_records:,} api_event records) are missing from the outputs (let the user running pipeline read it "
        "and import again)"])


def test_a_slice_shorter_than_its_done_file_names_the_shortfall(board: Path, tmp_path: Path) -> None:
    prof = _copy(board, tmp_path)
    short = prof / "device_0" / "data" / "hwts.data.0.slice_1"
    assert short.with_name(short.name + ".done").read_text().startswith("filesize:65536")
    os.truncate(short, 20_000)

    out = tmp_path / "out"
    errors = _failed_with(_import(prof, out), out)
    assert errors == [f"collector: {short} holds 20,000 bytes but its .done gives 65,536: 45,536 bytes (about 711 "
                      "hwts records) never reached the file, so they are missing from the outputs (copy the slice "
                      "again from the board's PROF_… directory and import again)"]


def test_a_host_slice_copied_under_the_next_name_is_counted_apart(board: Path, reference: Path,
                                                                  tmp_path: Path) -> None:
    prof = _copy(board, tmp_path)
    data = prof / "host" / "data"
    original, copy = data / "unaging.api_event.data.slice_2", data / "unaging.api_event.data.slice_3"
    for suffix in ("", ".done"):
        shutil.copyfile(f"{original}{suffix}", f"{copy}{suffix}")

    out = tmp_path / "out"
    result = _import(prof, out)
    assert result.returncode == 0 and not _error_lines(result.stderr), result.stderr[-3000:]
    records = copy.stat().st_size // 40
    assert _warning_lines(result.stderr) == [
        f"collector: {copy} repeats unaging.api_event.data.slice_2 byte for byte: its {records:,} api_event records "
        f"({copy.stat().st_size:,} bytes) are counted once, not twice (a copy of a slice? remove it)"]
    collector = read_report(out)["stages"]["collect"]
    assert collector["accounting"]["repeated_records"] == records
    assert collector["accounting"]["records_collected"] == \
        read_report(reference)["stages"]["collect"]["accounting"]["records_collected"]
    assert_same_outputs(out, reference)


def test_a_symlinked_data_folder_fails_the_run_by_name(board: Path, reference: Path, tmp_path: Path) -> None:
    prof = _copy(board, tmp_path)
    data = prof / "device_0" / "data"
    data.rename(tmp_path / "elsewhere")
    data.symlink_to(tmp_path / "elsewhere")

    out = tmp_path / "out"
    errors = _failed_with(_import(prof, out), out)
    assert errors == [f"collector: {data} is a symbolic link: not followed (msprof does not follow links in a PROF "
                      "directory either), so what it holds is missing from the outputs (copy it in with `cp -rL` in "
                      "place of the link and import again)"]
    assert csv_rows(out, "api_statistic") == csv_rows(reference, "api_statistic")  # the host's data is whole


def test_a_slice_of_random_bytes_fails_the_run_and_show_says_the_figures_are_incomplete(
        board: Path, tmp_path: Path) -> None:
    prof = _copy(board, tmp_path)
    spoilt = prof / "device_0" / "data" / "hwts.data.0.slice_2"
    spoilt.write_bytes(random.Random(9).randbytes(spoilt.stat().st_size))

    out = tmp_path / "out"
    errors = _failed_with(_import(prof, out), out)
    assert len(errors) == 1 and errors[0].startswith(
        f"collector: {spoilt}: 65,536 of the 264,960 bytes of hwts read are not whole records (bad magic, unknown "
        "tag or truncated), more than 1%: 65,536 bytes (about 1,024 hwts records) are missing from the outputs")
    assert sum(path.stat().st_size for path in (out / "rejected").glob("collect.*")) == 65_536  # kept aside

    shown = run_cli("show", str(out), "--top", "3")
    assert shown.returncode == 0, shown.stderr
    text = "".join(shown.stdout.split())  # the console wraps lines where it likes
    assert "".join("these figures are incomplete (1 problem(s)".split()) in text
    assert "".join(errors[0].split()) in text
