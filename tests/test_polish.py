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
