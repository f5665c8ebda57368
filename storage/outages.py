"""How long a service that stopped answering is retried before a command gives up on it.

``EVOSYN_SERVICE_RETRY_S`` (default 30 s) bounds the retries of one request to the object store of an ``s3://``
store (storage/objectstore.py: botocore's own retries, configured from it) and to the Prefect and MLflow servers
(flows/prefect_api.py: Prefect's client retries). A service that is still gone after that is one ``error:`` line
naming it and what to do; the run it stopped resumes with ``evosyn run --resume``.
"""
from __future__ import annotations

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

RETRY_ENV = "EVOSYN_SERVICE_RETRY_S"
DEFAULT_RETRY_S = 30.0
MAX_BACKOFF_S = 20.0  # botocore's standard retry mode: a retry waits a random part of min(2**i, 20) s


class ServiceSettings(BaseSettings):
    """The ``EVOSYN_SERVICE_*`` variables (read by pydantic-settings)."""

    model_config = SettingsConfigDict(env_prefix="EVOSYN_", case_sensitive=True, env_ignore_empty=True,
                                      extra="ignore")

    SERVICE_RETRY_S: float = Field(
        default=DEFAULT_RETRY_S, gt=0, le=3600,
        description="seconds a request to a service that stopped answering (the S3 object store, the Prefect and "
                    "MLflow servers) is retried before the command fails with one line; a run resumes with "
                    "--resume once the service is back")


class OutageSettingError(ValueError):
    """``EVOSYN_SERVICE_RETRY_S`` holds no usable number: one line naming it."""


def retry_s() -> float:
    try:
        return ServiceSettings().SERVICE_RETRY_S
    except ValidationError as exc:
        why = exc.errors()[0]["msg"]
        raise OutageSettingError(f"{RETRY_ENV}: {why} (seconds a stopped service is retried, e.g. 30)") from None


def attempts(budget: float) -> int:
    """Tries of one request whose waits between them add up to at most ``budget`` seconds, however botocore's
    jitter falls: the i-th retry waits at most min(2**i, 20) s."""
    n, waited = 1, 0.0
    while waited + min(2.0 ** (n - 1), MAX_BACKOFF_S) <= budget:
        waited += min(2.0 ** (n - 1), MAX_BACKOFF_S)
        n += 1
    return n
