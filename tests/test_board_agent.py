"""The board agent (pipeline_board): same file kinds and framing as the collector, no numpy, Python 3.7,
and a remote run over CURVE on loopback that writes what a local run writes."""

from __future__ import annotations

import ast
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import framing_reference
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeline_runs import ROOT, pipeline_env, read_report, run_cli

from pipeline_board import framing as board_framing
from pipeline_board import kinds as board_kinds
from stages import framing
from stages.formats import files, host_extra, legacy

BOARD_FILES = sorted((ROOT / "pipeline_board").glob("*.py"))
PLATFORMS = (0, 1, 2, 5, 7, 8, 11, 15, 16, 99)


def _name_corpus() -> list[str]:
    """Slice base names of every family the collector knows, plus near misses."""
    names = [f"aging.{key}" for key in (*files.HOST_KINDS, *host_extra.FILE_TAGS)]
    names += [f"unaging.{key}" for key in files.HOST_KINDS] + ["aging.compact.unknown", "other.api_event.data"]
    device = ["hwts.data", "aicore.data", "ts_track.data", "stars_soc.data", "ffts_profile.data", "aicpu.data",
              "DATA_PREPROCESS.AICPU", "DATA_PREPROCESS.dev.AICPU", "l2_cache.data", "lpmFreqConv.data",
              "hwts.log.data.45", "hwts.log.data.45.dev.profiler_default_tag",
              "aicore.data.45.dev.profiler_default_tag",
              "ts_track.data.45", "training_trace.45.dev.profiler_default_tag", "AclModule.acl_model",
              "AclModule.acl_op", "AclModule.hash_dic", "Framework.hash_dic", "Framework.task_desc_info",
              "Framework.host.task_desc_info", "Framework.tensor_data_info", "Framework.step_info",
              "Framework.id_map_info", "Framework.model_load_info_1", "Framework.fusion_op_info_2",
              "Framework.model_time_info_1_0", "Framework.dynamic_op_execute", "Runtime.task_track", "runtime.api",
              "Runtime.runtime.data", "something.else", "x"]
    return names + [f"{base}.{dev}" for base in device for dev in (0, 7, 70000)]


def test_agent_kinds_agree_with_the_collectors_for_every_name_and_platform() -> None:
    """The collector takes the name rules from the agent: what must agree is each kind's framing, sizes, magic."""
    for base in _name_corpus():
        assert board_kinds.host_stream_kind(base) == _as_tuple(files.host_stream_kind(base)), base
        for platform in PLATFORMS:
            ours, theirs = board_kinds.device_stream_kind(base, platform), files.device_stream_kind(base, platform)
            assert (ours and (tuple(ours[0]), ours[1])) == (theirs and (_as_tuple(theirs[0]), theirs[1])), \
                (base, platform)


def _as_tuple(kind: files.StreamKind | None) -> tuple[object, ...] | None:
    if kind is None:
        return None
    return (kind.name, kind.framing, kind.record_size, kind.magic, kind.magic_offset, kind.whole_records_per_slice)


def _all_kinds() -> list[files.StreamKind]:
    found = {k.name: k for k in (*files.HOST_KINDS.values(), *host_extra.FILE_TAGS.values(), *legacy.HOST_KINDS,
                                 *files.DEVICE_EXTRA_KINDS.values(), files.HWTS, files.AICORE, files.TS_TRACK,
                                 files.MINI_TS_TRACK, files.MINI_AICORE, files.STARS_SOC, files.STARS_SOC_V6,
                                 files.FFTS_PROFILE)}
    return [found[name] for name in sorted(found)]


def _records_with_noise(kind: files.StreamKind) -> st.SearchStrategy[bytes]:
    """Whole records (magic in place), garbage runs and cut tails, so every branch of a framer is taken."""
    if kind.framing == "tlv":
        record = st.sampled_from([bytes([mode, tag, size & 0xFF, size >> 8]) + b"\x01" * (size - 4)
                                  for tag, size in board_kinds.MINI_TLV_TAG_SIZES.items() for mode in (0, 1, 2)])
    elif kind.framing in ("text", "nul_text"):
        record = st.sampled_from([b"a:b\n", b"x\0", b"\n\n", b"line\0" + kind.magic, b"ZZ"])
    else:
        size = kind.record_size
        record = st.binary(min_size=size, max_size=size).map(
            lambda body: body[:kind.magic_offset] + kind.magic + body[kind.magic_offset + len(kind.magic):])
    return st.lists(st.one_of(record, record, st.binary(max_size=40)), max_size=12).map(b"".join)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), final=st.booleans())
def test_shared_framing_equals_a_record_by_record_reference(data: st.DataObject, final: bool) -> None:
    """The framer the agent and the collector share (column-wise, stride slices) against a plain one, on every
    fixed and TLV kind, each given as the collector's kind and as the agent's."""
    kind = data.draw(st.sampled_from([k for k in _all_kinds() if k.framing in ("fixed", "tlv")]))
    buf = data.draw(_records_with_noise(kind))
    expected = framing_reference.frame(kind, buf, final)
    for ours in (framing.frame(kind, buf, final),
                 board_framing.frame(board_kinds.StreamKind(*_as_tuple(kind)), buf, final)):  # type: ignore[misc]
        assert (ours.records, ours.count, ours.consumed, ours.garbage) == \
               (expected.records, expected.count, expected.consumed, expected.garbage)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), final=st.booleans())
def test_tlv_framing_equals_a_record_by_record_reference(data: st.DataObject, final: bool) -> None:
    buf = data.draw(_records_with_noise(files.MINI_AICORE))
    expected = framing_reference.frame_tlv(buf, final)
    ours = board_framing.frame(board_kinds.MINI_AICORE, buf, final)
    assert (ours.records, ours.count, ours.consumed, ours.garbage) == \
           (expected.records, expected.count, expected.consumed, expected.garbage)


def _tlv_record(tag: int, mode: int) -> bytes:
    size = board_kinds.MINI_TLV_TAG_SIZES.get(tag, 32)
    return bytes([mode, tag, size & 0xFF, size >> 8]) + bytes((tag + i) & 0xFF for i in range(size - 4))


_TLV_RUN = st.tuples(st.sampled_from([3, 4, 10, 7]), st.sampled_from([0, 1, 1, 2]), st.integers(1, 300))


@settings(max_examples=80, deadline=None)
@given(runs=st.lists(st.one_of(_TLV_RUN, st.binary(min_size=1, max_size=40)), max_size=8),
       cut=st.integers(0, 200), final=st.booleans())
def test_tlv_framing_equals_a_record_by_record_reference_on_long_runs_of_one_tag(
        runs: list[tuple[int, int, int] | bytes], cut: int, final: bool) -> None:
    """Long runs of one tag (the agent measures them column-wise), broken by other tags, bad modes, unknown tags,
    garbage and a cut tail."""
    buf = b"".join(run if isinstance(run, bytes) else _tlv_record(run[0], run[1]) * run[2] for run in runs)
    buf = buf[:max(0, len(buf) - cut)]
    expected = framing_reference.frame_tlv(buf, final)
    ours = board_framing.frame(board_kinds.MINI_TS_TRACK, buf, final)
    assert (ours.records, ours.count, ours.consumed, ours.garbage) == \
           (expected.records, expected.count, expected.consumed, expected.garbage)


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.name)
def test_agent_is_python_37_syntax(path: Path) -> None:
    ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 7))


_BLOCKED = textwrap.dedent("""
    import sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("numpy", "pydantic", "structlog", "yaml", "rich", "pipeline", "stages"):
                raise ImportError("blocked on the board: " + name)
            return None
    for name in list(sys.modules):
        if name.split(".")[0] in ("numpy", "pydantic", "structlog"):
            del sys.modules[name]
    sys.meta_path.insert(0, Block())
    import runpy
    sys.argv = ["agent"] + sys.argv[1:]
    runpy.run_module("pipeline_board.agent", run_name="__main__")
""")


def _simulated_prof(tmp_path: Path, iterations: int) -> tuple[Path, dict[str, object]]:
    result = run_cli("simulate", str(tmp_path / "board"), "--iterations", str(iterations), "--rate", "max",
                     "--seed", "5", "--slice-bytes", "8192", cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    truth: dict[str, object] = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    return Path(str(truth["prof_dir"])), truth


def _pull_all(endpoint: str, agent: subprocess.Popen[str]) -> tuple[int, int, dict[str, int]]:
    """Records, messages and the end-of-stream totals the agent sent (read with the pipeline's own decoder)."""
    import zmq

    from pipeline import wire

    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(endpoint)
    records = messages = 0
    try:
        while True:
            assert pull.poll(30_000), "the agent sent nothing for 30 s"
            message = wire.decode(pull.recv_multipart())
            if message.kind == wire.KIND_EOS:
                return records, messages, {"batches": message.sent_batches, "records": message.sent_records}
            assert message.producer == "collect" and message.batch is not None
            records += message.batch.count
            messages += 1
    finally:
        pull.close(0)
        ctx.term()
        agent.wait(30)


def test_agent_runs_with_numpy_pydantic_and_the_pipeline_blocked(tmp_path: Path) -> None:
    prof, truth = _simulated_prof(tmp_path, iterations=20)
    endpoint = f"ipc://{tmp_path}/agent.ipc"
    agent = subprocess.Popen([sys.executable, "-c", _BLOCKED, str(prof), "--once", "--connect", endpoint],
                             cwd=ROOT, env=pipeline_env(), stderr=subprocess.PIPE, text=True)
    records, messages, eos = _pull_all(endpoint, agent)
    stderr = agent.stderr.read() if agent.stderr else ""
    assert agent.returncode == 0, stderr
    assert records == truth["records_total"] == eos["records"]
    assert messages == eos["batches"]
    assert "rejected: none" in stderr


def _board_python() -> str:
    """An old interpreter with pyzmq and msgpack ($BOARD_PYTHON; .ci/run makes one from CPython 3.7)."""
    found = os.environ.get("BOARD_PYTHON") or "/tmp/py37-board/bin/python"
    if not Path(found).is_file():
        pytest.skip(f"no Python 3.7 with pyzmq and msgpack at {found} (set BOARD_PYTHON; .ci/run builds one)")
    return found


def test_agent_runs_on_python_37(tmp_path: Path) -> None:
    python = _board_python()
    version = subprocess.run([python, "-c", "import sys, zmq, msgpack; print(sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout
    assert version.strip() == "(3, 7)"
    prof, truth = _simulated_prof(tmp_path, iterations=20)
    endpoint = f"ipc://{tmp_path}/agent.ipc"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)}  # pipeline_board only: no site-packages of ours
    agent = subprocess.Popen([python, "-m", "pipeline_board.agent", str(prof), "--once", "--connect", endpoint],
                             cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    records, _, eos = _pull_all(endpoint, agent)
    assert agent.returncode == 0, agent.stderr.read() if agent.stderr else ""
    assert records == truth["records_total"] == eos["records"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def remote_config(out: Path, keys: Path, port: int) -> str:
    return f"""
run:
  name: rb{os.getpid()}
  output: "{out}"
  progress_s: 1
  curve: {{secret_key: "{keys}/workstation.key_secret", allowed_clients: "{keys}/allowed"}}
stages:
  collect: {{type: "stages.board_agent:BoardAgentStage", board: loopback}}
  decode: {{type: decoder, inputs: [collect], endpoint: "tcp://127.0.0.1:{port}"}}
  aggregate: {{type: aggregator, inputs: [decode]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], format: csv}}
  timeline: {{type: timeline, inputs: [aggregate.tasks]}}
"""


def make_keys(folder: Path) -> None:
    for name in ("workstation", "board"):
        assert run_cli("keys", "generate", str(folder), "--name", name, cwd=ROOT).returncode == 0
    (folder / "allowed").mkdir()
    (folder / "allowed" / "board.key").write_bytes((folder / "board.key").read_bytes())


def _outputs(folder: Path) -> dict[str, list[str]]:
    found = {}
    for path in sorted((folder / "mindstudio_profiler_output").glob("*_[0-9]*.csv")):
        found[path.name.rsplit("_", 1)[0]] = path.read_text().splitlines()
    return found


@pytest.mark.slow
def test_remote_run_over_curve_on_loopback_equals_a_local_run(tmp_path: Path) -> None:
    prof, truth = _simulated_prof(tmp_path, iterations=60)
    keys = tmp_path / "keys"
    make_keys(keys)
    port = _free_port()
    config = tmp_path / "remote.yaml"
    out = tmp_path / "remote"
    config.write_text(remote_config(out, keys, port))
    workstation = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off"],
                                   cwd=ROOT, env=pipeline_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
    agent = subprocess.run([sys.executable, "-m", "pipeline_board.agent", str(prof), "--connect",
                            f"tcp://127.0.0.1:{port}", "--secret-key", str(keys / "board.key_secret"),
                            "--server-key", str(keys / "workstation.key")],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert agent.returncode == 0, agent.stderr
    log, _ = workstation.communicate(timeout=120)
    assert workstation.returncode == 0, log[-3000:]
    report = read_report(out)
    decoder = report["stages"]["decode"]
    assert all(row["ok"] for row in decoder["reconcile"]), decoder["reconcile"]
    assert decoder["accounting"]["records_in"] == truth["records_total"]

    local = tmp_path / "local"
    result = run_cli("import", str(prof), "--output", str(local), cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    remote_files, local_files = _outputs(out), _outputs(local)
    assert {"op_statistic", "op_summary", "api_statistic", "task_time"} <= set(remote_files)
    for module, lines in remote_files.items():
        assert lines == local_files[module], module


@pytest.mark.slow
def test_agent_without_the_workstations_allow_listed_key_is_refused(tmp_path: Path) -> None:
    prof, _ = _simulated_prof(tmp_path, iterations=5)
    keys = tmp_path / "keys"
    make_keys(keys)
    assert run_cli("keys", "generate", str(keys), "--name", "stranger", cwd=ROOT).returncode == 0
    import zmq

    from pipeline.security import CurveKeys, serve

    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    serve(ctx, pull, CurveKeys.load(keys / "workstation.key_secret", None, keys / "allowed"))
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    agent = subprocess.Popen([sys.executable, "-m", "pipeline_board.agent", str(prof), "--once", "--connect",
                              f"tcp://127.0.0.1:{port}", "--secret-key", str(keys / "stranger.key_secret"),
                              "--server-key", str(keys / "workstation.key")], cwd=ROOT, env=pipeline_env(),
                             stderr=subprocess.PIPE, text=True)
    try:
        assert pull.poll(3000) == 0, "a client outside the allow-list got a message through"
    finally:
        agent.terminate()  # it gives up on the send after agent.STOP_GRACE_S
        assert agent.wait(30) == 2
        assert "stopped while the workstation was not taking data" in (agent.stderr.read() if agent.stderr else "")
        pull.close(0)
        from pipeline.security import stop_authenticators

        stop_authenticators()
        ctx.term()


def test_agent_refuses_plain_tcp_and_missing_keys_in_one_line(tmp_path: Path) -> None:
    for extra in ([], ["--secret-key", str(tmp_path / "nope.key_secret"), "--server-key", "x"]):
        result = subprocess.run([sys.executable, "-m", "pipeline_board.agent", str(tmp_path), "--connect",
                                 "tcp://127.0.0.1:9", *extra], cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("agent: error: "), result.stderr
