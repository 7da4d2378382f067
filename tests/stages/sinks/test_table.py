"""SortedTable (stages/sinks/_table.py): whatever the batches, chunk and slice sizes, the final files hold every
row once, sorted by key, sliced at max_rows; live files parse at every moment."""

from __future__ import annotations

import csv
import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from stages.sinks._table import SortedTable

HEADER = ["Device_id", "Start(us)", "Name"]
rows_strategy = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10**6),
                                   st.text(alphabet='ab, "\t', max_size=6)), max_size=60)


def _files(folder: Path, suffix: str) -> list[Path]:
    def order(path: Path) -> int:
        parts = path.name.split("_")
        return int(parts[2]) if parts[1] == "slice" else 0
    return sorted(folder.glob(f"t_*.{suffix}"), key=order)


@settings(max_examples=40, deadline=None)
@given(rows=rows_strategy, batch=st.integers(1, 9), chunk=st.integers(1, 8), max_rows=st.integers(1, 25),
       fmt=st.sampled_from(["csv", "json"]), presorted=st.booleans())
def test_every_row_once_sorted_and_sliced(rows: list[tuple[int, int, str]], batch: int, chunk: int, max_rows: int,
                                          fmt: str, presorted: bool) -> None:
    """Rows that arrive in key order (kept as written, presorted) end as rows that arrive in any order."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        table = SortedTable(folder, "t", "20240101120000", fmt, list(HEADER), key_fields=3, max_rows=max_rows,
                            chunk_rows=chunk, tab_columns=["Start(us)"])
        keyed = [((device, start, i), [str(device), str(start), name]) for i, (device, start, name) in enumerate(rows)]
        if presorted:
            keyed.sort()
        for k in range(0, len(keyed), batch):
            table.append(keyed[k:k + batch])
            for path in _files(folder, fmt):  # live files: whole rows, header width
                if fmt == "csv":
                    with open(path, newline="") as handle:
                        assert all(len(r) == len(HEADER) for r in csv.reader(handle))
                else:
                    assert all(set(r) == set(HEADER) for r in json.loads(path.read_text()))
        final = table.finish()
        assert final == _files(folder, fmt)
        assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in final)  # no run or temp file left
        body: list[list[str]] = []
        for path in final:
            if fmt == "csv":
                with open(path, newline="") as handle:
                    found = list(csv.reader(handle))
                assert found[0] == HEADER
                found = found[1:]
            else:
                found = [[r[name] for name in HEADER] for r in json.loads(path.read_text())]
            assert 0 < len(found) <= max_rows
            body += found
        expected = [cells for _, cells in sorted(keyed)]
        if fmt == "csv":  # a time point carries msprof's TAB; TABs inside text become blanks
            expected = [[d, f"{s}\t", n.replace("\t", " ")] for d, s, n in expected]
        assert body == expected
        if len(rows) > max_rows:
            assert final[0].name == "t_slice_0_20240101120000." + fmt


def test_a_slow_table_spills_by_bytes_before_its_row_count(tmp_path: Path) -> None:
    """One row per batch, as msproftx marks come: the chunk never holds more than chunk_bytes of lines (and
    one row), so a table that grows slowly does not keep a large chunk; the output is the same."""
    table = SortedTable(tmp_path, "t", "20240101120000", "csv", list(HEADER), key_fields=2, max_rows=10_000,
                        chunk_rows=50_000, chunk_bytes=4096)
    keyed = [((0, (n * 7919) % 3001), ["0", str((n * 7919) % 3001), f"mark {n}"]) for n in range(3000)]
    for row in keyed:
        table.append([row])
        assert sum(len(entry[-1]) for entry in table._chunk) < 4096 + 64
    assert len(table._runs) >= 3000 * 15 // 4096  # each line is at least 15 bytes
    (final,) = table.finish()
    with open(final, newline="") as handle:
        body = list(csv.reader(handle))[1:]
    assert body == [cells for _, cells in sorted(keyed)]
