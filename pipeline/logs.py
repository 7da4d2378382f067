"""structlog setup: every line names the stage and the run; JSON off a terminal."""

from __future__ import annotations

import io
import logging
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: a stage process imports structlog without rich (pipeline.cli)
    import structlog


def whole_lines_on_stderr() -> None:
    """Make every line on stderr one write(2).

    Off a terminal Python's stderr writes through: print() issues the text and its newline as two writes, and
    the stage processes share one pipe, so another process's line can land between them (two JSON records on
    one line). Line buffering sends each line, newline included, in a single write (atomic on a pipe up to
    PIPE_BUF)."""
    stream = sys.stderr
    if isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(line_buffering=True, write_through=False)


def configure_logging(stage: str, run_id: str, level: str | None = None) -> structlog.stdlib.BoundLogger:
    """Call once at the top of every stage process (spawned processes inherit nothing)."""
    import structlog

    name = (level or os.environ.get("PIPELINE_LOG_LEVEL", "info")).upper()
    whole_lines_on_stderr()
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
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),  # record and newline in one write
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(stage=stage, run_id=run_id, pid=os.getpid())
    logger: structlog.stdlib.BoundLogger = structlog.get_logger()
    return logger


def quiet_command_logging() -> None:
    """For a command a person runs in this process (`pipeline simulate`): its own last line says what it did, so
    log lines below a warning are left out (PIPELINE_LOG_LEVEL lowers the bar), and those shown go to stderr."""
    import structlog

    name = os.environ.get("PIPELINE_LOG_LEVEL", "warning").upper()
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, name, logging.WARNING)),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
