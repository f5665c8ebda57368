"""`evosyn up --db local`'s own PostgreSQL (flows/local_postgres.py) as a recorded service: started into the
store root, its password kept private, its data kept across restarts, stopped by `down` and gone."""
from __future__ import annotations

import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from flows.services import alive, database, down, family, load_state


@pytest.fixture
def reachable_root():
    """A store root the ``postgres`` account can reach when the tests run as root (pytest's are 0700)."""
    pytest.importorskip("psycopg")
    from flows import local_postgres

    try:
        local_postgres.bindir()
    except local_postgres.LocalPostgresError as exc:
        from tests.postgres_server import _require

        _require(str(exc))
    base = Path(tempfile.mkdtemp(prefix="evosyn-test-root-"))
    base.chmod(0o755)
    yield base / "home"
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_a_root_of_its_own_keeps_postgres_until_down(reachable_root):
    from storage import postgres

    root, said = reachable_root, []
    root.mkdir()
    state: dict = {}
    pids: set[int] = set()
    try:
        url = database(root, "local", state, 120, said.append)
        pid = state["postgres"].pid
        pids = family({pid}) | {pid}
        secret = root / "postgres" / "password"
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
        password = secret.read_text().strip()
        assert len(password) >= 24 and password in url
        recorded = load_state(root)["postgres"]
        assert recorded.url == postgres.masked(url) and password not in (root / "services.json").read_text()
        assert said == [f"postgres: started (pid {pid}) at {postgres.masked(url)}"]
        with postgres.connect(url) as con:  # the database exists; MLflow's schema is built in <name>_mlflow
            con.execute("CREATE TABLE kept (x int)")
        with postgres.connect(postgres.mlflow_url(url)) as con:
            assert con.execute("SELECT count(*) FROM experiments").fetchone()[0] >= 1
        # a second `up` finds it running and starts nothing
        again = {"postgres": recorded}
        assert database(root, None, again, 120, said.append) == url and again["postgres"].pid == pid
        assert said[-1].startswith(f"postgres: already running (pid {pid})")
    finally:
        assert down(root, say=lambda s: None) == []
    assert not [p for p in pids if alive(p)] and not family(pids)
    # started again (a new port): the cluster and its data are the same
    state = {}
    try:
        url = database(root, "local", state, 120, said.append)
        pids = family({state["postgres"].pid}) | {state["postgres"].pid}
        with postgres.connect(url) as con:
            assert con.execute("SELECT count(*) FROM kept").fetchone() == (0,)
    finally:
        assert down(root, say=lambda s: None) == []
    assert not [p for p in pids if alive(p)]
