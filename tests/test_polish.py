"""Finishing touches a user sees: report.html written without plotly's Python modules, the outputs line laid
out for the terminal, and `pipeline show` on a PROF directory whose import lost data."""

from __future__ import annotations

import csv
import io
import json
import random
import subprocess
import sys
from pathlib import Path

from pipeline_runs import pipeline_env, run_cli

OP_STATISTIC = ("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
                "0,Conv2D,AI_CORE,4,120.5,20,30.125,40.5,75\n0,MatMul,AI_CORE,2,40,20,20,20,25\n")


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env=pipeline_env())


def test_report_html_embeds_the_packages_plotly_js_without_importing_plotly(tmp_path: Path) -> None:
    summaries = tmp_path / "mindstudio_profiler_output"
    summaries.mkdir()
    (summaries / "op_statistic_20260101000000.csv").write_text(OP_STATISTIC)
    result = _python("import sys; from pathlib import Path; from pipeline.html_report import write_report; "
                     "write_report(Path(sys.argv[1])); print([m for m in sys.modules if m.startswith('plotly')])",
                     str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]"  # no plotly module was imported to write the page
    from plotly.offline import get_plotlyjs

    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert f"<script type=\"text/javascript\">{get_plotlyjs()}</script>" in page  # the package's own bundle
    assert '<script>Plotly.newPlot("chart-operators", [{"type": "bar"' in page


# --- the outputs line ------------------------------------------------------------------------------------------

STAMP = "20260101000000"
SUMMARIES = ("aicpu", "api_statistic", "l2_cache", "msprof", "msprof_tx", "op_statistic", "op_summary", "step_trace",
             "task_time")


def _outputs_folder(tmp_path: Path) -> tuple[Path, list[str]]:
    """A run's output folder as an import leaves it, and its files' names in the order the line gives them."""
    out = tmp_path / "out"
    (out / "mindstudio_profiler_output").mkdir(parents=True)
    database = f"msprof_{STAMP}.db"
    summaries = sorted(f"{name}_{STAMP}.{'json' if name == 'msprof' else 'csv'}" for name in SUMMARIES)
    top_level = ["advice.json", "advice.txt", "report.html", "run_report.json"]
    for name in [database, *top_level, "run.json"]:
        (out / name).write_text("x")
    for name in summaries:
        (out / "mindstudio_profiler_output" / name).write_text("x")
    return out, [database, *summaries, *top_level]


def _listed(lines: list[str]) -> tuple[list[str], int]:
    """The names under the folder's line and the count of those left out (``+N more``)."""
    words = " ".join(line.strip() for line in lines).split(", ")
    more = int(words.pop().removeprefix("+").removesuffix(" more")) if words[-1].endswith(" more") else 0
    return words, more


def test_outputs_line_wraps_between_names_within_the_width(tmp_path: Path) -> None:
    from pipeline.report import OUTPUT_NAME_LINES, outputs_line

    out, names = _outputs_folder(tmp_path)
    for width in (60, 80, 120):
        head, *lines = outputs_line(out, 0, width).split("\n")
        assert head == f"outputs in {out}:"
        assert 1 <= len(lines) <= OUTPUT_NAME_LINES and all(len(line) <= width for line in lines), (width, lines)
        assert all(line.startswith("  ") and not line.startswith("   ") for line in lines)
        listed, more = _listed(lines)
        assert listed == names[:len(listed)] and len(listed) + more == len(names), (width, lines)
    wide = outputs_line(out, 0, 1000)
    assert wide == f"outputs in {out}: {', '.join(names)}"  # one line where it fits


def test_outputs_line_off_a_terminal_is_one_line(tmp_path: Path) -> None:
    from pipeline.report import OUTPUT_NAMES_SHOWN, outputs_line

    out, names = _outputs_folder(tmp_path)
    assert not sys.stdout.isatty()
    line = outputs_line(out, 0)
    more = len(names) - OUTPUT_NAMES_SHOWN
    assert line == f"outputs in {out}: {', '.join(names[:OUTPUT_NAMES_SHOWN])} (+{more} more)"


def test_outputs_line_on_a_terminal_takes_its_width(tmp_path: Path) -> None:
    out, names = _outputs_folder(tmp_path)
    width = 70
    screen = _on_pty("import sys; from pathlib import Path; from pipeline.report import outputs_line; "
                     "print(outputs_line(Path(sys.argv[1]), 0))", [str(out)], columns=width)
    head, *lines = screen.splitlines()
    assert head == f"outputs in {out}:"
    assert lines and all(len(line) <= width for line in lines), screen
    listed, more = _listed(lines)
    assert len(listed) + more == len(names)


def _on_pty(code: str, args: list[str], columns: int, rows: int = 24) -> str:
    """What ``python -c CODE ARGS`` prints on a terminal of ``columns`` × ``rows`` (a real pseudo-terminal)."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {key: value for key, value in pipeline_env().items() if key not in ("COLUMNS", "LINES")}
    with subprocess.Popen([sys.executable, "-c", code, *args], stdin=slave, stdout=slave, stderr=slave,
                          env=env) as process:
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other side closed: the program ended
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(timeout=60) == 0, b"".join(chunks)[-2000:]
    os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")


# --- pipeline show on a PROF directory whose import loses data ------------------------------------------------

def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return [{key: value.strip() for key, value in row.items()} for row in csv.DictReader(handle)]


def test_show_of_a_damaged_prof_directory_shows_its_tables_with_the_note(tmp_path: Path) -> None:
    """A slice of random bytes: the import ends failed, and `show` of the directory still shows what was read,
    saying its figures are incomplete and why (as `show` of that import's folder does)."""
    board = tmp_path / "board"
    made = run_cli("simulate", str(board), "--chip", "cloud", "--iterations", "30", "--rate", "max",
                   "--slice-bytes", "65536")
    assert made.returncode == 0, made.stderr[-3000:]
    prof = Path(json.loads((board / "simulator_truth.json").read_text())["prof_dir"])
    spoilt = prof / "device_0" / "data" / "hwts.data.0.slice_2"
    spoilt.write_bytes(random.Random(9).randbytes(spoilt.stat().st_size))

    shown = run_cli("show", str(prof), "--top", "3")
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr[-3000:]
    errors = [line.removeprefix("error: ") for line in shown.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"collector: {spoilt}: 65,536 of the"), shown.stderr
    assert f"show: parsing {prof} ended failed (1 problem(s), above): its figures are incomplete" in shown.stderr
    out = prof / "pipeline_output"
    assert json.loads((out / "run_report.json").read_text())["state"] == "failed"
    text = "".join(shown.stdout.split())  # the console wraps lines where it likes
    for said in ("these figures are incomplete (1 problem(s)", errors[0], "op_statistic (op_statistic_",
                 "api_statistic (api_statistic_", "advice (on incomplete figures: see the note above)"):
        assert "".join(said.split()) in text, said
    (statistics,) = (out / "mindstudio_profiler_output").glob("op_statistic_*.csv")
    top = max(csv_rows(statistics), key=lambda row: float(row["Total Time(us)"]))
    assert "".join(f"│{top['OP Type']}│{top['Core Type']}│{top['Count']}│".split()) in text  # the file's top row


def test_advice_with_no_finding_on_incomplete_figures_says_they_are_incomplete() -> None:
    from rich.console import Console

    from pipeline.views import advice_table

    def rendered(incomplete: bool) -> str:
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(advice_table([], incomplete=incomplete))
        return console.export_text()

    assert "nothing to point out so far" in rendered(False)
    incomplete = rendered(True)
    assert "nothing to point out so far" not in incomplete
    assert "advice (on incomplete figures: see the note above)" in incomplete
    assert "but the figures are incomplete (see the note above): what is missing was not looked at" in incomplete

