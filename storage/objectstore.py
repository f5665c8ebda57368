"""A store root on S3-compatible object storage: ``s3://bucket/prefix``.

The tables and the completion markers live under the prefix, one object per chunk file: each is written
by one PUT of its whole bytes (``put``), so a reader sees the old object or the new one, never a torn one,
and no rename is needed (S3 has none). Paths are ``UPath`` objects (universal_pathlib over s3fs), so the
store's code walks them as it walks local folders (``/``, ``glob``, ``is_file``, ``read_text``, ``unlink``).

Credentials, region and endpoint come from the standard AWS settings, read by botocore: the variables
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, ``AWS_DEFAULT_REGION`` (or
``AWS_REGION``), ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` (an S3-compatible server such as SeaweedFS
or MinIO), ``AWS_PROFILE`` and the shared ``~/.aws`` files.

What is not shared goes to a local folder of this machine (``local_home``): the LLM reply cache, the
trained models (retrained from the store's rows where a round needs one that is missing), reports, the
default MLflow database and Prefect's home. docs/guides/store-on-s3.md says what that means for a team.

A server that stops answering: each request is retried by botocore (its standard mode) for at most
``EVOSYN_SERVICE_RETRY_S`` seconds of waits (storage/outages.py), then fails; ``unreachable`` tells such a failure
from any other, and ``down_line`` says it in one line.
"""
from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path
from typing import Any

from evosyn.storage import outages

SCHEME = "s3://"
WRITTEN_KEY = "evosyn-written-ns"  # object metadata: when its writer put it (the writer's clock, in ns)
READ_TIMEOUT_S = 15.0  # s3fs's default: a server that sends nothing for this long is retried, then given up
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


class S3Error(RuntimeError):
    """An ``s3://`` root that cannot be used: one line naming it and what to set."""


class S3Unreachable(S3Error):
    """The object store does not answer (refused, timed out, 5xx) after its retries: one line."""


def is_remote(root: object) -> bool:
    return str(root).startswith(SCHEME)


def split(uri: str) -> tuple[str, str]:
    """(bucket, prefix) of ``s3://bucket/prefix``; the prefix has no leading or trailing ``/``."""
    bucket, _, prefix = str(uri)[len(SCHEME):].partition("/")
    if not _BUCKET.match(bucket):
        raise S3Error(f"store root {uri}: {bucket!r} is not an S3 bucket name (3-63 lower-case letters, digits, "
                      "'.', '-')")
    return bucket, prefix.strip("/")


def normalize(uri: str) -> str:
    bucket, prefix = split(uri)
    return f"{SCHEME}{bucket}/{prefix}" if prefix else f"{SCHEME}{bucket}"


def _endpoint() -> str | None:
    # botocore reads these too (and a profile's `endpoint_url`); passed on explicitly so that the endpoint is the
    # same whichever botocore the environment has (older ones read neither variable)
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def storage_options() -> dict[str, Any]:
    """s3fs options for a store: no listings cache (other processes and machines write the same prefix, and a
    cached listing would hide their chunks), the AWS settings otherwise as botocore resolves them."""
    opts: dict[str, Any] = {"use_listings_cache": False}
    endpoint = _endpoint()
    if endpoint:
        opts["endpoint_url"] = endpoint
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        opts["client_kwargs"] = {"region_name": region}
    # a server that stopped answering is given up within the retry budget: botocore retries a request (standard
    # mode: connection errors, timeouts, 5xx, throttling) with waits that add up to at most the budget, each try
    # connecting for at most a fraction of it (s3fs itself retries none of these)
    try:
        budget = outages.retry_s()
    except outages.OutageSettingError as exc:
        raise S3Error(str(exc)) from None
    tries = outages.attempts(budget)
    opts["config_kwargs"] = {"retries": {"mode": "standard", "total_max_attempts": tries},
                             "connect_timeout": min(5.0, budget / tries), "read_timeout": READ_TIMEOUT_S}
    return opts


def unreachable(exc: BaseException) -> BaseException | None:
    """The error in ``exc``'s chain that says the object store did not answer (a refused or timed-out connection,
    a 5xx after the retries); None when none does (a missing object, a refused condition, a bad key)."""
    try:
        from botocore.exceptions import ClientError, HTTPClientError
        from botocore.exceptions import ConnectionError as BotoConnectionError
    except ImportError:  # no s3 extra: no object store to lose
        return None
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (BotoConnectionError, HTTPClientError)):
            return exc
        if isinstance(exc, ClientError) and \
                (exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0) >= 500:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def endpoint_of(err: BaseException) -> str:
    """``scheme://host:port`` of the endpoint a botocore error names, else the configured one."""
    from urllib.parse import urlsplit

    url = (getattr(err, "kwargs", None) or {}).get("endpoint_url") or _endpoint() or ""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else "AWS S3"


def down_line(location: str, exc: BaseException, *, started: bool = True) -> str | None:
    """One line for a store whose object store stopped answering (``started``: it answered before, as in a run)
    or cannot be reached; None when ``exc`` is no such failure."""
    err = unreachable(exc)
    if err is None:
        return None
    bucket = split(location)[0]
    if isinstance(getattr(err, "response", None), dict):  # a 5xx: its status and S3's error code
        what = f"HTTP {err.response.get('ResponseMetadata', {}).get('HTTPStatusCode')} " \
               f"{err.response.get('Error', {}).get('Code', '')}".strip()
    else:  # a connection that failed: what botocore says, less the URL it tried (the endpoint and a key)
        what = str(err).split(': "', 1)[0].split("\n", 1)[0][:160]
    state = "stopped answering" if started else "cannot be reached"
    return (f"the object store at {endpoint_of(err)} (bucket {bucket}) {state} ({type(err).__name__}: {what}) "
            f"after its retries (up to {outages.retry_s():g} s: {outages.RETRY_ENV})")


def bucket_exists(path, bucket: str) -> bool:
    """Whether ``bucket`` exists (HEAD of the bucket); ``S3Unreachable`` when the object store does not answer (s3fs's
    ``exists`` would say False, which reads as a missing bucket)."""
    try:
        path.fs.call_s3("head_bucket", Bucket=bucket)
    except FileNotFoundError:
        return False
    except Exception as exc:
        line = down_line(f"{SCHEME}{bucket}", exc, started=False)
        if line is None:
            raise
        raise S3Unreachable(f"{line}; start it, or check AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL") from None
    return True


def remote_path(uri: str):
    """The ``UPath`` of ``uri`` (its filesystem: s3fs with ``storage_options``)."""
    try:
        from upath import UPath
    except ImportError:  # the [s3] extra
        raise S3Error(f"store root {uri}: an s3:// root needs the s3 extra (pip install 'evosyn[s3]')") from None
    return UPath(normalize(uri), **storage_options())


def local_home(uri: str) -> Path:
    """This machine's folder for what an S3 store does not share: ``<base>/<bucket>/<prefix>``, the base
    ``EVOSYN_LOCAL_HOME`` or ``~/.cache/evosyn/s3``. One folder per store: its models and summaries are named by
    run id, so two stores that shared one would lend each other a run's model."""
    bucket, prefix = split(uri)
    return Path(os.environ.get("EVOSYN_LOCAL_HOME") or "~/.cache/evosyn/s3").expanduser() / bucket / prefix


def source(path):
    """What pyarrow reads a chunk file from: its path, or an object's bytes (one GET: a chunk is small, and
    pyarrow's reads of a footer, then of each column, would be a request each)."""
    if not is_object(path):
        return path
    import pyarrow as pa

    return pa.BufferReader(path.read_bytes())


def is_object(path) -> bool:
    """Whether ``path`` names an object of an ``s3://`` store (a UPath) rather than a local file."""
    return not isinstance(path, Path) or getattr(path, "protocol", "") not in ("", "file", "local")


def key_of(path) -> str:
    """``bucket/key`` of a UPath (what s3fs calls a path)."""
    return path.path.rstrip("/")


def put(path, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> str:
    """Write ``data`` as the whole object at ``path`` in one PUT; its ETag.

    ``if_none_match``: only if no object is there (S3's conditional create); ``if_match``: only if the object
    there has this ETag. A refused condition raises ``FileExistsError``. The object's metadata records when it
    was written, by the writer's clock: a completion marker vouches only for the files its stage wrote
    (storage/chunks.py), and S3's Last-Modified is in whole seconds, by the server's clock.
    """
    kwargs: dict[str, Any] = {"Metadata": {WRITTEN_KEY: str(time.time_ns())}}
    if if_none_match:
        kwargs["IfNoneMatch"] = "*"
    if if_match is not None:
        kwargs["IfMatch"] = if_match
    bucket, _, key = key_of(path).partition("/")
    try:
        out = path.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, **kwargs)
    except OSError as exc:
        if _refused(exc):
            raise FileExistsError(f"{path}: the object changed (conditional write refused)") from None
        raise
    return out["ETag"]


def _refused(exc: BaseException) -> bool:
    """Whether an s3fs error is S3's refused condition (412 Precondition Failed, or 409 while another conditional
    write of the key is in flight): s3fs raises an OSError from botocore's ClientError, which has the code."""
    cause = exc.__cause__ or exc.__context__
    response = getattr(cause, "response", None) or {}
    code = response.get("Error", {}).get("Code")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412)


def head(path) -> dict[str, Any] | None:
    """The object's ETag, size, written-at time and body-less metadata; None when there is none."""
    bucket, _, key = key_of(path).partition("/")
    try:
        out = path.fs.call_s3("head_object", Bucket=bucket, Key=key)
    except FileNotFoundError:
        return None
    return {"etag": out["ETag"], "size": out["ContentLength"], "metadata": out.get("Metadata") or {},
            "last_modified": out["LastModified"]}


def written_ns(path) -> int:
    """When the object was put (``put``'s metadata; an object written by another tool: its Last-Modified)."""
    info = head(path)
    if info is None:
        raise FileNotFoundError(str(path))
    stamp = info["metadata"].get(WRITTEN_KEY)
    return int(stamp) if stamp else int(info["last_modified"].timestamp() * 1e9)


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def remove_tree(path) -> None:
    """Every object under ``path`` (a run's partitions), if any."""
    try:
        path.fs.rm(key_of(path), recursive=True)
    except FileNotFoundError:
        pass


def has_objects(path) -> bool:
    """Whether anything is stored under ``path`` (an S3 "folder" exists only through its objects)."""
    try:
        return bool(path.fs.find(key_of(path), maxdepth=None, withdirs=False, detail=False))
    except FileNotFoundError:
        return False
