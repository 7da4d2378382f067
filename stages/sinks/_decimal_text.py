"""Derived figures printed as msprof's ``DoubleToStr`` (``num3``, ``num6``) for a whole column at once, in numpy.

``f"{value:.{d}f}"`` rounds the exact binary value of a double to ``d`` decimals, ties to even. Here
``value * 10**d`` is rounded to the nearest integer in floating point; that integer is the exact one
unless the product lies so near a half that its rounding error could cross it, and those few values are
rounded from the exact product (its rounding error found by Dekker's two-product). Each integer's text
is then laid out in a row of 4-byte words (comma and sign, whole digits four at a time, decimals three at
a time), each word looked up in a table, and the bytes each value uses (a mask looked up by its sign,
digit count and kept decimals) are taken in order: the texts of all values, joined, without a Python
string per value. Values too large for the integer arithmetic (or infinite) are left to the caller.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_LIMIT = 2.0**50  # |value * 10**d| below this: exact integers in float64 and int64
_MARGIN = 2.0**-48  # relative distance to a half below which the float product may round either way
_WORD = np.dtype(np.uint32)
PIECE_VALUES = 16_384  # values printed at once (decimal_rows)


def _words(texts: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(text.ljust(4, b"\0") for text in texts), dtype=_WORD)


_LEAD = _words([b"\0\0,-"])[0]  # what comes before the digits: the comma after the previous value, the minus
_MISSING = _words([b"N/A"])[0]
_WHOLE_CHUNK = _words([b"%04d" % chunk for chunk in range(10_000)])  # four digits of the whole part
_FIRST_DECIMALS = _words([b".%03d" % chunk for chunk in range(1000)])  # the point and three decimals
_NEXT_DECIMALS = _words([b"%03d" % chunk for chunk in range(1000)])  # three more decimals, a blank slot
# three decimals as an integer: how many are left once their trailing zeros are dropped
_KEPT_OF_THREE = np.array([len((b"%03d" % chunk).rstrip(b"0")) for chunk in range(1000)])


def _layout_masks(whole_chunks: int, decimals: int) -> np.ndarray:
    """The bytes a value's text uses, by its code (:func:`decimal_rows`): the comma before it, its sign, whole
    digits right-aligned in ``whole_chunks`` words, point and kept decimals; the last code is a missing value
    (N/A)."""
    decimal_words = -(-decimals // 3)
    width = 4 * (1 + whole_chunks + decimal_words)
    digits = 4 * whole_chunks
    masks = np.zeros(((2 * digits + 1) * (decimals + 1) + 1, width), dtype=bool)
    for negative in (0, 1):
        for length in range(1, digits + 1):
            for kept in range(decimals + 1):
                mask = masks[(negative * digits + length) * (decimals + 1) + kept]
                mask[2] = True
                mask[3] = bool(negative)
                mask[4 + digits - length : 4 + digits] = True
                decimal_bytes = [4 + digits + word * 4 + at for word in range(decimal_words)
                                 for at in ((1, 2, 3) if word == 0 else (0, 1, 2))]
                mask[4 + digits] = kept > 0
                mask[decimal_bytes[:kept]] = True
    masks[-1, 2] = True
    masks[-1, 4 + digits : 4 + digits + 3] = True  # N/A in the first decimal word
    return masks


def scaled_integers(values: np.ndarray, decimals: int) -> np.ndarray | None:
    """Each value times ``10**decimals`` rounded as ``%.{decimals}f`` rounds it (NaN: 0, its text is the
    caller's); None when a value is infinite or too large."""
    factor = float(10**decimals)
    scaled = values * factor
    magnitude = np.abs(scaled)
    if not np.fmax.reduce(magnitude, initial=0.0) < _LIMIT:
        return None
    np.nan_to_num(scaled, copy=False, nan=0.0)
    integers = np.rint(scaled)
    near_half = np.abs(np.abs(scaled - integers) - 0.5) <= np.maximum(magnitude, 1.0) * _MARGIN
    if near_half.any():
        integers[near_half] = _rounded_exactly(values[near_half], factor)
    return integers.astype(np.int64)


def _rounded_exactly(values: np.ndarray, factor: float) -> np.ndarray:
    """``values * factor`` rounded to an integer, ties to even, from the exact product: its float and that
    float's rounding error (Dekker's two-product), compared with the half between two integers."""
    product = values * factor
    value_high, value_low = _split(values)
    factor_high, factor_low = _split(np.full_like(values, factor))
    error = ((value_high * factor_high - product) + value_high * factor_low + value_low * factor_high) + (
        value_low * factor_low)
    below = np.floor(product)
    beyond_half = (product - (below + 0.5)) + error  # both exact: the sum has the sign of the exact difference
    return below + (beyond_half > 0) + ((beyond_half == 0) & (below % 2 == 1))


def _split(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each double as two of 26 bits or fewer (Veltkamp), whose products are exact."""
    scaled = values * 134217729.0  # 2**27 + 1
    high = scaled - (scaled - values)
    return high, values - high


def decimal_rows(values: np.ndarray, decimals: int, width: int) -> pa.LargeStringArray | None:
    """Rows of ``width`` values (row after row in ``values``, float64, NaN: missing) -> each row's texts
    joined by commas: a value rounded to ``decimals`` (at most six), trailing zeros and a bare point dropped,
    ``-0`` as ``0``; a missing value ``N/A``. None: a value this cannot print (see :func:`scaled_integers`).
    Worked ``PIECE_VALUES`` values at a time: the temporaries take about 160 bytes a value."""
    rows = max(1, PIECE_VALUES // max(width, 1))
    if len(values) <= rows * width:
        return _decimal_rows(values, decimals, width)
    pieces = []
    for start in range(0, len(values), rows * width):
        piece = _decimal_rows(values[start : start + rows * width], decimals, width)
        if piece is None:
            return None
        pieces.append(piece)
    return pa.concat_arrays(pieces)


def _decimal_rows(values: np.ndarray, decimals: int, width: int) -> pa.LargeStringArray | None:
    integers = scaled_integers(values, decimals)
    if integers is None:
        return None
    missing = np.isnan(values)
    negative = integers < 0
    whole, fraction = np.divmod(np.abs(integers), 10**decimals)
    whole_chunks = max(1, -(-len(str(int(whole.max(initial=0)))) // 4))
    digits = 4 * whole_chunks
    length = np.searchsorted(10 ** np.arange(1, digits, dtype=np.int64), whole, side="right") + 1
    decimal_words = -(-decimals // 3)
    fraction *= 10 ** (3 * decimal_words - decimals)  # three decimals a word
    groups = [fraction // 1000 ** (decimal_words - 1 - word) % 1000 for word in range(decimal_words)]
    kept = np.zeros(len(values), dtype=np.int64)  # decimals left once trailing zeros are dropped
    for word, group in enumerate(groups):
        kept = np.where(group != 0, 3 * word + _KEPT_OF_THREE[group], kept)
    code = (negative * digits + length) * (decimals + 1) + kept
    words = [np.full(len(values), _LEAD, dtype=_WORD)]
    for chunk in reversed(range(whole_chunks)):
        words.append(_WHOLE_CHUNK[whole // 10 ** (4 * chunk) % 10_000])
    words += [(_FIRST_DECIMALS if word == 0 else _NEXT_DECIMALS)[group] for word, group in enumerate(groups)]
    masks = _layout_masks(whole_chunks, decimals)
    if missing.any():
        code[missing] = len(masks) - 1
        words[1 + whole_chunks][missing] = _MISSING
    cell = masks.shape[1]
    used = masks.view(f"V{cell}").ravel()[code].view(bool)
    used[2 :: width * cell] = False  # no comma before a row's first value
    row_bytes = masks.sum(axis=1)[code].reshape(-1, width).sum(axis=1) - 1
    offsets = np.zeros(len(row_bytes) + 1, dtype=np.int64)
    np.cumsum(row_bytes, out=offsets[1:])
    data = np.compress(used, np.stack(words, axis=1).view(np.uint8).ravel())
    return pa.LargeStringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data))
