"""A service a command uses that stopped answering (the store's object store, the Prefect API, the MLflow server),
said in one line; and the filter that keeps Prefect from logging, with a traceback, an error said so."""
from __future__ import annotations

import logging
import os


class NotLoggedTwice(logging.Filter):
    """Prefect logs a failed task and flow with a traceback; an error the CLI reports in one line is not logged."""

    def __init__(self, reported: tuple[type[BaseException], ...], outage=lambda exc: None):
        super().__init__()
        self.reported, self.names, self.outage = reported, tuple(t.__name__ for t in reported), outage
        self.dropped: set[str] = set()  # the text of each error not logged: Prefect's later state line repeats it
        self.down: str | None = None  # the first service outage a task met: the run's one line, whatever follows

    def filter(self, record: logging.LogRecord) -> bool:
        from evosyn.storage.store import as_store_fault

        exc = record.exc_info[1] if record.exc_info else None
        down = self.outage(exc) if exc is not None else None
        self.down = self.down or down
        if isinstance(exc, self.reported) or (exc is not None and (as_store_fault(exc) is not None
                                                                    or down is not None)):
            if len(str(exc)) >= 12:  # ("Finished in state Failed('... OSError: <its text>')": the same error)
                self.dropped.add(str(exc))
            return False
        prefect = record.name.startswith("prefect")
        if prefect and self.down is not None and record.levelno >= logging.ERROR:
            return False  # what the outage left behind (a task never run: "Run is in PENDING state") is not news
        said = record.getMessage()
        return not (prefect and any(n in said for n in (*self.names, *self.dropped)))


def service_down(exc: BaseException, location, tracking_uri: str | None) -> str | None:
    """One line for a service the command used that stopped answering after its retries (the store's object store,
    the Prefect API, the MLflow server); None for any other error."""
    from evosyn.flows.prefect_api import api_down_line
    from evosyn.storage.objectstore import down_line, is_remote
    from evosyn.storage.tracking import server_down_line

    return ((down_line(str(location), exc) if is_remote(location) else None) or api_down_line(exc)
            or server_down_line(tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", ""), exc))


def again(run_id: str | None) -> str:
    """What to do once a service is back: resume the run (or rerun the command: finished stages are kept)."""
    return (f"start it again, then rerun with `evosyn run --resume {run_id}`" if run_id else
            "start it again, then rerun the command (what finished is kept)")
