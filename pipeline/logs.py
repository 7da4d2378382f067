"""structlog setup: every line names the stage and the run; JSON off a terminal."""

from __future__ import annotations

import logging
import os
import sys

import structlog


def configure_logging(stage: str, run_id: str, level: str | None = None) -> structlog.stdlib.BoundLogger:
    """Call once at the top of every stage process (spawned processes inherit nothing)."""
    name = (level or os.environ.get("PIPELINE_LOG_LEVEL", "info")).upper()
    numeric = getattr(logging, name, logging.INFO)
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer(colors=False) if sys.stderr.isatty() else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(stage=stage, run_id=run_id, pid=os.getpid())
    logger: structlog.stdlib.BoundLogger = structlog.get_logger()
    return logger
