"""The supervisor keeps what each reporting sink sends (statistics from `live`, findings from `advice`),
and the live view shows the findings in an Advice panel."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import msgpack
from rich.console import Console

from pipeline.config import parse_config
from pipeline.health import StageHealth
from pipeline.supervisor import Supervisor
from pipeline.views import render_view


def _view(stage: str, view: dict[str, object]) -> bytes:
    return msgpack.packb({"type": "view", "stage": stage, "view": view}, use_bin_type=True)


def test_views_of_two_sinks_are_merged_and_rendered(tmp_path: Path) -> None:
    raw = {"stages": {"collect": {"type": "collector", "path": "."},
                      "top": {"type": "live", "inputs": ["collect"]},
                      "advice": {"type": "advice", "inputs": ["collect"]}}}
    supervisor = Supervisor(parse_config(raw, tmp_path / "c.yaml", env={}), live=False)
    try:
        supervisor.procs = {sid: SimpleNamespace(stage_id=sid, health=StageHealth(0.0))  # type: ignore[misc]
                            for sid in ("top", "advice")}
        finding = {"rule": "transdata", "severity": "warning", "title": "26.0 TransData tasks per model execution",
                   "detail": "", "suggestion": "please check and reduce the transData. More text.", "evidence": {}}
        supervisor._on_control(_view("advice", {"advice": [finding]}))
        supervisor._on_control(_view("top", {"ops": [[0, "TransData", "AI_CORE", 26, 1000, 10, 90]], "apis": []}))
        assert supervisor.view["advice"] == [finding] and supervisor.view["ops"][0][1] == "TransData"
        console = Console(width=200, record=True)
        console.print(render_view({"run_id": "r", "state": "running", "elapsed_s": 1.0, "stages": {},
                                   "stats": supervisor.view}))
        text = console.export_text()
        assert "advice" in text and "26.0 TransData tasks per model execution" in text
        assert "please check and reduce the transData." in text and "More text" not in text  # first sentence
    finally:
        supervisor.zctx.term()
