"""run.metrics_port: a Prometheus text endpoint with per-stage throughput, queue, lag and rejected counts."""

from __future__ import annotations

import socket
import time
import urllib.request
from pathlib import Path

from pipeline_runs import read_report, stage_config, start_run


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _samples(text: str) -> dict[tuple[str, str], float]:
    """(metric name, stage) → value, from the text exposition format."""
    found = {}
    for line in text.splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        name, rest = line.split("{", 1)
        labels, value = rest.rsplit("} ", 1)
        stage = next(part.split("=", 1)[1].strip('"') for part in labels.split(",") if part.startswith("stage="))
        found[name, stage] = float(value)
    return found


def test_metrics_endpoint_serves_stage_figures_during_the_run(tmp_path: Path) -> None:
    port = _free_port()
    out = tmp_path / "out"
    text = stage_config(out, iterations=300).replace("progress_s: 1}", f"progress_s: 1, metrics_port: {port}}}")
    config = tmp_path / "p.yaml"
    config.write_text(text)
    process = start_run(config)
    scraped: list[dict[tuple[str, str], float]] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                    samples = _samples(response.read().decode())
            except OSError:
                samples = {}
            if samples.get(("ascend_pipeline_stage_records_in_total", "aggregate"), 0) > 0:
                scraped.append(samples)
                if len(scraped) >= 2:
                    break
            time.sleep(0.5)
        process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert len(scraped) == 2, "never saw the aggregator receive records on the endpoint"
    first, second = scraped
    stages = {stage for _, stage in first}
    assert {"collect", "decode", "aggregate", "summary", "db"} <= stages
    for stage in ("decode", "aggregate"):
        received = "ascend_pipeline_stage_records_in_total", stage
        assert second[received] >= first[received] > 0 or stage == "decode"
        assert first["ascend_pipeline_stage_running", stage] == 1.0
        assert first["ascend_pipeline_stage_queued_records", stage] >= 0
    assert ("ascend_pipeline_stage_lag_seconds", "aggregate") in first
    final = read_report(out)["stages"]["aggregate"]
    assert second["ascend_pipeline_stage_records_in_total", "aggregate"] <= final["in"]
