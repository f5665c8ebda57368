"""Offline, quiet defaults for the libraries EvoSyn drives.

Set before Prefect, MLflow or litellm are imported anywhere in the process, so
that no run ever phones home. Values already set by the user win.
"""
from __future__ import annotations

import os

OFFLINE_DEFAULTS: dict[str, str] = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    # INFO reaches the Prefect API (the stage lines of a flow run's logs), the console shows WARNING and up
    "PREFECT_LOGGING_LEVEL": "INFO",
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


APPLIED: set[str] = set()  # the defaults this process set itself (the user had not): a push may lift HF_HUB_OFFLINE


def apply_offline_defaults() -> None:
    for key, value in OFFLINE_DEFAULTS.items():
        if key not in os.environ:
            os.environ[key] = value
            APPLIED.add(key)


apply_offline_defaults()
