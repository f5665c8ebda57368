"""A lease read while a rival replaces the lock object (two first runs of one domain on a fresh S3 store, racing
for the test set's lock): s3fs says FileExpired when the object changed between its HEAD and its GET; that is a
race lost, never an error of the run (a real SeaweedFS)."""
from __future__ import annotations

import threading

import pytest

from evosyn.storage import leases, objectstore
from tests.s3server import s3_env, s3_root, s3_server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow


def test_a_lease_replaced_while_it_is_read_reads_as_a_lost_race(s3_root):  # noqa: F811
    path = objectstore.remote_path(f"{s3_root}/locks/testset.lock")
    objectstore.put(path, leases._body("first"))
    stop, errors = threading.Event(), []

    def rival() -> None:  # a second taker rewriting the lock as fast as the server takes it
        n = 0
        while not stop.is_set():
            n += 1
            objectstore.put(path, leases._body(f"rival-{n}") + b" " * (n % 7))

    t = threading.Thread(target=rival, daemon=True)
    t.start()
    try:
        for _ in range(400):
            try:
                found = leases._read(path)
            except Exception as exc:  # noqa: BLE001 (what the run would have died of)
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            assert found is None or "token" in found[0]
    finally:
        stop.set()
        t.join()
    assert not errors, f"{len(errors)} of 400 reads failed: {errors[:3]}"
