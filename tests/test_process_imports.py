"""What each process of an import loads: the modules it uses, not every library its neighbours need (every run
pays each process's start, whatever its size). Checked in fresh interpreters, by their ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.plugins import load_stage_class

ROOT = Path(__file__).resolve().parents[1]
IMPORT_CONFIG = ROOT / "pipeline" / "builtin_configs" / "import.yaml"
HEAVY_FOR_THE_SUPERVISOR = ("polars", "adbc_driver_manager", "adbc_driver_sqlite", "sqlite_utils")

# The config as the supervisor loads it (every stage's class imported and its settings validated), or as
# `pipeline stage ID` does (its own stage only); then the names of the modules the process holds.
LOAD_CONFIG = """
import json, sys
from pipeline.config import load_config
only = sys.argv[2] or None
config = load_config(sys.argv[1], {"stages.collect.path": "."}, only=only)
print(json.dumps(sorted(sys.modules)))
"""


def modules_after(code: str, *args: str) -> set[str]:
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


def packages(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_the_supervisor_validates_every_stage_without_the_sinks_database_libraries() -> None:
    modules = modules_after(LOAD_CONFIG, str(IMPORT_CONFIG), "")
    assert {"stages.collector", "stages.decoder.stage", "stages.aggregator", "stages.sinks.sqlite"} <= modules
    assert not packages(modules) & set(HEAVY_FOR_THE_SUPERVISOR)


def test_the_aggregator_reads_the_decoded_layouts_without_the_decoder() -> None:
    modules = modules_after(LOAD_CONFIG, str(IMPORT_CONFIG), "aggregate")
    assert {"stages.aggregator", "stages.decoder.records", "stages.decoder.host_records"} <= modules
    assert not {"stages.decoder.stage", "stages.decoder.device", "stages.decoder.checks"} & modules


def test_a_stage_process_imports_structlog_without_rich(tmp_path: Path) -> None:
    """`pipeline stage` (here one whose config is missing: it stops after its imports, with one line)."""
    stage = f"""
import json, sys
from pipeline.cli import main
sys.argv = ["pipeline", "stage", "collect", "--config", "{tmp_path / 'missing.yaml'}"]
assert main() == 2
print(json.dumps(sorted(sys.modules)))
"""
    modules = modules_after(stage)
    assert {"structlog", "pipeline.runner"} <= modules
    assert "rich" not in packages(modules)


def test_the_collector_reads_bytes_without_numpy() -> None:
    modules = modules_after(LOAD_CONFIG, str(IMPORT_CONFIG), "collect")
    assert {"stages.collector", "pipeline_board.kinds"} <= modules
    assert "numpy" not in packages(modules)


def test_the_sqlite_sink_writes_through_adbc_without_polars(tmp_path: Path) -> None:
    writes = """
import json, sys
from pathlib import Path
from stages.sinks.sqlite import Writer
db = Writer(Path(sys.argv[1]))
db.execute("CREATE TABLE t (x INTEGER)")
db.execute("INSERT INTO t VALUES (7)")
assert db.query("SELECT x FROM t") == [(7,)]
db.close()
print(json.dumps(sorted(sys.modules)))
"""
    modules = modules_after(writes, str(tmp_path / "t.db"))
    assert "adbc_driver_sqlite.dbapi" in modules
    assert "polars" not in packages(modules)


def test_the_decoder_stage_keeps_its_entry_point_name() -> None:
    import stages.decoder
    from stages.decoder.stage import DecoderStage

    assert load_stage_class("decoder") is DecoderStage
    assert load_stage_class("stages.decoder:DecoderStage") is DecoderStage
    assert stages.decoder.DecoderStage is DecoderStage
    with pytest.raises(AttributeError, match="NoSuchStage"):
        stages.decoder.NoSuchStage  # noqa: B018
