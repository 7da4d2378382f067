"""The end-of-run report: per stage records in / out / rejected, reconciliation, throughput."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

MIN_WAIT_SHOWN_S = 1.0  # shorter backpressure is normal flow control, not worth a line


def run_problems(finals: dict[str, dict[str, Any] | None], exit_codes: dict[str, int | None],
                 interrupted: bool) -> list[str]:
    """Every reason this run is not a clean, fully reconciled run, one line each."""
    problems: list[str] = []
    stopped: list[str] = []
    failed_first = any(f is not None and f.get("error") and not f["error"].startswith("stopped:")
                       for f in finals.values())
    for sid, final in finals.items():
        code = exit_codes.get(sid)
        if final is None:
            if failed_first and code is not None and code < 0:
                stopped.append(f"stage '{sid}' was stopped (signal {-code}) after the failure above")
            else:
                problems.append(f"stage '{sid}' ended without a report (exit {code}): it crashed or was killed")
            continue
        if (final.get("error") or "").startswith("stopped:"):
            stopped.append(final["error"].removeprefix("stopped: "))
        elif final.get("error"):
            problems.append(final["error"].removeprefix("error: "))
        problems.extend(final.get("problems", []))
        problems.extend(final.get("input_problems", []))
    problems.extend(_cross_checks(finals, interrupted))
    return problems + stopped


def run_warnings(finals: dict[str, dict[str, Any] | None]) -> list[str]:
    """What the stages made up for in the input (``input_warnings``), one line each."""
    return [line for final in finals.values() if final for line in final.get("input_warnings", [])]


def root_causes(problems: list[str]) -> list[str]:
    """The problems a user must act on (not the stages stopped because of them)."""
    return [line for line in problems if "after another stage failed" not in line
            and "after the failure above" not in line]


def _cross_checks(finals: dict[str, dict[str, Any] | None], interrupted: bool) -> list[str]:
    """What the board wrote equals what the collector read, when both ran to the end."""
    if interrupted:
        return []
    written = {sid: f["accounting"]["records_written"] for sid, f in finals.items()
               if f and "records_written" in f.get("accounting", {})}
    collected = {sid: f["accounting"]["records_collected"] for sid, f in finals.items()
                 if f and "records_collected" in f.get("accounting", {})}
    if len(written) == 1 and len(collected) == 1:
        (board, n_written), (collector, n_collected) = next(iter(written.items())), next(iter(collected.items()))
        if n_written != n_collected:
            return [f"stage '{collector}': collected {n_collected} records but '{board}' wrote {n_written}"]
    return []


def partition_report(finals: dict[str, dict[str, Any] | None], groups: dict[str, list[str]]
                     ) -> dict[str, dict[str, Any]]:
    """How the work of each partitioned stage divided: records in per partition, and the partition furthest from
    their mean, in percent of it (each partition also takes all of the host's records)."""
    report = {}
    for group, members in groups.items():
        records = {sid: int(final["in"]) for sid in members if (final := finals.get(sid)) is not None}
        mean = sum(records.values()) / len(records) if records else 0.0
        spread = max((abs(n - mean) / mean * 100 for n in records.values()), default=0.0) if mean else 0.0
        report[group] = {"records_in": records, "mean_in": round(mean, 1), "max_off_mean_pct": round(spread, 2)}
    return report


def _partition_lines(partitions: dict[str, dict[str, Any]]) -> list[str]:
    return [f"  partitions of {group}: in {' / '.join(f'{n:,}' for n in figures['records_in'].values())} "
            f"(the furthest {figures['max_off_mean_pct']:.1f} % off their mean)"
            for group, figures in partitions.items()]


def _rate(records: int, seconds: float) -> str:
    return f"{records / seconds:,.0f}/s" if seconds > 0 else "-"


REPORT_COLUMNS = ("stage", "type", "in", "out", "rejected", "wall s", "throughput", "peak MB")
REPORT_DROPPED_FIRST = ("type", "peak MB", "wall s")  # left out in this order when the lines would wrap


def render_report(report: dict[str, Any], width: int | None = None) -> str:
    """The run report as text. Its stage table takes ``width`` columns at most (default: the terminal's, when
    standard output is one): its columns are as wide as their cells, and the least useful go when they must."""
    if width is None and sys.stdout.isatty():
        width = shutil.get_terminal_size().columns
    lines = [f"run {report['run_id']}: {report['state']} in {report['wall_s']:.1f} s"
             + (" (Ctrl-C, then drained: the outputs hold what was read until then)"
                if report["state"] == "interrupted" else "")]
    stalls = report.get("stalls", {})
    rows = {sid: _report_row(final) for sid, final in report["stages"].items() if final is not None}
    table = _report_table(rows, width)
    lines.append(table.pop("header"))
    for sid, final in report["stages"].items():
        if final is None:
            lines.append(f"  {sid} (no report: crashed or killed)")
            lines.extend(_stall_lines(stalls.get(sid, [])))
            continue
        lines.append(table[sid])
        for reason, count in sorted(final["rejected"].items()):
            lines.append(f"      rejected {count:,}: {reason}")
        for row in final.get("reconcile", []):
            mark = "ok" if row["ok"] else "MISMATCH"
            lines.append(f"      from {row['from']}: sent {row['sent']:,} received {row['received']:,} {mark}")
        lines.extend(fault_lines(final))
        lines.extend(_stall_lines(stalls.get(sid, [])))
    lines.extend(_partition_lines(report.get("partitions", {})))
    status = "all counts reconcile" if not report["problems"] else f"{len(report['problems'])} problem(s)"
    lines.append(f"  {status}")
    return "\n".join(lines)


def _report_row(final: dict[str, Any]) -> dict[str, str]:
    out = sum(final["out"].values()) or final.get("accounting", {}).get("records_written", 0)
    return {"type": final["stage_type"], "in": f"{final['in']:,}", "out": f"{out:,}",
            "rejected": f"{sum(final['rejected'].values()):,}", "wall s": f"{final['wall_s']:.1f}",
            "throughput": _rate(max(final["in"], out), final["wall_s"]),
            "peak MB": f"{final.get('peak_rss_mb', 0):.0f}"}


def _report_table(rows: dict[str, dict[str, str]], width: int | None) -> dict[str, str]:
    """The header line (key ``header``) and each stage's line, indented by two, columns two apart."""
    cells = {sid: {"stage": sid, **row} for sid, row in rows.items()}
    columns = list(REPORT_COLUMNS)
    widths = {name: max([len(name), *(len(row[name]) for row in cells.values())]) for name in columns}
    for dropped in REPORT_DROPPED_FIRST:
        if width is None or 2 + sum(widths[name] + 2 for name in columns) - 2 <= width:
            break
        columns.remove(dropped)

    def line(row: dict[str, str]) -> str:
        return "  " + "  ".join(row[name].ljust(widths[name]) if name in ("stage", "type") else
                                row[name].rjust(widths[name]) for name in columns).rstrip()
    return {"header": line({name: name for name in columns}), **{sid: line(row) for sid, row in cells.items()}}


def fault_lines(final: dict[str, Any]) -> list[str]:
    """What held a stage up: output pauses, waits for a slow consumer, peers that came and went."""
    lines = []
    for pause in final.get("pauses", []):
        free = f" ({pause['free']} free)" if pause.get("free") is not None else ""
        lines.append(f"      paused {pause['seconds']:.1f} s: {pause['reason']}: {pause['path']}{free}, "
                     f"{pause['retries']} retries, then resumed")
    for consumer, seconds in sorted(final.get("waited_s", {}).items()):
        if seconds >= MIN_WAIT_SHOWN_S:
            lines.append(f"      waited {seconds:.1f} s for '{consumer}' to read (backpressure)")
    for peers in final.get("peers", []):
        if peers["disconnects"]:
            lines.append(f"      {peers['peer']} on {peers['endpoint']}: {peers['disconnects']} disconnect(s), "
                         f"{peers['connects']} connect(s)")
    return lines


def _stall_lines(stalls: list[dict[str, Any]]) -> list[str]:
    return [f"      stuck at {stall['at_s']:.1f} s: no heartbeat for {stall['for_s']:.1f} s"
            f"{', then responding again' if stall['ended'] else ''}" for stall in stalls]


OUTPUT_NAMES_SHOWN = 8  # off a terminal: the names on the one line, then a count of the others
OUTPUT_NAME_LINES = 4  # on a terminal: the lines of names under the folder, then a count of the others


def outputs_line(out_dir: Path, since: float, width: int | None = None) -> str:
    """Where this run's results are, for the user to open next: the files it wrote or changed (from ``since``,
    epoch seconds), not an earlier run's in the same folder. The database and msprof's folder first.

    One line off a terminal. Within ``width`` columns (default: the terminal's, when standard output is one)
    it is one line where that fits, else the folder on a line and the names under it, wrapped between names."""
    if width is None and sys.stdout.isatty():
        width = shutil.get_terminal_size().columns
    def written(folder: Path) -> list[Path]:
        try:
            return sorted(path for path in folder.iterdir() if path.is_file() and not path.name.startswith(".")
                          and path.name != "run.json" and path.stat().st_mtime >= since)
        except OSError:  # gone or unreadable, or a file removed while listed: the line is only a pointer
            return []
    top_level = written(out_dir)
    found = ([path for path in top_level if path.suffix == ".db"] + written(out_dir / "mindstudio_profiler_output")
             + [path for path in top_level if path.suffix != ".db"])
    if not found:
        return f"outputs: none written under {out_dir}"
    names = [path.name for path in found]
    if width is None:
        shown = ", ".join(names[:OUTPUT_NAMES_SHOWN])
        return f"outputs in {out_dir}: {shown}" + (f" (+{len(names) - OUTPUT_NAMES_SHOWN} more)"
                                                    if len(names) > OUTPUT_NAMES_SHOWN else "")
    one_line = f"outputs in {out_dir}: {', '.join(names)}"
    if len(one_line) <= width:
        return one_line
    return "\n".join([f"outputs in {out_dir}:", *wrapped_names(names, width)])


def wrapped_names(names: list[str], width: int, indent: str = "  ", max_lines: int = OUTPUT_NAME_LINES) -> list[str]:
    """``names`` comma-separated in lines of ``width`` columns at most, each after ``indent``, broken between
    names only; past ``max_lines`` the last line ends with ``+N more``. A name wider than a line has one alone."""
    for shown in range(len(names), -1, -1):
        more = [f"+{len(names) - shown} more"] if shown < len(names) else []
        lines = _fill([f"{name}," for name in names[:shown]] + more, width, indent)
        if len(lines) <= max_lines:
            return lines
    return lines


def _fill(words: list[str], width: int, indent: str) -> list[str]:
    """``words`` on lines of ``width`` columns, a space apart, each line after ``indent``; the last word's comma
    goes."""
    if words:
        words[-1] = words[-1].removesuffix(",")
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(indent + word)
    return lines
