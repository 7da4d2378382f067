#!/usr/bin/env python3
"""Compare our summaries with msprof's own parser on a simulated board.

Steps: ``pipeline simulate`` writes a PROF_… directory; ``pipeline import`` parses it; a copy of
it is parsed by msprof's Python parser (github Ascend/msprof, ``analysis/msprof/msprof.py``, run
as a subprocess: ``import``, then ``export summary``); the two sides' statistics (op_statistic,
api_statistic) and per-record tables (task_time, step_trace, msprof_tx, aicpu, l2_cache; see
row_tables.py) are compared row by row, headers included.

msprof exports the whole run only when the driver is new enough and the chip is not platform 0
(Ascend 310, "mini"); otherwise it exports per iteration, at most 5 iterations per call
(its ``ChipManager.ALL_DATA_EXPORT_CHIP_BLACKLIST``). This script then exports iterations 1..N of every
model in chunks of ``--model-id M --iteration-id I --iteration-count C`` and sums the chunks' op_statistic, which is
exact: msprof selects device tasks by iteration index (Avg is then Total/Count and Ratio(%) is not
compared); the chunks' per-record tables are concatenated. Summed chunks would not give
api_statistic: msprof selects host API calls by the iteration's time window (calls starting inside
it or spanning its start), so a call straddling a chunk boundary counts twice and calls after the
last iteration count nowhere. api_statistic then comes from a second msprof run on a copy holding
only the host/ folder, which msprof exports whole; so does msprof_tx.

``--layout legacy`` simulates the CANN 5/6 files (AclModule, Framework, Runtime in device_0/data/).
msprof's Python parser dropped them in 2023, so point ``--msprof-src`` at a checkout from before
(e.g. github Ascend/msprof 96593dcfb, "code from hisi", 2022-11). That version exports one iteration
per call and has no api_statistic: its acl_statistic (acl level) and runtime_api (runtime level) of a
copy without the device data, which it exports whole, stand in for it. Its per-record tables have other
headers and are not compared.

The wrap case: ``--first-task-id 65500`` starts every stream near the 16-bit limit, so the AI Core stream's
task ids wrap in the first image (67 ids per image: ``--iterations 1000`` wraps it twice). The runtime then
reports FLIP tasks (task_tracks of type FLIP_TASK, the flip number in their batchId) and the device task-flip
records, and the kernels' task_tracks carry batchId 0, as a real runtime may write them: both sides must take
the batch ids from the flips (msprof's FlipCalculator) to join every task.

Exit status: 0 when every compared statistic is equal, 1 when not, 2 on a usage or setup error.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from row_tables import (
    ROW_KINDS,
    ROW_SPECS,
    RowComparison,
    compare_row_tables,
    ffts_tasks,
    read_row_tables,
    report_rows,
)

TOLERANCE_US = 0.01
IMPORT_RETRY_WAIT_S = 60
MSPROF_MAX_ITERATIONS_PER_EXPORT = 5  # IterationRange.MAX_ITERATION_COUNT in msprof
# msprof_export.py prints this when it exports the whole run (not one iteration or step)
MSPROF_WHOLE_RUN_MESSAGE = "All collected data will be exported"
STAT_KINDS = ("op_statistic", "api_statistic")
LEGACY_API_KINDS = ("acl_statistic", "runtime_api")  # msprof ≤ 2022: its api_statistic, level by level
LEGACY_HOST_FILES = ("AclModule.", "Framework.", "Runtime.")  # host records in device_N/data before CANN 6.3


class SetupError(Exception):
    """A step before the comparison failed; the message says which and why."""


# --------------------------------------------------------------------------- statistics tables


@dataclass(frozen=True)
class TableSpec:
    """How one msprof statistics CSV is keyed and which of its columns are compared."""

    kind: str
    key_columns: tuple[str, ...]
    count_column: str
    total_column: str
    min_column: str
    max_column: str
    avg_column: str
    extra_column: str  # Ratio(%) or Variance: compared only when msprof exported in one call

    @property
    def time_columns(self) -> tuple[str, ...]:
        return (self.total_column, self.min_column, self.max_column, self.avg_column)


SPECS = {
    "op_statistic": TableSpec("op_statistic", ("OP Type", "Core Type"), "Count", "Total Time(us)",
                              "Min Time(us)", "Max Time(us)", "Avg Time(us)", "Ratio(%)"),
    "api_statistic": TableSpec("api_statistic", ("Level", "API Name"), "Count", "Time(us)",
                               "Min(us)", "Max(us)", "Avg(us)", "Variance"),
}

Key = tuple[str, ...]
Row = dict[str, float]


@dataclass
class StatTable:
    """One side's statistics: numeric cells by key, plus the Device_id values seen."""

    rows: dict[Key, Row] = field(default_factory=dict)
    device_ids: set[str] = field(default_factory=set)
    has_extra: bool = True


def to_number(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise SetupError(f"{where}: not a number: {text!r}") from None


def read_stat_csv(path: Path, spec: TableSpec) -> StatTable:
    table = StatTable()
    with path.open(newline="", encoding="utf-8") as handle:
        for record in csv.DictReader(handle):
            key = tuple(record[column].strip() for column in spec.key_columns)
            if key in table.rows:
                raise SetupError(f"{path}: duplicate row {key}")
            columns = (spec.count_column, *spec.time_columns, spec.extra_column)
            table.rows[key] = {column: to_number(record[column], f"{path} {key} {column}") for column in columns}
            table.device_ids.add(record.get("Device_id", "").strip())
    return table


def merge_stat_tables(tables: Sequence[StatTable], spec: TableSpec) -> StatTable:
    """Sum per-iteration exports into one table; Avg is recomputed, the extra column dropped."""
    if len(tables) == 1:
        return tables[0]
    merged = StatTable(has_extra=False)
    for table in tables:
        merged.device_ids |= table.device_ids
        for key, row in table.rows.items():
            into = merged.rows.get(key)
            if into is None:
                merged.rows[key] = dict(row)
                continue
            into[spec.count_column] += row[spec.count_column]
            into[spec.total_column] += row[spec.total_column]
            into[spec.min_column] = min(into[spec.min_column], row[spec.min_column])
            into[spec.max_column] = max(into[spec.max_column], row[spec.max_column])
    for row in merged.rows.values():
        row[spec.avg_column] = row[spec.total_column] / row[spec.count_column] if row[spec.count_column] else 0.0
        row.pop(spec.extra_column, None)
    return merged


# --------------------------------------------------------------------------- comparison


@dataclass
class Difference:
    key: Key
    column: str
    ours: float
    msprof: float


@dataclass
class Comparison:
    kind: str
    rows_compared: int
    differences: list[Difference]
    only_ours: list[Key]
    only_msprof: list[Key]
    max_abs_time_diff: float
    device_ids: tuple[set[str], set[str]]
    inexact: dict[str, tuple[int, float]]  # column -> (rows not identical but within tolerance, max |diff|)
    note: str = ""

    @property
    def equal(self) -> bool:
        return not (self.differences or self.only_ours or self.only_msprof)


def compare_tables(ours: StatTable, msprof: StatTable, spec: TableSpec, *, note: str = "") -> Comparison:
    common = sorted(ours.rows.keys() & msprof.rows.keys())
    compared = [spec.count_column, *spec.time_columns]
    if ours.has_extra and msprof.has_extra:
        compared.append(spec.extra_column)
    differences: list[Difference] = []
    inexact: dict[str, tuple[int, float]] = {}
    max_abs = 0.0
    for key in common:
        for column in compared:
            mine, theirs = ours.rows[key][column], msprof.rows[key][column]
            delta = abs(mine - theirs)
            if column in spec.time_columns:
                max_abs = max(max_abs, delta)
            limit = 0.0 if column == spec.count_column else TOLERANCE_US
            if delta > limit + 1e-9:
                differences.append(Difference(key, column, mine, theirs))
            elif delta > 1e-9:
                rows, largest = inexact.get(column, (0, 0.0))
                inexact[column] = (rows + 1, max(largest, delta))
    return Comparison(
        kind=spec.kind,
        rows_compared=len(common),
        differences=differences,
        only_ours=sorted(ours.rows.keys() - msprof.rows.keys()),
        only_msprof=sorted(msprof.rows.keys() - ours.rows.keys()),
        max_abs_time_diff=max_abs,
        device_ids=(ours.device_ids, msprof.device_ids),
        inexact=inexact,
        note=note,
    )


def format_number(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".")


def print_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    body = [list(row) for row in rows]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *body, strict=False)]
    for line in (list(header), ["-" * width for width in widths], *body):
        print("  " + "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())


def report(comparison: Comparison, ours: StatTable, msprof: StatTable) -> None:
    spec = SPECS[comparison.kind]
    print(f"\n== {comparison.kind}")
    if comparison.note:
        print(f"  note: {comparison.note}")
    if comparison.differences:
        print_table(("key", "column", "ours", "msprof", "|diff|"), (
            (" / ".join(d.key), d.column, format_number(d.ours), format_number(d.msprof),
             format_number(abs(d.ours - d.msprof)))
            for d in comparison.differences))
    for side, keys, table in (("ours", comparison.only_ours, ours), ("msprof", comparison.only_msprof, msprof)):
        if keys:
            print(f"  rows only {side} has:")
            print_table((" / ".join(spec.key_columns), "Count", spec.total_column), (
                (" / ".join(key), format_number(table.rows[key][spec.count_column]),
                 format_number(table.rows[key][spec.total_column])) for key in keys))
    ours_ids, msprof_ids = comparison.device_ids
    if ours_ids != msprof_ids:
        print(f"  Device_id (not compared): ours {sorted(ours_ids)}, msprof {sorted(msprof_ids)}")
    for column, (rows, largest) in comparison.inexact.items():
        print(f"  within tolerance but not identical: {column} in {rows} rows (max |diff| {format_number(largest)})")
    print(f"  max |diff| over time columns: {comparison.max_abs_time_diff:.6f} us (tolerance {TOLERANCE_US} us)")
    print(verdict_line(comparison))


def verdict_line(comparison: Comparison) -> str:
    total = comparison.rows_compared + len(comparison.only_ours) + len(comparison.only_msprof)
    if comparison.equal:
        return f"{comparison.kind}: {total} rows, all equal"
    differing = len({d.key for d in comparison.differences})
    return (f"{comparison.kind}: {total} rows, {differing} differ, {len(comparison.only_ours)} only ours, "
            f"{len(comparison.only_msprof)} only msprof")


# --------------------------------------------------------------------------- subprocesses


def run_logged(command: Sequence[str], log: Path, *, cwd: Path | None = None,
               env: dict[str, str] | None = None) -> str:
    """Run a command, keep its output in ``log``, return it; raise SetupError on failure."""
    print(f"$ {' '.join(command)}" + (f"    (cwd {cwd})" if cwd else ""), flush=True)
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    output = result.stdout + result.stderr
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(output, encoding="utf-8")
    if result.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise SetupError(f"{command[0]} exited with {result.returncode} (full output: {log}):\n{tail}")
    return output


PROJECT = Path(__file__).resolve().parents[1]


def pipeline_command() -> list[str]:
    """`python -m pipeline`, run in the project beside this script (so its code is the one compared)."""
    return [sys.executable, "-m", "pipeline"]


def simulate(work: Path, chip: str, iterations: int, mode: str = "launch", layout: str = "current",
             first_task_id: int = 0) -> Path:
    board = work / "board"
    run_logged([*pipeline_command(), "simulate", str(board), "--chip", chip, "--mode", mode, "--iterations",
                str(iterations), "--rate", "max", "--seed", "0", "--layout", layout,
                "--first-task-id", str(first_task_id)], work / "logs" / "simulate.log", cwd=PROJECT)
    prof_dirs = sorted(path for path in board.glob("PROF_*") if path.is_dir())
    if len(prof_dirs) != 1:
        raise SetupError(f"expected one PROF_… directory in {board}, found {len(prof_dirs)}")
    return prof_dirs[0]


def import_ours(prof: Path, output: Path, log_dir: Path) -> None:
    command = [*pipeline_command(), "import", str(prof), "--output", str(output)]
    try:
        run_logged(command, log_dir / "pipeline_import.log", cwd=PROJECT)
    except SetupError as first:
        print(f"pipeline import failed, retrying once in {IMPORT_RETRY_WAIT_S} s:\n{first}", flush=True)
        time.sleep(IMPORT_RETRY_WAIT_S)
        shutil.rmtree(output, ignore_errors=True)
        run_logged(command, log_dir / "pipeline_import_retry.log", cwd=PROJECT)


@dataclass(frozen=True)
class Msprof:
    """msprof's entry script and how to run it."""

    script: Path
    log_dir: Path

    def run(self, args: Sequence[str], log_name: str) -> str:
        analysis = self.script.parent.parent
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(analysis), env.get("PYTHONPATH", "")]))
        return run_logged([sys.executable, self.script.name, *args], self.log_dir / log_name,
                          cwd=self.script.parent, env=env)


def find_msprof_script(source: Path) -> Path | None:
    for candidate in ("analysis/msprof/msprof.py", "msprof/msprof.py", "msprof.py"):
        path = source / candidate
        if path.is_file():
            return path
    return None


def query_models(msprof: Msprof, prof: Path) -> list[tuple[int, int]]:
    """(model id, iteration count) of each device model, from ``msprof.py query``."""
    output = msprof.run(["query", "-dir", str(prof)], "msprof_query.log")
    header: list[str] | None = None
    models: list[tuple[int, int]] = []
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("\t")]
        if "Model ID" in cells and "Iteration Number" in cells:
            header = cells
            continue
        if header is None or len(cells) < len(header):
            continue
        model_ids = cells[header.index("Model ID")].split(",")
        counts = cells[header.index("Iteration Number")].split(",")
        for model_id, count in zip(model_ids, counts, strict=False):
            if model_id.strip().isdigit() and count.strip().isdigit():
                models.append((int(model_id), int(count)))
    if not models:
        raise SetupError(f"msprof query listed no model with iterations (see {msprof.log_dir / 'msprof_query.log'})")
    return models


def collect_exported_csvs(prof: Path, destination: Path) -> None:
    """Move the statistics CSVs an export wrote (new or old layout) out of the PROF copy."""
    destination.mkdir(parents=True)
    for kind in (*STAT_KINDS, *LEGACY_API_KINDS, *ROW_KINDS):
        for path in sorted(prof.rglob(f"{kind}_*.csv")):
            if path.exists():  # aicpu_* also matches aicpu_mi_*, moved already
                shutil.move(str(path), destination / f"{path.parent.name}__{path.name}")


def iteration_chunks(count: int) -> list[tuple[int, int]]:
    step = MSPROF_MAX_ITERATIONS_PER_EXPORT
    return [(first, min(step, count - first + 1)) for first in range(1, count + 1, step)]


@dataclass(frozen=True)
class MsprofExport:
    """Where msprof's CSVs of one statistics kind are, and how they were obtained."""

    folders: list[Path]
    description: str


def export_per_iteration(msprof: Msprof, prof: Path, exports: Path) -> list[Path]:
    for kind in (*STAT_KINDS, *LEGACY_API_KINDS, *ROW_KINDS):  # drop the default export (first iteration only)
        for path in prof.rglob(f"{kind}_*.csv"):
            path.unlink(missing_ok=True)
    # msprof ≤ 2022 has no --iteration-count: one iteration per export
    counted = "--iteration-count" in msprof.run(["export", "summary", "--help"], "msprof_export_help.log")
    folders: list[Path] = []
    for model_id, count in query_models(msprof, prof):
        for first, size in iteration_chunks(count) if counted else [(i, 1) for i in range(1, count + 1)]:
            label = f"model{model_id}_iter{first}-{first + size - 1}"
            msprof.run(["export", "summary", "-dir", str(prof), "--model-id", str(model_id), "--iteration-id",
                        str(first), *(["--iteration-count", str(size)] if counted else [])],
                       f"msprof_export_{label}.log")
            collect_exported_csvs(prof, exports / label)
            folders.append(exports / label)
    return folders


def _device_data(folder: str, names: list[str]) -> list[str]:
    """copytree ignore: the device data of a legacy device folder (its host records stay)."""
    if Path(folder).name != "data":
        return []
    return [name for name in names if not name.startswith(LEGACY_HOST_FILES)]


def export_host_only(msprof: Msprof, source: Path, work: Path, exports: Path, layout: str = "current") -> Path:
    """Run msprof on a copy of the PROF dir without device data: it exports host data whole."""
    prof = work / source.name
    shutil.copytree(source, prof, ignore=_device_data if layout == "legacy" else shutil.ignore_patterns("device_*"))
    msprof.run(["import", "-dir", str(prof)], "msprof_host_only_import.log")
    msprof.run(["export", "summary", "-dir", str(prof)], "msprof_host_only_export.log")
    collect_exported_csvs(prof, exports / "host_only")
    return exports / "host_only"


def run_msprof(msprof: Msprof, prof: Path, work: Path, layout: str = "current") -> dict[str, MsprofExport]:
    """msprof's op_statistic and api_statistic exports for a fresh copy of ``prof``."""
    copy = work / "full" / prof.name
    shutil.copytree(prof, copy)  # msprof writes into the PROF dir: keep our input clean
    msprof.run(["import", "-dir", str(copy)], "msprof_import.log")
    output = msprof.run(["export", "summary", "-dir", str(copy)], "msprof_export.log")
    if MSPROF_WHOLE_RUN_MESSAGE in output:
        collect_exported_csvs(copy, work / "exports" / "all")
        whole = MsprofExport([work / "exports" / "all"], "msprof exported the whole run in one call")
        return {kind: whole for kind in (*STAT_KINDS, *ROW_KINDS)}
    chunks = export_per_iteration(msprof, copy, work / "exports")
    names = ", ".join(folder.name for folder in chunks)
    host_only = export_host_only(msprof, prof, work / "host_only", work / "exports", layout)
    device_rows = MsprofExport(chunks, f"msprof exports per iteration here; the rows of {len(chunks)} exports "
                                       f"({names}) concatenated")
    return {
        "op_statistic": MsprofExport(chunks, f"msprof exports per iteration here; {len(chunks)} exports summed "
                                             f"({names}); Avg recomputed as Total/Count, Ratio(%) not compared"),
        "api_statistic": MsprofExport([host_only], "msprof exports per iteration here; api_statistic taken from "
                                                   "msprof run on a host-only copy (exported whole)"),
        "msprof_tx": MsprofExport([host_only], "msprof exports per iteration here; msprof_tx taken from msprof run "
                                               "on a host-only copy (exported whole)"),
        **{kind: device_rows for kind in ROW_KINDS if kind != "msprof_tx"},
    }


def legacy_api_table(folder: Path) -> StatTable:
    """msprof ≤ 2022's acl_statistic (µs) and runtime_api (ns) as api_statistic rows (no Variance)."""
    table = StatTable(has_extra=False)
    spec = SPECS["api_statistic"]
    for kind, level, columns, scale in (
            ("acl_statistic", "acl", ("Count", "Time(us)", "Min(us)", "Max(us)", "Avg(us)"), 1.0),
            ("runtime_api", "runtime", ("Calls", "Time(ns)", "Min(ns)", "Max(ns)", "Avg(ns)"), 1e-3)):
        with single_csv(folder, kind).open(newline="", encoding="utf-8") as handle:
            for record in csv.DictReader(handle):
                where = f"{kind} {record['Name']}"
                count, total, low, high, avg = (to_number(record[column], where) for column in columns)
                table.rows[(level, record["Name"].strip())] = {
                    spec.count_column: count, spec.total_column: total * scale, spec.min_column: low * scale,
                    spec.max_column: high * scale, spec.avg_column: avg * scale}
    return table


def single_csv(folder: Path, kind: str) -> Path:
    found = sorted(folder.glob(f"*{kind}*.csv"))
    if not found:
        raise SetupError(f"no {kind} CSV in {folder}")
    if len(found) > 1:
        raise SetupError(f"more than one {kind} CSV in {folder}: {[path.name for path in found]}")
    return found[0]


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--msprof-src", type=Path, required=True,
                        help="a checkout of github.com/Ascend/msprof (holds analysis/msprof/msprof.py)")
    parser.add_argument("--chip", choices=("mini", "cloud", "910b", "v6"), default="cloud")
    parser.add_argument("--mode", choices=("launch", "static"), default="launch",
                        help="simulator mode: ops reported at every launch, or once at model load (.om)")
    parser.add_argument("--layout", choices=("current", "legacy"), default="current",
                        help="simulated host records: current reporter, or CANN 5/6 AclModule/Framework/Runtime files "
                             "(msprof's Python parser read these until 2023: point --msprof-src at such a checkout)")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--first-task-id", type=int, default=0,
                        help="task ids already used per stream: 65500 makes the task ids wrap (FLIP tasks, batch ids)")
    parser.add_argument("--work", type=Path,
                        help="working folder (default: a new temporary one); its board/, ours/, msprof/ "
                             "and logs/ subfolders are replaced")
    parser.add_argument("--keep", action="store_true", help="keep the temporary working folder")
    args = parser.parse_args(argv)
    if args.iterations < 1:
        parser.error("--iterations must be at least 1")
    if args.mode == "static" and args.layout == "legacy":
        parser.error("--mode static is not supported with --layout legacy")
    return args


def prepare_work(work: Path) -> None:
    for name in ("board", "ours", "msprof", "logs"):
        shutil.rmtree(work / name, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)


def compare_row_kinds(ours_dir: Path, exports: dict[str, MsprofExport]) -> list[RowComparison]:
    """task_time, step_trace, msprof_tx, aicpu, l2_cache: a table one side lacks counts as a difference."""
    comparisons = []
    for kind in ROW_KINDS:
        spec, export = ROW_SPECS[kind], exports[kind]
        ours_files = sorted(ours_dir.glob(f"{kind}_[0-9]*.csv")) + sorted(ours_dir.glob(f"{kind}_slice_*.csv"))
        msprof_files = [path for folder in export.folders for path in sorted(folder.glob(f"*__{kind}_*.csv"))
                        if not (kind == "aicpu" and "__aicpu_mi_" in path.name)]
        if not ours_files and not msprof_files:
            print(f"\n== {kind}\n  neither side wrote one (no such data in this run)")
            continue
        ours, msprof = read_row_tables(ours_files, spec), read_row_tables(msprof_files, spec)
        contexts = ffts_tasks(sorted(ours_dir.glob("op_summary_*.csv")))
        comparison = compare_row_tables(ours, msprof, spec, note=export.description, ffts_tasks=contexts)
        report_rows(comparison)
        comparisons.append(comparison)
    return comparisons


def compare_all(ours_dir: Path, exports: dict[str, MsprofExport]) -> list[Comparison]:
    comparisons = []
    for kind in STAT_KINDS:
        spec, export = SPECS[kind], exports[kind]
        ours = read_stat_csv(single_csv(ours_dir, kind), spec)
        if kind == "api_statistic" and not any(export.folders[0].glob(f"*{kind}*.csv")):
            msprof = legacy_api_table(export.folders[0])  # msprof ≤ 2022
            ours.has_extra = False
        else:
            msprof = merge_stat_tables([read_stat_csv(single_csv(folder, kind), spec)
                                        for folder in export.folders], spec)
        comparison = compare_tables(ours, msprof, spec, note=export.description)
        report(comparison, ours, msprof)
        comparisons.append(comparison)
    return comparisons


def run(args: argparse.Namespace, work: Path) -> int:
    prepare_work(work)
    logs = work / "logs"
    prof = simulate(work, args.chip, args.iterations, args.mode, args.layout, args.first_task_id)
    import_ours(prof, work / "ours", logs)
    exports = run_msprof(Msprof(args.msprof_script, logs), prof, work / "msprof", args.layout)
    print(f"\ncompared: chip {args.chip}, mode {args.mode}, {args.layout} layout, {args.iterations} iterations, "
          f"first task id {args.first_task_id}, {prof}")
    comparisons = compare_all(work / "ours" / "mindstudio_profiler_output", exports)
    row_comparisons = [] if args.layout == "legacy" else compare_row_kinds(
        work / "ours" / "mindstudio_profiler_output", exports)
    print()
    for comparison in comparisons:
        print(verdict_line(comparison))
    for row_comparison in row_comparisons:
        print(row_comparison.verdict())
    equal = all(c.equal for c in comparisons) and all(c.equal for c in row_comparisons)
    return 0 if equal else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.msprof_script = find_msprof_script(args.msprof_src)
    if args.msprof_script is None:
        print(f"msprof source not found in {args.msprof_src}: get it with "
              f"`git clone https://github.com/Ascend/msprof {args.msprof_src}` "
              "(needs analysis/msprof/msprof.py)", file=sys.stderr)
        return 2
    temporary = args.work is None
    work = Path(tempfile.mkdtemp(prefix="compare_msprof_")) if temporary else args.work.resolve()
    try:
        return run(args, work)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        if temporary and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"working folder kept: {work}")


if __name__ == "__main__":
    sys.exit(main())
