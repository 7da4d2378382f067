"""Finishing touches a user sees: report.html written without plotly's Python modules, the outputs line laid
out for the terminal, `pipeline show` on a PROF directory whose import lost data, and tx_inbox's socket file
removed at exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipeline_runs import pipeline_env

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
