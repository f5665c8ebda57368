"""The Prefect home the subprocess and flow tests share: one migrated database per test process.

Migrating a fresh Prefect database costs seconds, so the tests that start Prefect's temporary server share
one home. Under pytest-xdist (the README's test command runs two workers) each worker gets its own: two
servers on one SQLite file would take turns (``evosyn.flows.prefect_api``), but a test that scans the home for a
leaked secret would read the other worker's journal files as they come and go.
"""
from __future__ import annotations

import os

_WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ... under xdist; unset in a serial run
PREFECT_HOME = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                            f"evosyn-test-prefect-{os.getuid()}" + (f"-{_WORKER}" if _WORKER else ""))
