"""Live progress of a run on the terminal: the stage events of ``evosyn.tasks.progress``, drawn with ``rich``.

The stages emit ``StageEvent`` objects; a round's Prefect tasks (threads of the
round's task runner) hand them to ``evosyn.tasks.engine.publish``, which passes each to
whoever ``listening`` registered for its run id in this process (these renderers).

Two renderers, both callables taking a message (``str``) or a ``StageEvent``:
``LiveRenderer`` (a terminal: a bar per running stage, items done / total,
kept and rejected, elapsed and remaining; each finished stage stays as a line)
and ``LineRenderer`` (not a terminal, or ``--quiet``: exactly one plain line per
finished stage, no escape codes). Both are safe to call from several threads.
"""
from __future__ import annotations

import sys
import threading
from typing import IO, Self

from evosyn.tasks.progress import StageEvent, StageState, Tally, counts


def stage_label(st: StageState, with_run: bool) -> str:
    return f"{st.run_id} round {st.round}" if with_run else f"round {st.round}"


class LineRenderer:
    """One plain line per finished stage (``round 1 verify: 47/50 kept; rejected: policy 2, state 1 (3.1s)``)."""

    def __init__(self, stream: IO[str] | None = None, with_run: bool = False):
        self.stream = stream or sys.stderr
        self.with_run = with_run
        self.tally = Tally()
        self._lock = threading.Lock()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stream.flush()

    def _write(self, text: str) -> None:
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def __call__(self, item: str | StageEvent) -> None:
        if isinstance(item, str):
            self._write(item)
            return
        for st in self.tally.add(item):
            self._write(f"{stage_label(st, self.with_run)} {st.line()} ({st.elapsed:.1f}s)")


class LiveRenderer:
    """A ``rich`` progress display on a terminal: a bar per running stage; a finished stage becomes a line."""

    def __init__(self, console=None, with_run: bool = False):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = console or Console(stderr=True)
        self.with_run = with_run
        self.tally = Tally()
        self._lock = threading.Lock()
        self._bars: dict[tuple[str, int, str], int] = {}
        # narrow enough for an 80-column terminal
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=12),
                                 MofNCompleteColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                 TextColumn("eta"), TimeRemainingColumn(), console=self.console, transient=True)

    def __enter__(self) -> Self:
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def __call__(self, item: str | StageEvent) -> None:
        with self._lock:
            if isinstance(item, str):
                self.progress.console.print(item, markup=False, highlight=False)
                return
            finished = self.tally.add(item)
            for st in self.tally.snapshot():
                self._draw(st)
            for st in finished:
                bar = self._bars.pop((st.run_id, st.round, st.stage), None)
                if bar is not None:
                    self.progress.remove_task(bar)
                self.progress.console.print(f"{stage_label(st, self.with_run)} {st.line()} ({st.elapsed:.1f}s)",
                                            markup=False, highlight=False)

    def _draw(self, st: StageState) -> None:
        if st.finished or st.started is None:
            return
        key = (st.run_id, st.round, st.stage)
        kept, rejected = ("ok", "failed") if st.stage.startswith("evaluate") else ("kept", "rejected")
        info = f"{kept} {st.kept}"
        if st.rejected:  # by reason where the terminal has room for them, else the count (the line has them)
            wide = self.console.width >= 110
            info += f", {rejected}: {counts(st.rejected, limit=2)}" if wide else \
                f", {rejected} {sum(st.rejected.values())}"
        total = st.total if st.total_final else None  # a total still growing: no bar length yet
        if key not in self._bars:
            bar = self.progress.add_task(f"{stage_label(st, self.with_run)} {st.stage}", total=total,
                                         completed=st.done, info=info)
            # the bar's clock (rich's, time.monotonic like the tally's) starts when the stage's first call did
            next(t for t in self.progress.tasks if t.id == bar).start_time = st.started
            self._bars[key] = bar
        else:
            self.progress.update(self._bars[key], total=total, completed=st.done, info=info)


def renderer(quiet: bool = False, with_run: bool = False, stream: IO[str] | None = None):
    """The live display on a terminal (stderr), plain lines otherwise or when ``quiet``."""
    from rich.console import Console

    console = Console(stderr=True) if stream is None else Console(file=stream)
    if quiet or not console.is_terminal or console.is_dumb_terminal:
        return LineRenderer(stream, with_run)
    return LiveRenderer(console, with_run)
