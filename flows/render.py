"""Rendering results for the terminal (tables) and files (CSV, JSON, Parquet)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import click

from storage import atomic

if TYPE_CHECKING:  # pyarrow costs ~0.1 s to import: `evosyn --help` and the table printers do without it
    import pyarrow as pa


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(str(col))
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    Console(width=200).print(table)


def write_result(result: pa.Table, fmt: str, output: Path | None, limit: int = 50) -> None:
    if fmt == "table":
        rows = result.slice(0, limit).to_pylist()
        print_table(None, result.column_names, [list(r.values()) for r in rows])
        if result.num_rows > limit:
            click.echo(f"({result.num_rows} rows, first {limit} shown)")
        return
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with atomic.atomic_path(output) as tmp:
            pq.write_table(result, tmp)
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        if output:
            with atomic.atomic_path(output) as tmp:
                pacsv.write_csv(result, tmp)
        else:
            import io

            buf = io.BytesIO()
            pacsv.write_csv(result, buf)
            click.echo(buf.getvalue().decode(), nl=False)
        return
    elif fmt == "json":
        text = "\n".join(json.dumps(r, default=str) for r in result.to_pylist())
        if output:
            atomic.write_text(output, text + "\n")
        else:
            click.echo(text)
        return
    click.echo(f"wrote {result.num_rows} rows to {output}")
