"""Config loading: interpolation, validation with located errors, graph checks, CLI one-liners."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import graph_text, load_config, parse_config
from pipeline.errors import UserError
from pipeline.interpolate import InterpolationError, interpolate_text

ROOT = Path(__file__).resolve().parents[2]
LIVE = ROOT / "configs" / "live.yaml"


def test_interpolation_forms() -> None:
    env = {"A": "1", "EMPTY": ""}
    assert interpolate_text("${A}", env) == "1"
    assert interpolate_text("${MISSING:-x}", env) == "x"
    assert interpolate_text("${EMPTY:-x}", env) == "x"
    assert interpolate_text("${EMPTY-x}", env) == ""
    assert interpolate_text("${A:+on}/${MISSING:+on}", env) == "on/"
    assert interpolate_text("${MISSING:-${A}}", env) == "1"
    assert interpolate_text("$${A}", env) == "${A}"
    with pytest.raises(InterpolationError, match="MISSING"):
        interpolate_text("${MISSING}", env)
    with pytest.raises(InterpolationError, match="say why"):
        interpolate_text("${EMPTY:?say why}", env)
    with pytest.raises(InterpolationError, match="newline"):
        interpolate_text("${A}", {"A": "x\ny: 1"})


def _stages(**stages: dict) -> dict:
    return {"run": {"name": "t", "output": "/tmp/x"}, "stages": stages}


def test_live_config_is_valid_and_prof_dir_disables_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROF_DIR", raising=False)
    config = load_config(LIVE)
    assert config.stages["board"].enabled
    assert set(config.consumers("aggregate", "stats")) == {"summary", "db", "top", "advice"}
    monkeypatch.setenv("PROF_DIR", "/data/PROF_000001")
    config = load_config(LIVE)
    assert not config.stages["board"].enabled
    assert config.stages["collect"].config.path == "/data/PROF_000001"
    assert "collect.out ──▶ decode" in graph_text(config)


def test_unknown_key_is_located() -> None:
    raw = _stages(collect={"type": "collector", "path": "x", "batchsize": 3})
    with pytest.raises(UserError) as info:
        parse_config(raw, Path("c.yaml"), env={})
    assert "stages.collect.batchsize: unknown key" in info.value.line()
    assert "follow" in info.value.line()  # lists what is allowed


def test_unknown_type_and_bad_inputs() -> None:
    with pytest.raises(UserError, match="unknown stage type 'nope'"):
        parse_config(_stages(x={"type": "nope"}), Path("c.yaml"), env={})
    raw = _stages(collect={"type": "collector"}, decode={"type": "decoder", "inputs": ["collect.tasks"]})
    with pytest.raises(UserError, match="has no output 'tasks'"):
        parse_config(raw, Path("c.yaml"), env={})
    raw = _stages(decode={"type": "decoder", "inputs": ["ghost"]})
    with pytest.raises(UserError, match="unknown stage 'ghost'"):
        parse_config(raw, Path("c.yaml"), env={})


def test_cycle_rejected() -> None:
    raw = _stages(a={"type": "decoder", "inputs": ["b"]}, b={"type": "decoder", "inputs": ["a"]})
    with pytest.raises(UserError, match="cycle"):
        parse_config(raw, Path("c.yaml"), env={})


def test_module_class_type() -> None:
    raw = _stages(collect={"type": "stages.collector:CollectorStage"})
    assert parse_config(raw, Path("c.yaml"), env={}).stages["collect"].cls.__name__ == "CollectorStage"


def test_a_stage_process_imports_and_validates_only_its_own_stage(tmp_path: Path) -> None:
    """`pipeline stage ID` loads the config for one stage: the others' classes are not imported (the live view's
    sink starts without numpy) and their settings are not validated (the supervisor did that); its own still are."""
    probe = """
import sys
from pipeline.config import load_config
config = load_config(sys.argv[1], only=sys.argv[2])
spec = config.stages[sys.argv[2]]
print(spec.cls.__name__, type(spec.config).__name__, sorted(config.consumers("aggregate", "stats")),
      "numpy" in sys.modules, "stages.aggregator" in sys.modules, "stages.collector" in sys.modules)
"""
    def run(stage: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", probe, str(LIVE), stage], capture_output=True, text=True,
                              cwd=ROOT, timeout=60)

    top = run("top")
    assert top.returncode == 0, top.stderr
    assert top.stdout.split() == ["LiveSink", "Config", "['advice',", "'db',", "'summary',", "'top']",
                                  "False", "False", "False"]
    aggregate = run("aggregate")
    assert aggregate.stdout.split()[-3:] == ["True", "True", "False"]  # its own modules only
    broken = _stages(collect={"type": "collector", "colour": "red"},
                     decode={"type": "decoder", "inputs": ["collect"]})
    assert parse_config(broken, Path("c.yaml"), env={}, only="decode").stages["decode"].config is not None
    with pytest.raises(UserError, match="stages.collect.colour: unknown key"):
        parse_config(broken, Path("c.yaml"), env={})  # the whole file, as `pipeline run` and `validate` read it
    with pytest.raises(UserError, match="stages.collect.colour: unknown key"):
        parse_config(broken, Path("c.yaml"), env={}, only="collect")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("run: [unclosed\n", "invalid YAML"),
        ("stages:\n  x: {type: nope}\n", "unknown stage type 'nope'"),
        ("stages:\n  c: {type: collector, colour: red}\n", "stages.c.colour: unknown key"),
        ("run:\n  name: a\n  name: b\nstages:\n  c: {type: collector}\n",
         ":3:3: invalid YAML: key 'name' given twice in one mapping"),
        ("run: {name: 'live run!'}\nstages:\n  c: {type: collector}\n",
         "run.name: string should match pattern '^[A-Za-z0-9_.-]{1,40}$'"),
        ("", "a pipeline config is a mapping with 'run' and 'stages' (configs/live.yaml is one to start from"),
    ],
)
def test_cli_validate_one_line_no_traceback(tmp_path: Path, text: str, expected: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    result = subprocess.run([sys.executable, "-m", "pipeline", "validate", str(config)], capture_output=True, text=True)
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_merge_key_may_be_overridden_but_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    shared = "run: {name: m}\nstages:\n  c: &base {type: collector, follow: false, path: a}\n"
    merged = tmp_path / "merged.yaml"
    merged.write_text(shared + "  c2:\n    <<: *base\n    path: b\n")
    config = load_config(merged)
    assert config.stages["c2"].config.path == "b" and config.stages["c2"].config.follow is False
    twice = tmp_path / "twice.yaml"
    twice.write_text(shared + "  c2:\n    <<: *base\n    path: b\n    path: c\n")
    with pytest.raises(UserError, match=r"twice.yaml:7:5: invalid YAML: key 'path' given twice in one mapping"):
        load_config(twice)
