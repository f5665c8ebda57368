"""Rendering results for the terminal (tables) and files (CSV, JSON, Parquet)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import click

from evosyn.storage import atomic

if TYPE_CHECKING:  # pyarrow costs ~0.2 s to import: `evosyn --help`, the table printers and `query` do without it
    import pyarrow as pa

    from evosyn.storage.catalog import Rows


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(str(col))
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    Console(width=200).print(table)


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
