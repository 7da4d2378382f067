"""Optional Prometheus text endpoint of a run (``run.metrics_port``): per-stage throughput, lag,
records in flight and rejected counts, read from the supervisor's newest view at scrape time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pipeline.config import PipelineConfig
from pipeline.errors import UserError
from pipeline.views import backlog

PREFIX = "ascend_pipeline"


class ViewCollector:
    """A prometheus_client collector over the latest supervisor snapshot (swapped in whole)."""

    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self.view: dict[str, Any] | None = None

    def update(self, view: dict[str, Any]) -> None:
        self.view = view  # one reference swap: the scrape thread sees an old or a new view, never half of one

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        view = self.view
        if view is None:
            return
        labels = ["run", "stage", "role"]
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {
            "in": CounterMetricFamily(f"{PREFIX}_stage_records_in", "records received by the stage", labels=labels),
            "out": CounterMetricFamily(f"{PREFIX}_stage_records_out", "records sent by the stage", labels=labels),
            "rejected": CounterMetricFamily(f"{PREFIX}_stage_rejected", "records or bytes the stage rejected",
                                            labels=labels),
            "rate_in": GaugeMetricFamily(f"{PREFIX}_stage_rate_in", "records/s received", labels=labels),
            "rate_out": GaugeMetricFamily(f"{PREFIX}_stage_rate_out", "records/s sent", labels=labels),
            "queued": GaugeMetricFamily(f"{PREFIX}_stage_queued_records",
                                        "records its producers sent that the stage has not received yet",
                                        labels=labels),
            "rss": GaugeMetricFamily(f"{PREFIX}_stage_rss_bytes", "resident memory of the stage process",
                                     labels=labels),
            "up": GaugeMetricFamily(f"{PREFIX}_stage_running", "1 while the stage process runs", labels=labels),
            "paused": GaugeMetricFamily(f"{PREFIX}_stage_paused",
                                        "1 while the stage's output disk refuses writes (full, read-only)",
                                        labels=labels),
            "stuck": GaugeMetricFamily(f"{PREFIX}_stage_stuck", "1 while the stage sends no heartbeat",
                                       labels=labels),
        }
        lag = GaugeMetricFamily(f"{PREFIX}_stage_lag_seconds",
                                "now minus the newest record time the stage has joined", labels=labels)
        stages: dict[str, dict[str, Any]] = view.get("stages", {})
        for sid, stage in stages.items():
            key = [str(view.get("run", "")), sid, str(stage.get("role", ""))]
            families["in"].add_metric(key, float(stage.get("in", 0)))
            families["out"].add_metric(key, float(stage.get("out", 0)))
            families["rejected"].add_metric(key, float(stage.get("rejected", 0)))
            families["rate_in"].add_metric(key, float(stage.get("rate_in", 0.0)))
            families["rate_out"].add_metric(key, float(stage.get("rate_out", 0.0)))
            families["queued"].add_metric(key, float(self._queued(sid, stages)))
            families["rss"].add_metric(key, float(stage.get("rss_mb", 0.0)) * 1024 * 1024)
            status = str(stage.get("status", ""))
            ended = status == "done" or status.startswith(("failed", "killed"))
            families["up"].add_metric(key, 0.0 if ended else 1.0)  # also while waiting, paused or stuck
            families["paused"].add_metric(key, 1.0 if status.startswith("paused") else 0.0)
            families["stuck"].add_metric(key, 1.0 if status.startswith("stuck") else 0.0)
            progress = stage.get("progress") or {}
            if "lag_s" in progress:
                lag.add_metric(key, float(progress["lag_s"]))
        yield from families.values()
        yield lag

    def _queued(self, sid: str, stages: dict[str, dict[str, Any]]) -> int:
        spec = self.config.stages.get(sid)
        if spec is None or not spec.inputs:
            return 0
        return backlog(sid, {**stages[sid], "inputs": [f"{p}.{port}" for p, port in spec.inputs]}, stages) or 0


def serve_metrics(config: PipelineConfig) -> ViewCollector | None:
    """Start the endpoint when ``run.metrics_port`` is set; the caller feeds it views."""
    port = config.run.metrics_port
    if port is None:
        return None
    try:
        from prometheus_client import start_http_server
        from prometheus_client.registry import CollectorRegistry
    except ImportError:
        raise UserError("run.metrics_port is set but prometheus-client is not installed",
                        "pip install 'ascend-live-pipeline[metrics]'") from None
    collector = ViewCollector(config)
    registry = CollectorRegistry()
    registry.register(collector)  # type: ignore[arg-type]
    try:
        start_http_server(port, addr=config.run.metrics_host, registry=registry)
    except OSError as exc:
        raise UserError(f"run.metrics_port: cannot listen on {config.run.metrics_host}:{port}: {exc}",
                        "pick a free port") from None
    return collector
