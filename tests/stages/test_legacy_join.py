"""The legacy layout end to end in process: a CANN 5/6-style directory, its JOB… form
and its "infer" file names give the simulator's truth, and the same task rows as the current layout."""

from __future__ import annotations

import json
import shutil
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chain import run_chain

from pipeline.stage import Batch
from stages.aggregator.legacy import LegacyIndex, describe
from stages.decoder import host_records
from stages.schema import SymbolTable, unpack_rows
from stages.simulator.run import simulate

START_NS = 1_700_000_000_123_456_789
JOB = "JOBAIFGJEJFEDCBAEADIFJAAAAAAAAAA"
LAG = 1_000  # data time GE's task stream must pass a track by before "not an op GE describes"


def _simulate(out: Path, chip: str, layout: str, **kw: Any) -> tuple[Path, dict[str, Any]]:
    prof = simulate(out, chip=chip, iterations=kw.pop("iterations", 4), rate="max", seed=kw.pop("seed", 4),
                    slice_bytes=kw.pop("slice_bytes", 16_384), start_time_ns=START_NS, layout=layout, **kw)
    return prof, json.loads((out / "simulator_truth.json").read_text())


def _final(batches: list[Batch], kind: str) -> dict[tuple[str, str], tuple[int, int]]:
    final = [b for b in batches if b.kind == kind and b.meta.get("final")]
    assert len(final) == 1
    return {(row[0], row[1]) if kind == "api_statistic" else (row[1], row[2]):
            (row[2], row[3]) if kind == "api_statistic" else (row[3], row[4]) for row in unpack_rows(final[0])}


def _task_rows(batches: list[Batch]) -> list[tuple[Any, ...]]:
    """Every task column but the connection id (the legacy reporter has no Node API to take it from)."""
    symbols = SymbolTable()
    rows = []
    for batch in batches:
        symbols.learn(batch.meta.get("symbols", []))
        if batch.kind == "task":
            for r in unpack_rows(batch):
                texts = tuple(symbols[r[i]] for i in (8, 9, 10, 11, 16, 17, 18, 19, 20, 21))
                rows.append((*r[:8], *texts, r[12], r[13], r[15], tuple(r[22])))
    return rows


def _check_truth(batches: list[Batch], figures: dict[str, Any], truth: dict[str, Any]) -> None:
    assert _final(batches, "op_statistic") == {(t["op_type"], t["core_type"]): (t["count"], t["total_ns"])
                                               for t in truth["op_statistic"]}
    expected_apis = {(t["level"], t["api_name"]): (t["count"], t["total_ns"]) for t in truth["api_statistic"]}
    del expected_apis[("model", "ModelExecute")]  # an event pair (step_info here), not an API call
    assert _final(batches, "api_statistic") == expected_apis
    assert figures["rejected"] == {}
    assert figures["collector"]["records_collected"] == truth["records_total"]
    assert figures["decoder"]["decoded"] == truth["records_total"]


@pytest.mark.parametrize("chip", ["mini", "cloud"])
def test_legacy_layout_matches_truth_and_the_current_layout(tmp_path: Path, chip: str) -> None:
    prof, truth = _simulate(tmp_path / "legacy", chip, "legacy")
    assert not (prof / "host").exists()
    names = {p.name.rsplit(".slice_", 1)[0] for p in (prof / "device_0" / "data").iterdir()}
    assert {"AclModule.acl_model.0", "AclModule.acl_rts.0", "AclModule.acl_others.0", "Framework.task_desc_info.0",
            "Framework.tensor_data_info.0", "Framework.step_info.0", "Framework.hash_dic.0",
            "Framework.id_map_info.0", "Runtime.task_track.0", "Runtime.api.0"} <= names
    assert ("node", "launch") not in {(t["level"], t["api_name"]) for t in truth["api_statistic"]}
    batches, figures = run_chain(prof, tmp_path / "out")
    _check_truth(batches, figures, truth)
    expected_unused = {"legacy Framework.id_map_info records (graph ↔ model ids)": 1}
    if chip == "cloud":  # the 910 also writes lpmFreqConv.data, which msprof applies on 910B-class chips only
        expected_unused["AI Core frequency change records (msprof applies them on 910B-class chips only)"] = 1
    assert figures["aggregator"]["unused"] == expected_unused
    current, _ = _simulate(tmp_path / "current", chip, "current")
    current_batches, current_figures = run_chain(current, tmp_path / "out_current")
    legacy_rows = _task_rows(batches)
    assert legacy_rows == _task_rows(current_batches)  # names, types, model, iteration, shapes, PMU: all alike
    assert {row[8] for row in legacy_rows} >= {"conv2d_0/Conv2D", "conv2d_0/BatchNorm/BNInferenceD"}  # inline, hashed
    assert current_figures["aggregator"]["unused"]["memcpy_info records (memcpy sizes and directions)"] == 8
    assert current_figures["aggregator"]["unused"]["graph_id_map records (graph ↔ model ids)"] == 1


def test_legacy_flips_give_batch_ids(tmp_path: Path) -> None:
    prof, truth = _simulate(tmp_path, "cloud", "legacy", iterations=6, first_task_id=65_500)
    assert truth["task_flips"]
    batches, figures = run_chain(prof, tmp_path / "out")
    _check_truth(batches, figures, truth)
    assert {row[5] for row in _task_rows(batches)} == {0, 1}


def _as_job(prof: Path, job: Path) -> None:
    """The CANN 5 form of a device folder: control files and data/ directly in JOB…/."""
    shutil.copytree(prof / "device_0", job)


def test_job_directory_and_infer_names(tmp_path: Path) -> None:
    prof, truth = _simulate(tmp_path / "board", "cloud", "legacy", slice_bytes=4096)
    expected = _task_rows(run_chain(prof, tmp_path / "out")[0])
    job = tmp_path / "jobs" / JOB
    _as_job(prof, job)
    batches, figures = run_chain(tmp_path / "jobs", tmp_path / "out_job")  # found inside its parent folder
    _check_truth(batches, figures, truth)
    assert _task_rows(batches) == expected
    # "infer" names: the slice index after a plain dot (AclModule.acl_model.0.3, hwts.log.data.45.0.3 …)
    infer = tmp_path / "infer" / JOB
    _as_job(prof, infer)
    renamed = 0
    for path in sorted((infer / "data").iterdir()):
        base, sep, index = path.name.partition(".slice_")
        if path.name.endswith(".done") or not sep:
            continue
        if base.startswith(("aicpu.data", "l2_cache.data", "lpmFreqConv.data")):
            continue  # newer device files, which never had "infer" names: they keep .slice_N
        target = base.replace("aicore.data.0", "aicore.data.46.0").replace("ts_track.data.0", "ts_track.data.45.0")
        target = target.replace("hwts.data.0", "hwts.log.data.45.0")
        path.rename(path.with_name(f"{target}.{index}"))
        Path(f"{path}.done").rename(infer / "data" / f"{target}.{index}.done")
        renamed += 1
    assert renamed > 10 and (infer / "data" / "Framework.task_desc_info.0.1").exists()
    assert (infer / "data" / "hwts.log.data.45.0.1").exists()
    batches, figures = run_chain(infer, tmp_path / "out_infer")
    _check_truth(batches, figures, truth)
    assert _task_rows(batches) == expected


def _track(ts: int, task: int = 5, type_name: bytes = b"KERNEL_AICORE") -> Any:
    track = np.zeros(1, host_records.RT_TRACK)
    track["ts_ns"], track["stream_id"], track["task_id"], track["task_type"] = ts, 2, task, type_name
    return track[0]


def _desc(ts: int, name: bytes, task: int = 5, iteration: int = 1) -> np.ndarray:
    desc = np.zeros(1, host_records.GE_TASK)
    desc["ts_ns"], desc["stream_id"], desc["task_id"], desc["iteration"] = ts, 2, task, iteration
    desc["name_inline"], desc["type_inline"], desc["op_name_text"], desc["op_type_text"] = 1, 1, name, b"Relu"
    return desc


def test_a_track_takes_the_description_nearest_in_time() -> None:
    index = LegacyIndex()
    index.add_tasks(_desc(1_000, b"old"))  # an earlier use of the same task id
    track = _track(50_000)
    assert index.context(track, {}, False, LAG) is None  # GE has not passed the track: a nearer one may come
    index.add_tasks(_desc(50_300, b"new", iteration=2))  # GE reports just after the runtime launched
    assert index.context(track, {}, False, LAG) is None  # no tensor record of its model yet: they may still come
    index.add_tensors(_tensor(iteration=3, task=6))  # GE's tensor stream has passed iteration 2 (at another task)
    desc, tensor, cut_short = index.context(track, {}, False, LAG)  # type: ignore[misc]
    assert desc["op_name_text"] == b"new" and tensor is None and not cut_short
    assert index.tasks == {}  # taken, and the older use of the key with it
    assert index.context(track, {}, False, LAG) is None  # nothing left at the key: wait …
    memcpy = _track(60_000, type_name=b"MEMCPY_ASYNC")
    assert index.context(memcpy, {}, True, LAG) == (None, None, True)  # … or give up (counted by the aggregator)
    index.add_tasks(_desc(60_000 + LAG, b"later", task=7))  # … or GE's stream passes it by LAG: not GE's op
    assert index.context(memcpy, {}, False, LAG) == (None, None, False)
    described = describe(memcpy, None, {})
    assert described is not None and described["op_name"] == described["task_type"] == "MEMCPY_ASYNC"
    assert describe(_track(1, type_name=b"FLIP_TASK"), None, {}) is None


def _tensor(iteration: int, task: int = 5) -> np.ndarray:
    tensor = np.zeros(1, host_records.GE_TENSOR)
    tensor["stream_id"], tensor["task_id"], tensor["iteration"] = 2, task, iteration
    return tensor


def test_hashed_names_and_tensors_are_waited_for() -> None:
    index = LegacyIndex()
    desc = _desc(2_000, b"")
    desc["name_inline"], desc["op_name"] = 0, 99
    index.add_tasks(desc)
    tensor = _tensor(iteration=0)  # an earlier iteration's
    index.add_tensors(tensor)
    track = _track(1_700)
    assert index.context(track, {}, False, LAG) is None  # name 99 not in hash_dic yet
    assert index.context(track, {99: "conv/Conv2D"}, False, LAG) is None  # this iteration's tensors still due
    tensor = tensor.copy()  # a new record (the index keeps views of what it was given)
    tensor["iteration"] = 1
    index.add_tensors(tensor)
    found, shapes, _ = index.context(track, {99: "conv/Conv2D"}, False, LAG)  # type: ignore[misc]
    assert shapes is not None and [int(record["iteration"]) for record in shapes] == [1]  # not the earlier one
    described = describe(track, found, {99: "conv/Conv2D"})
    assert described is not None and (described["op_name"], described["op_type"]) == ("conv/Conv2D", "Relu")
    assert index.unused() == {}


def test_legacy_records_split_across_slices(tmp_path: Path) -> None:
    """Legacy host files are written by the device channel's collector: a record may straddle two slices."""
    prof, truth = _simulate(tmp_path / "board", "mini", "legacy")
    expected = _task_rows(run_chain(prof, tmp_path / "out")[0])
    job = tmp_path / JOB
    _as_job(prof, job)
    data = job / "data"
    for base in ("Runtime.task_track.0", "Framework.task_desc_info.0", "Framework.tensor_data_info.0",
                 "AclModule.acl_model.0", "Runtime.api.0"):
        slices = sorted(data.glob(f"{base}.slice_*[0-9]"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
        whole = b"".join(p.read_bytes() for p in slices)
        for path in slices:
            path.unlink()
            Path(f"{path}.done").unlink()
        for k, first in enumerate(range(0, len(whole), 1000)):  # 1000 B: no record size divides it
            (data / f"{base}.slice_{k}").write_bytes(whole[first:first + 1000])
    batches, figures = run_chain(job, tmp_path / "out_split")
    _check_truth(batches, figures, truth)
    assert _task_rows(batches) == expected


# msprof's own format strings (StructFmt ACL_FMT, RTS_TRACK_FMT, RUNTIME_API_FMT, GE_STEP_FMT, GE_TENSOR_FMT,
# GE_SESSION_FMT; GeTaskBean's per-name-form formats): an independent reading of the simulator's bytes.
MSPROF_FMT = {"AclModule.acl_model.0": "=HHIQQII64s4Q", "AclModule.acl_rts.0": "=HHIQQII64s4Q",
              "AclModule.acl_others.0": "=HHIQQII64s4Q", "Runtime.task_track.0": "=HHIQ32sHHHHQ",
              "Runtime.api.0": "=2HI3Q64s3I20HH106B", "Framework.step_info.0": "=HHIIHHQQIB27B",
              "Framework.tensor_data_info.0": "=HHIQIHHI55IQ", "Framework.id_map_info.0": "=HHIIIQH6B"}
GE_TASK_TEXT_NAME = "=HHI8B120s8B56sQQ4IHHII12B"  # op name inline, op type inline
GE_TASK_HASH_NAME = "=HHI8BQ112B8B56sQQ4IHHII12B"  # op name hashed, op type inline


def test_legacy_bytes_read_with_msprofs_formats(tmp_path: Path) -> None:
    prof, truth = _simulate(tmp_path, "cloud", "legacy", iterations=3)
    data = prof / "device_0" / "data"

    def stream(base: str) -> bytes:
        slices = sorted(data.glob(f"{base}.slice_*[0-9]"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
        return b"".join(p.read_bytes() for p in slices)

    rows = {base: list(struct.iter_unpack(fmt, stream(base))) for base, fmt in MSPROF_FMT.items()}
    assert all(r[0] == 0x5A5A for recs in rows.values() for r in recs)
    apis: Counter[tuple[str, str]] = Counter()
    for base, tag, level in (("AclModule.acl_model.0", 0, "acl"), ("AclModule.acl_rts.0", 0, "acl"),
                             ("AclModule.acl_others.0", 0, "acl"), ("Runtime.api.0", 40, "runtime")):
        for r in rows[base]:
            assert r[1] == tag
            name = r[7] if level == "acl" else r[6]
            apis[level, name.rstrip(b"\0").decode()] += 1
    expected = {(t["level"], t["api_name"]): t["count"] for t in truth["api_statistic"] if t["level"] != "model"}
    assert dict(apis) == expected
    tasks = sum(t["count"] for t in truth["op_statistic"])
    tracks = rows["Runtime.task_track.0"]
    assert len(tracks) == tasks and {r[4].rstrip(b"\0") for r in tracks} == {b"KERNEL_AICORE", b"KERNEL_AICPU"}
    steps = rows["Framework.step_info.0"]
    assert sorted((r[7], r[9]) for r in steps) == sorted((i, tag) for i in (1, 2, 3) for tag in (0, 1))
    raw_desc = stream("Framework.task_desc_info.0")
    names: Counter[str] = Counter()
    for offset in range(0, len(raw_desc), 256):
        record = raw_desc[offset:offset + 256]
        hashed = record[8] == 0
        fields = struct.unpack(GE_TASK_HASH_NAME if hashed else GE_TASK_TEXT_NAME, record)
        model_id, stream_id, task_id = fields[-18:-15]  # then batch, thread, context, 12 B reserved
        assert (fields[1], model_id) == (23, 1) and stream_id in (2, 3) and task_id < 0x10000
        names["hash" if hashed else fields[11].rstrip(b"\0").decode()] += 1
    assert names["hash"] == 3 * 11 and names["conv2d_0/Conv2D"] == 3  # 11 names of ≥ 24 characters are hashed
    assert len(rows["Framework.tensor_data_info.0"]) >= tasks
    assert [r[3] for r in rows["Framework.id_map_info.0"]] == [1]  # model id


def _rewrite(path: Path, dtype: np.dtype, edit: Any) -> None:
    """The slice's records edited, and its .done file's size with them (a slice shorter than its .done says is
    a loss of its own)."""
    records = np.frombuffer(path.read_bytes(), dtype).copy()
    path.write_bytes(edit(records).tobytes())
    done = path.with_name(path.name + ".done")
    if done.exists():
        lines = done.read_text().splitlines()
        done.write_text("".join(f"filesize:{path.stat().st_size}\n" if line.startswith("filesize:") else f"{line}\n"
                                for line in lines))


def test_a_launched_task_without_its_runtime_track_is_named_so(tmp_path: Path) -> None:
    """GE of that time describes launched ops with iteration 0 (as a static graph's load reports them), so the
    tracks register their stream like a loaded model; a device task whose own track is lost is then still a
    launch-mode task without a host runtime track, not a static model's task without a load registration."""
    from stages.formats import legacy  # noqa: PLC0415

    prof, _ = _simulate(tmp_path / "board", "cloud", "legacy", iterations=4, slice_bytes=1 << 20)
    data = prof / "device_0" / "data"

    def zero_iteration(records: np.ndarray) -> np.ndarray:
        records["cur_iter"] = 0
        return records

    for base, dtype in (("Framework.task_desc_info", legacy.GE_TASK), ("Framework.tensor_data_info", legacy.GE_TENSOR)):
        for path in data.glob(f"{base}.0.slice_*"):
            if not path.name.endswith(".done"):
                _rewrite(path, dtype, zero_iteration)
    track = data / "Runtime.task_track.0.slice_0"
    _rewrite(track, legacy.RT_TRACK, lambda records: np.delete(records, range(150, 155)))  # 3rd image: launched
    batches, figures = run_chain(prof, tmp_path / "out")
    assert figures["rejected"] == {"device task without a host runtime track (legacy layout, launch mode)": 5,
                                   "PMU record without a device task": 5}
