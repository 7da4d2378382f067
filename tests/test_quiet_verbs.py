"""What a person sees of `pipeline import` and `show` on a real terminal (a pty of 80x24) and through a pipe: a
progress bar or a few plain lines, then the report or the tables; the stages' log lines only in the run's log
file. And a collector path that is missing or a file is said on the terminal within seconds."""

from __future__ import annotations

import re
import shutil
import signal
import sys
from pathlib import Path

import pexpect
import pytest
from pipeline_runs import ROOT, pipeline_env, run_cli

from pipeline.progress import LineDisplay
from pipeline.stage import StageContext
from stages.collector import CollectorStage
from stages.simulator.writer import simulate

LOG_LINE = re.compile(r"\[info|\[warning|peer connected|stage finished|\"event\":")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def prof(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated Ascend 910 job of 200 images (about 130 k records)."""
    return simulate(tmp_path_factory.mktemp("board"), chip="cloud", iterations=200, rate="max")


def _on_a_terminal(*args: str) -> tuple[str, int]:
    """Run `pipeline ARGS` on an 80x24 pty until it exits: everything it showed, and its exit status."""
    child = pexpect.spawn(sys.executable, ["-m", "pipeline", *args], env=pipeline_env(), cwd=str(ROOT),
                          dimensions=(24, 80), encoding="utf-8", timeout=240)
    shown = child.read()
    child.close()
    return shown.replace("\r", ""), int(child.exitstatus if child.exitstatus is not None else -1)


def _stage_log(out: Path) -> Path:
    (log,) = (out / "logs").glob("stages_*.log")
    return log


def test_import_on_a_terminal_shows_a_bar_then_the_report_and_no_log_lines(prof: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shown, status = _on_a_terminal("import", str(prof), "--output", str(out))
    assert status == 0, shown[-3000:]
    assert not LOG_LINE.search(shown), LOG_LINE.search(shown)
    text = ANSI.sub("", shown)
    bar = re.search(r"import [━╸╺ ]+ +\d+%", text)
    assert bar is not None, text[:2000]
    figures = re.search(r"([\d.]+)/([\d.]+) MB read · ([\d,]+)/~?([\d,]+) records", text)
    assert figures is not None, text[:2000]
    report = text.index("completed in")
    assert bar.start() < report and figures.start() < report  # the bar, then the report
    assert "all counts reconcile" in text[report:]
    log = _stage_log(out)
    assert f"stage logs in {log}" in text
    assert "peer connected" in log.read_text()  # the stages' lines are kept, in the file


def test_import_through_a_pipe_prints_a_few_plain_lines(prof: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli("import", str(prof), "--output", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert not LOG_LINE.search(result.stdout + result.stderr)
    assert "\x1b" not in result.stdout
    lines = [line for line in result.stdout.splitlines() if line.startswith("import: ")]
    assert 1 <= len(lines) <= 8, lines  # a few: the size, the quarters a view saw, the writing (in 0.5 s views)
    assert re.fullmatch(r"import: [\d.]+ MB of raw data on disk", lines[0]), lines
    assert "completed in" in result.stdout and f"stage logs in {_stage_log(out)}" in result.stdout


def test_a_directory_under_a_tenth_of_a_megabyte_still_shows_its_size(tmp_path: Path) -> None:
    tiny = simulate(tmp_path / "board", chip="mini", iterations=1, rate="max")
    on_disk = sum(f.stat().st_size for f in tiny.rglob("*") if f.is_file() and ".slice_" in f.name)
    assert on_disk < 100_000  # what the case is about (sizes to a tenth of a MB would say 0.0)
    collector = CollectorStage(CollectorStage.Config(path=str(tiny), follow=False),
                               StageContext(stage_id="collect", run_id="t", output_dir=tmp_path / "out"))
    assert sum(batch.count for batch in collector.batches() if batch is not None) > 0
    progress = collector.progress()
    assert abs(progress["MB_on_disk"] - on_disk / 1e6) <= 0.002, (progress, on_disk)
    lines_file = tmp_path / "lines.txt"
    with lines_file.open("w") as stream:
        view = _view(elapsed=0.5, read_mb=progress["MB_read"], through=0)
        view["stages"]["collect"]["progress"] = progress  # type: ignore[index]
        LineDisplay("import", stream).update(view)
    assert lines_file.read_text() == f"import: {progress['MB_on_disk']:.3f} MB of raw data on disk\n"


def test_a_damaged_control_file_is_a_problem_of_the_report_not_a_log_line(prof: Path, tmp_path: Path) -> None:
    damaged = tmp_path / prof.name
    shutil.copytree(prof, damaged)
    (damaged / "device_0" / "sample.json").write_text('{"aic_metrics": "PipeUtil')  # cut short
    result = run_cli("import", str(damaged), "--output", str(tmp_path / "out"))
    assert result.returncode == 1, result.stderr[-3000:]
    assert not LOG_LINE.search(result.stdout + result.stderr)
    assert f"error: collector: {damaged / 'device_0' / 'sample.json'} is damaged or cut short" in result.stderr


def test_show_on_a_terminal_parses_with_a_bar_then_prints_its_tables(prof: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shown, status = _on_a_terminal("show", str(prof), "--output", str(out), "--top", "3")
    assert status == 0, shown[-3000:]
    assert not LOG_LINE.search(shown)
    text = ANSI.sub("", shown)
    parsed = re.search(r"show: parsed ([\d,]+) records in [\d.]+ s", text)
    assert parsed is not None and re.search(r"show [━╸╺ ]+ +\d+%", text), text[:3000]
    assert parsed.start() < text.index("op_statistic")  # the parse said in one line, then the tables
    assert "completed in" not in text  # the whole run report only when the parse did not complete
    assert (out / "run_report.json").is_file() and _stage_log(out).is_file()


def _live_run(prof_dir: Path, out: Path) -> pexpect.spawn:
    """`PROF_DIR=… pipeline run configs/live.yaml` on a wide pty (the warning is one line there)."""
    env = dict(pipeline_env(), PROF_DIR=str(prof_dir), OUT_DIR=str(out))
    for fixed in ("COLUMNS", "LINES"):  # pytest-xdist's workers set 80x24: the pty's own size is what counts
        env.pop(fixed, None)
    return pexpect.spawn(sys.executable, ["-m", "pipeline", "run", "configs/live.yaml"], env=env, cwd=str(ROOT),
                         dimensions=(40, 400), encoding="utf-8", timeout=10)


def _end(run: pexpect.spawn) -> None:
    """Close the pty; a run still going (a failed expectation) is killed, its stages die with it."""
    if run.isalive():
        run.kill(signal.SIGKILL)
        run.wait()
    run.close()


def test_a_missing_prof_dir_is_said_on_the_terminal_while_the_run_waits(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    run = _live_run(missing, tmp_path / "out")
    warning = re.escape(f"warning: collector: {missing} does not exist: waiting up to ")
    try:
        # The stages take seconds to start on a loaded machine: the clock starts when the live view shows the
        # collector running (or at the warning, should it come first); then 30 s, for a line said after 1 s (a
        # hang guard on a loaded CI machine: on an idle one it comes within 2 s of the stages' start).
        if run.expect([warning, r"collect\s+(?:\S+\s+)?running"], timeout=120) == 1:
            run.expect(warning, timeout=30)
        run.expect(re.escape("for a PROF_… directory there (a wrong path? Ctrl-C, then point PROF_DIR"))
        run.sendintr()
        run.expect(pexpect.EOF, timeout=120)
    finally:
        _end(run)


def test_a_file_as_prof_dir_is_refused_as_a_file(tmp_path: Path) -> None:
    afile = tmp_path / "notes.txt"
    afile.write_text("not a profiling directory\n")
    run = _live_run(afile, tmp_path / "out")
    try:
        run.expect(pexpect.EOF, timeout=120)  # no wait for a directory: the stages stop as soon as they start
    finally:
        _end(run)
    shown = ANSI.sub("", run.before.replace("\r", ""))
    assert run.exitstatus == 2, shown[-3000:]
    assert f"error: collector: {afile} is a file, not a directory" in shown
    assert "holds no PROF_" not in shown and "waiting up to" not in shown


def test_plain_lines_say_each_quarter_once(tmp_path: Path) -> None:
    """The plain display on the figures of a run, view by view (the views as the supervisor publishes them)."""
    from pipeline.progress import LineDisplay

    lines_file = tmp_path / "lines.txt"
    with open(lines_file, "w", encoding="utf-8") as stream:
        display = LineDisplay("import", stream)
        for step in range(0, 21):
            display.update(_view(elapsed=step * 0.5, read_mb=min(80.0, step * 8.0), through=step * 50_000))
        display.update(_view(elapsed=11.0, read_mb=80.0, through=1_000_000, collector_done=True))
        display.update(_view(elapsed=11.5, read_mb=80.0, through=1_000_000, collector_done=True))
    lines = lines_file.read_text().splitlines()
    assert lines[0] == "import: 80.0 MB of raw data on disk"
    assert [line.split()[1] for line in lines[1:4]] == ["25%", "50%", "75%"]
    assert lines[-1] == "import: all 1,000,000 records decoded and aggregated; writing the outputs"
    assert len(lines) == 5


def _view(elapsed: float, read_mb: float, through: int, collector_done: bool = False) -> dict[str, object]:
    """A view of an import of 80 MB holding 1,000,000 records."""
    sent = 1_000_000 if collector_done else int(1_000_000 * read_mb / 80.0)
    collect = {"role": "source", "in": 0, "out": sent, "status": "done" if collector_done else "running",
               "progress": {"streams": 9, "records": sent, "MB_read": read_mb, "MB_on_disk": 80.0}}
    stages = {"collect": collect,
              "decode": {"role": "transform", "in": min(sent, through + 1000), "out": 0, "status": "running",
                         "progress": {}},
              "aggregate": {"role": "transform", "in": min(sent, through), "out": 0, "status": "running",
                            "progress": {}}}
    return {"elapsed_s": elapsed, "state": "running", "stages": stages}
