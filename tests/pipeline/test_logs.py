"""Stage processes share one stderr pipe: every log line must arrive whole."""

from __future__ import annotations

import json
import subprocess
import sys

WRITER = """
import sys
from pipeline.logs import configure_logging
log = configure_logging(sys.argv[1], "run-1")
for batch in range(int(sys.argv[2])):
    log.info("batch written", batch=batch, rows=batch * 7)
    print(f"plain line {batch} from {sys.argv[1]}", file=sys.stderr)
"""


def test_lines_from_concurrent_stages_never_mix() -> None:
    writers, lines_each = 4, 3000
    read_end = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert read_end.stdin is not None
    stages = [subprocess.Popen([sys.executable, "-c", WRITER, f"stage{n}", str(lines_each)], stderr=read_end.stdin)
              for n in range(writers)]
    for stage in stages:
        assert stage.wait(timeout=120) == 0
    output, _ = read_end.communicate(timeout=60)
    json_lines = [line for line in output.splitlines() if line.startswith("{")]
    plain = [line for line in output.splitlines() if not line.startswith("{")]
    records = [json.loads(line) for line in json_lines]  # two records on one line would not parse
    assert len(records) == writers * lines_each
    assert all(line.startswith("plain line ") and line.count("plain") == 1 for line in plain)
    assert len(plain) == writers * lines_each
    for n in range(writers):
        mine = [r for r in records if r["stage"] == f"stage{n}"]
        assert [r["batch"] for r in mine] == list(range(lines_each))
        assert all(r["run_id"] == "run-1" and r["event"] == "batch written" for r in mine)
