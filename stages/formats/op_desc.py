"""ProfOpDesc, the record aclprofModelSubscribe writes into the user's pipe
(CANN's acl_prof.h; its collector's data_struct.h).

Fixed size, no header and no framing: 72 bytes from older collectors, 80 from the newest (a trailing
``dev_id`` and 4 bytes of padding). ``signature`` is a CRC-32C (Castagnoli, reflected) of bytes
[4, size) with initial value 0xFFFFFFFF and no final XOR, i.e. the bitwise NOT of the standard CRC-32C.
Op names and types are not in the bytes: ``op_index`` keys them in the producing process (pyACL's
``get_op_type`` / ``get_op_name``).
"""

from __future__ import annotations

import numpy as np

_COMMON = [("signature", "<u4"), ("model_id", "<u4"), ("flag", "<u4"), ("thread_id", "<u4"),
           ("op_index", "<u8"), ("duration", "<u8"), ("start", "<u8"), ("end", "<u8"),
           ("execution_time", "<u8"), ("cube_fops", "<u8"), ("vector_fops", "<u8")]
OP_DESC_72 = np.dtype(_COMMON)
OP_DESC_80 = np.dtype(_COMMON + [("dev_id", "<u4"), ("pad", "<u4")])
LAYOUTS = {72: OP_DESC_72, 80: OP_DESC_80}
SIZES = tuple(LAYOUTS)
CHECKED_FROM = 4  # the signature covers everything after itself

# aclprofSubscribeOpFlag
FLAG_OP, FLAG_SUBGRAPH, FLAG_OP_THREAD, FLAG_NONE = 0, 1, 2, 3

CRC32C_POLY = 0x82F63B78  # reflected Castagnoli polynomial


def _table() -> np.ndarray:
    table = np.zeros(256, np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ CRC32C_POLY if crc & 1 else crc >> 1
        table[byte] = crc
    return table


CRC32C_TABLE = _table()


def signatures(rows: np.ndarray) -> np.ndarray:
    """The ProfOpDesc signature of each row of an (n, k) uint8 array: CRC-32C without the final XOR,
    computed for all rows at once, one column (byte position) per step."""
    crc = np.full(len(rows), 0xFFFFFFFF, np.uint32)
    for column in range(rows.shape[1]):
        crc = CRC32C_TABLE[(crc ^ rows[:, column]) & 0xFF] ^ (crc >> 8)
    return crc


def signature(data: bytes) -> int:
    """The signature of one buffer (the bytes after the signature field of one record)."""
    return int(signatures(np.frombuffer(data, np.uint8).reshape(1, -1))[0])


def check(block: bytes, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Whole records of ``block`` (a multiple of ``size`` bytes) as a structured array, and a mask of those
    whose signature matches."""
    raw = np.frombuffer(block, np.uint8).reshape(-1, size)
    records = np.frombuffer(block, LAYOUTS[size])
    return records, signatures(raw[:, CHECKED_FROM:]) == records["signature"]


def sign(records: np.ndarray) -> None:
    """Set each record's signature from its other bytes (the simulator's side)."""
    raw = records.view(np.uint8).reshape(len(records), records.dtype.itemsize)
    records["signature"] = signatures(raw[:, CHECKED_FROM:])
