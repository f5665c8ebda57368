"""Rendering results for the terminal (tables) and files (CSV, JSON, Parquet)."""
from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import click

from evosyn.storage import atomic

if TYPE_CHECKING:  # pyarrow costs ~0.2 s to import: `evosyn --help`, the table printers and `query` do without it
    import pyarrow as pa

    from evosyn.storage.catalog import Rows


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A table of data for the terminal. Every title, heading and cell goes in as ``rich.text.Text``, never as
    markup: a rule code such as ``[late_cancellation_fee]`` (or a query's ``[1, 2]``) prints as itself.

    On a terminal (or with ``COLUMNS`` set) the table fits its width: a column of text wraps within it, a column
    of single words (ids, numbers) stays whole, a word wider than its column folds; nothing is cut. Written to a
    pipe or a file without ``COLUMNS``, each row stays whole on one line (for grep). The title is its own line
    above the table, so it is never folded to the table's width."""
    from rich.table import Table
    from rich.text import Text

    cells = [["" if v is None else str(v) for v in row] for row in rows]
    fits = bool(os.environ.get("COLUMNS")) or sys.stdout.isatty()  # a terminal's width to fit, or COLUMNS
    table = Table(show_lines=False)
    floor = 1  # the narrowest the table gets on a terminal: its left border
    for n, col in enumerate(columns):
        column, heading = [row[n] for row in cells if n < len(row)], str(col)
        widest = max([cell_len(w) for c in [heading, *column] for w in c.split()] or [1])
        if all(" " not in c and "\n" not in c and cell_len(c) <= WHOLE for c in column):
            # single words (ids, numbers): kept whole, the heading wrapped to them; the columns of text make room
            if fits:
                heading = "\n".join(textwrap.wrap(heading, widest, break_long_words=False)) or heading
            table.add_column(Text(heading), overflow="fold", no_wrap=True)
            floor += 3 + widest  # 3: its padding and border
        else:
            table.add_column(Text(heading), overflow="fold")
            floor += 3 + min(widest, WRAPPED_MIN)
    for row in cells:
        table.add_row(*map(Text, row))
    console = _console(table, title, floor if fits else None)
    if title is not None:
        console.print(Text(title))
    console.print(table)


WRAPPED_MIN = 12  # the narrowest a column of text gets before the table runs past the terminal's edge
WHOLE = 64  # the widest word a column keeps whole (a test set's run id: 50); a wider one folds


def cell_len(text: str) -> int:
    from rich.cells import cell_len as width

    return width(text)


def _console(table, title: str | None, floor: int | None):
    """A terminal's console (rich reads its width, or ``COLUMNS``), never narrower than ``floor``: a table of many
    columns on a narrow terminal runs past its edge rather than squeezing every column to nothing. ``floor``
    None (a pipe, a file): one as wide as the widest row."""
    from rich.console import Console

    if floor is not None:
        return Console(width=max(Console().width, floor))
    widest = Console(width=1_000_000).measure(table).maximum
    return Console(width=max(widest, cell_len(title or ""), 1))


def write_rows(result: Rows, fmt: str, output: Path | None, limit: int = 50) -> None:
    """A result as a table (its first ``limit`` rows) or JSON lines (all of them: ``result`` holds them all)."""
    if fmt == "table":
        print_table(None, result.columns, result.rows[:limit])
        if result.num_rows > limit:
            click.echo(f"({result.num_rows} rows, first {limit} shown)")
        return
    if fmt != "json":
        raise ValueError(f"write_rows writes table or json, not {fmt!r} (write_result writes every format)")
    text = "\n".join(json.dumps(dict(zip(result.columns, row)), default=str) for row in result.rows)
    if output:
        atomic.write_text(output, text + "\n")
    else:
        click.echo(text)


def write_result(result: pa.Table, fmt: str, output: Path | None, limit: int = 50) -> None:
    if fmt in ("table", "json"):
        from evosyn.storage.catalog import arrow_rows

        write_rows(arrow_rows(result, None if fmt == "json" else limit), fmt, output, limit)
        return
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with atomic.atomic_path(output) as tmp:
            pq.write_table(result, tmp)
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        result = csv_ready(result)
        if output:
            with atomic.atomic_path(output) as tmp:
                pacsv.write_csv(result, tmp)
        else:
            import io

            buf = io.BytesIO()
            pacsv.write_csv(result, buf)
            click.echo(buf.getvalue().decode(), nl=False)
        return
    click.echo(f"wrote {result.num_rows} rows to {output}")


def csv_ready(result: pa.Table) -> pa.Table:
    """The table with each column Arrow's CSV writer refuses as text: lists, structs, maps and intervals as JSON
    (maps as objects); bytes (BLOB, BIT) and extension types (e.g. DuckDB's VARINT) as their Python values' text,
    as ``--format json`` writes them; a null stays empty and every other column is kept as it is."""
    import pyarrow as pa

    columns = []
    for column in result.columns:
        t = column.type
        if isinstance(t, pa.BaseExtensionType) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
            column = pa.array([None if v is None else str(v) for v in column.to_pylist()], pa.string())
        elif pa.types.is_nested(t) or pa.types.is_interval(t):
            column = pa.array([None if v is None else json.dumps(v, default=str)
                               for v in column.to_pylist(maps_as_pydicts="lossy")], pa.string())
        columns.append(column)
    return pa.Table.from_arrays(columns, names=result.column_names)
