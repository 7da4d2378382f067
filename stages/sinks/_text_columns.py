"""msprof's number text made column-wise (polars expressions), exact as the per-value functions of _format.py.

µs cells come from integer nanoseconds by integer arithmetic, never through floats: ``us_text`` is
``_format.us`` and ``us_trimmed_text`` is ``_format.us_trimmed`` for a whole column at once.
"""

from __future__ import annotations

import polars as pl

from stages.sinks._format import NA


def us_text(ns: pl.Expr) -> pl.Expr:
    """Integer ns -> µs text with exactly three decimals ("1.234", "0.005", "-0.005"); null stays null."""
    magnitude = ns.abs()
    text = pl.concat_str([(magnitude // 1000).cast(pl.String), pl.lit("."),
                          (magnitude % 1000).cast(pl.String).str.zfill(3)])
    return pl.when(ns < 0).then(pl.lit("-") + text).otherwise(text)


def us_trimmed_text(ns: pl.Expr) -> pl.Expr:
    """Integer ns -> µs text, trailing zeros and a bare point dropped ("1.2", "10", "0")."""
    return us_text(ns).str.strip_chars_end("0").str.strip_chars_end(".")


def or_na(text: pl.Expr) -> pl.Expr:
    """A text cell, ``N/A`` where null."""
    return text.fill_null(pl.lit(NA))


def int_text(value: pl.Expr) -> pl.Expr:
    """An integer cell as ``str()`` prints it; null is ``None``, as ``str(None)``."""
    return value.cast(pl.String).fill_null(pl.lit("None"))


def int_or_na(value: pl.Expr) -> pl.Expr:
    """An integer cell, ``N/A`` where null."""
    return value.cast(pl.String).fill_null(pl.lit(NA))


def us_or_na(ns: pl.Expr) -> pl.Expr:
    """Integer ns -> µs text (``us_text``), ``N/A`` where null."""
    return us_text(ns).fill_null(pl.lit(NA))


def csv_text(text: pl.Expr) -> pl.Expr:
    """A text cell as ``_table.csv_cell`` writes it: TAB, CR and LF made blanks, quoted (quotes doubled) when it
    holds a comma or a quote."""
    blanked = text.str.replace_all(r"[\t\n\r]", " ")
    quoted = pl.concat_str([pl.lit('"'), blanked.str.replace_all('"', '""', literal=True), pl.lit('"')])
    return pl.when(text.str.contains(r'[,"]')).then(quoted).otherwise(blanked)

