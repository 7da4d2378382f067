#!/usr/bin/env python3
"""What msprof's own parser and ours make of a corrupt PROF_… directory.

One simulated board (``pipeline simulate``), then one copy per corruption case, each parsed by
``pipeline import`` and by msprof's Python parser (run as a subprocess, as
``scripts/compare_with_msprof.py`` does). Each side's op_statistic and api_statistic are summed and
set against the simulator's ground truth, so the table says how many device tasks and API calls
each parser kept against its own clean run, and what our run report counted as rejected.

Cases (``none`` first: the uncorrupted copy is the baseline of the others):
  none        the directory as the simulator wrote it
  bad-magic   the magic number of one api_event record in the middle of the first host slice is zeroed
  tail        a partial hwts record (45 bytes) is appended to the last hwts.data slice
  head        the first hwts.data slice loses its first 17 bytes (a partial record at the head)

Exit status: 0 when, in every case, our counts fall short of our clean run by no more than the records
our run report rejected, 1 when not, 2 on a usage or setup error.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_with_msprof import (  # noqa: E402
    SPECS,
    Msprof,
    SetupError,
    find_msprof_script,
    import_ours,
    merge_stat_tables,
    read_stat_csv,
    run_msprof,
    simulate,
    single_csv,
)

API_RECORD_BYTES, HWTS_RECORD_BYTES = 40, 64


def _slices(folder: Path, base: str) -> list[Path]:
    found = [p for p in folder.glob(f"{base}.slice_*") if not p.name.endswith(".done")]
    return sorted(found, key=lambda p: int(p.name.rsplit("_", 1)[1]))


def zero_one_api_magic(prof: Path) -> str:
    path = _slices(prof / "host" / "data", "unaging.api_event.data")[0]
    data = bytearray(path.read_bytes())
    middle = (len(data) // API_RECORD_BYTES // 2) * API_RECORD_BYTES
    data[middle:middle + 2] = b"\0\0"
    path.write_bytes(bytes(data))
    return f"{path.name}: magic of the record at byte {middle} zeroed"


def append_partial_hwts(prof: Path) -> str:
    path = _slices(prof / "device_0" / "data", "hwts.data.0")[-1]
    with path.open("ab") as handle:
        handle.write(bytes(range(7, 52)))
    return f"{path.name}: 45 bytes appended"


def cut_hwts_head(prof: Path) -> str:
    path = _slices(prof / "device_0" / "data", "hwts.data.0")[0]
    path.write_bytes(path.read_bytes()[17:])
    return f"{path.name}: first 17 bytes removed"


def leave_alone(prof: Path) -> str:
    return "no change"


CASES: dict[str, Callable[[Path], str]] = {"none": leave_alone, "bad-magic": zero_one_api_magic,
                                            "tail": append_partial_hwts, "head": cut_hwts_head}


def totals(folders: Sequence[Path]) -> tuple[int | None, int | None]:
    """Summed Count of op_statistic and api_statistic over the exported folders (None: not exported)."""
    result: list[int | None] = []
    for kind in ("op_statistic", "api_statistic"):
        spec = SPECS[kind]
        try:
            table = merge_stat_tables([read_stat_csv(single_csv(folder, kind), spec) for folder in folders], spec)
        except SetupError:
            result.append(None)
            continue
        result.append(int(sum(row[spec.count_column] for row in table.rows.values())))
    return result[0], result[1]


def ours(prof: Path, work: Path) -> tuple[int | None, int | None, dict[str, int]]:
    output = work / "ours"
    import_ours(prof, output, work / "logs")
    report = json.loads((output / "run_report.json").read_text())
    rejected = {f"{stage}.{reason}": count for stage, entry in report["stages"].items()
                for reason, count in entry.get("rejected", {}).items() if count}
    op_count, api_count = totals([output / "mindstudio_profiler_output"])
    return op_count, api_count, rejected


def theirs(msprof: Msprof, prof: Path, work: Path) -> tuple[int | None, int | None, str]:
    try:
        exports = run_msprof(msprof, prof, work)
    except SetupError as error:
        return None, None, str(error).splitlines()[0][:160]
    op_count, _ = totals(exports["op_statistic"].folders)
    _, api_count = totals(exports["api_statistic"].folders)
    return op_count, api_count, ""


def show(value: int | None, baseline: int | None) -> str:
    if value is None:
        return "not exported"
    if baseline is None or value == baseline:
        return str(value)
    return f"{value} ({value - baseline:+d})"


def lost_records(rejected: dict[str, int], stream: str, record_bytes: int) -> int:
    """Records the run report accounts for: rejected bytes of ``stream`` in whole records, rounded up."""
    kept_aside = sum(count for key, count in rejected.items() if key.startswith(f"collect.{stream}:"))
    return -(-kept_aside // record_bytes)


def run(args: argparse.Namespace, work: Path) -> int:
    shutil.rmtree(work / "board", ignore_errors=True)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    clean = simulate(work, args.chip, args.iterations)
    print(f"chip {args.chip}, {args.iterations} iterations; counts are summed op_statistic and api_statistic "
          "Count, (±n) against the same parser's uncorrupted run\n")
    baseline: dict[str, tuple[int | None, int | None]] = {}
    ok = True
    for name in ["none", *(case for case in args.cases if case != "none")]:
        case_dir = work / name
        shutil.rmtree(case_dir, ignore_errors=True)
        (case_dir / "logs").mkdir(parents=True)
        prof = case_dir / "board" / clean.name
        shutil.copytree(clean, prof)
        what = CASES[name](prof)
        our_ops, our_apis, rejected = ours(prof, case_dir)
        their_ops, their_apis, failure = theirs(Msprof(args.msprof_script, case_dir / "logs"), prof,
                                                case_dir / "msprof")
        base_ours, base_theirs = baseline.setdefault("ours", (our_ops, our_apis)), \
            baseline.setdefault("msprof", (their_ops, their_apis))
        print(f"[{name}] {what}")
        print(f"  ours:   op_statistic {show(our_ops, base_ours[0])}, api_statistic {show(our_apis, base_ours[1])}; "
              f"rejected {rejected or 'nothing'}")
        print(f"  msprof: op_statistic {show(their_ops, base_theirs[0])}, api_statistic "
              f"{show(their_apis, base_theirs[1])}" + (f"; failed: {failure}" if failure else ""))
        if our_ops is None or our_apis is None or base_ours[0] is None or base_ours[1] is None:
            ok = False
            continue
        ok &= base_ours[0] - our_ops <= lost_records(rejected, "hwts", HWTS_RECORD_BYTES)
        ok &= base_ours[1] - our_apis <= lost_records(rejected, "api_event", API_RECORD_BYTES)
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--msprof-src", type=Path, required=True,
                        help="a checkout of github.com/Ascend/msprof (holds analysis/msprof/msprof.py)")
    parser.add_argument("--chip", choices=("cloud", "910b"), default="cloud")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--cases", nargs="+", choices=tuple(CASES), default=list(CASES))
    parser.add_argument("--work", type=Path, help="working folder (default: a new temporary one, removed after)")
    args = parser.parse_args(argv)
    args.msprof_script = find_msprof_script(args.msprof_src)
    if args.msprof_script is None:
        print(f"msprof source not found in {args.msprof_src} (needs analysis/msprof/msprof.py)", file=sys.stderr)
        return 2
    work = args.work.resolve() if args.work else Path(tempfile.mkdtemp(prefix="corrupt_msprof_"))
    try:
        return run(args, work)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
