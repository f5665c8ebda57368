"""The process `evosyn bench run` starts: the `evosyn` command line, with its store and tracking calls timed.

``python -m evosyn.benchmarks.run_child [evosyn arguments]`` runs exactly what ``evosyn [arguments]`` runs. With
``EVOSYN_TIMING`` set (tasks/timing.py) it also marks when the interpreter was up and when the command's
modules were imported, times every public call of ``Store`` (Parquet writes and reads) and ``Tracker``
(MLflow) as ``own`` spans, and, once the process is done (after Prefect has stopped its temporary
server), writes the spans with this process's resource usage to the JSON file that variable names.
"""
from __future__ import annotations

import atexit
import functools
import resource
import sys
import time
import types

from evosyn.tasks import timing

# wrapped: the calls that do the I/O (not the path helpers, which are part of them)
STORE_CALLS = ("write", "read", "read_records", "read_chunk", "count", "has_chunk", "mark_complete", "is_complete",
               "files", "delete_run", "remove_chunk", "runs")


def _usage() -> dict:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu_self": me.ru_utime + me.ru_stime, "cpu_children": kids.ru_utime + kids.ru_stime,
            "maxrss_kb": me.ru_maxrss, "children_maxrss_kb": kids.ru_maxrss}


def _dump() -> None:
    timing.dump(usage=_usage(), exit_at=time.perf_counter())


def _timed(cls: type, names, prefix: str) -> None:
    for name in names:
        fn = vars(cls).get(name)
        if not isinstance(fn, types.FunctionType):  # a property or static method stays as it is
            continue

        @functools.wraps(fn)
        def wrapper(*args, __fn=fn, __label=f"{prefix}.{name}", **kwargs):
            with timing.span("own", __label):
                return __fn(*args, **kwargs)
        setattr(cls, name, wrapper)


def instrument() -> None:
    from evosyn.storage.store import Store
    from evosyn.storage.tracking import Tracker

    _timed(Store, STORE_CALLS, "store")
    _timed(Tracker, ["__init__"] + [n for n in vars(Tracker) if not n.startswith("_")], "tracking")


def main(argv: list[str]) -> None:
    # registered before anything imports Prefect: atexit runs it last, after the temporary server has stopped
    atexit.register(_dump)
    timing.mark("interpreter")
    import evosyn.flows.cli as cli
    import evosyn.flows.cli_run as cli_run

    timing.mark("cli imported")
    run_imports = cli_run.import_run_flow

    def import_run_flow() -> None:  # what `evosyn run` imports while its Prefect server starts, then the timers
        with timing.span("startup", "run imports"):
            run_imports()
        instrument()
    cli_run.import_run_flow = import_run_flow
    sys.argv = ["evosyn", *argv]
    try:
        cli.run()
    finally:
        timing.mark("command returned")  # what follows is the interpreter's exit: Prefect's drains, the server's stop


if __name__ == "__main__":
    main(sys.argv[1:])
