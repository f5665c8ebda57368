"""`evosyn up --db local`'s own PostgreSQL (flows/local_postgres.py) as a recorded service: started into the
store root, its password kept private, its data kept across restarts, stopped by `down` and gone."""
from __future__ import annotations

import shutil
import stat

import pytest

from evosyn.flows.services import alive, database, down, family, load_state


@pytest.fixture
def reachable_root():
    """A store root the ``postgres`` account can reach when the tests run as root (pytest's are 0700)."""
    from tests.postgres_server import reachable_dir

    base = reachable_dir("evosyn-test-root-")
    yield base / "home"
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_a_root_of_its_own_keeps_postgres_until_down(reachable_root):
    from evosyn.storage import postgres

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
    # a later `up` without --db starts the root's own cluster again (a new port), with its data, not sqlite
    state = {}
    try:
        url = database(root, None, state, 120, said.append)
        pids = family({state["postgres"].pid}) | {state["postgres"].pid}
        with postgres.connect(url) as con:
            assert con.execute("SELECT count(*) FROM kept").fetchone() == (0,)
    finally:
        assert down(root, say=lambda s: None) == []
    assert not [p for p in pids if alive(p)]


def test_up_refuses_a_url_that_is_no_postgresql_one_naming_no_password(tmp_path):
    from click.testing import CliRunner

    from evosyn.flows.cli import main

    res = CliRunner().invoke(main, ["--home", str(tmp_path / "home"), "up", "--db",
                                    "mysql://team:hunter2-hunter2@db:3306/evosyn"])
    assert res.exit_code != 0 and "not a PostgreSQL URL" in res.output
    assert "hunter2-hunter2" not in res.output and "team:***@db:3306" in res.output
    assert not (tmp_path / "home" / "services.json").exists()


def test_up_with_a_refused_login_starts_nothing(pg_server, tmp_path):
    """A wrong password is one line, masked, before any server starts (nothing to stop, nothing recorded)."""
    from evosyn.flows.services import ServiceError, up
    from tests.flows.test_e2e_ui import free_ports

    wrong = pg_server.database().replace(pg_server.url.split(":")[2].split("@")[0], "wrong-password-42")
    with pytest.raises(ServiceError, match="password authentication failed") as err:
        up(tmp_path, tmp_path, *free_ports(2), db=wrong, say=lambda s: None)
    assert "wrong-password-42" not in str(err.value)
    assert load_state(tmp_path) == {} and not (tmp_path / "logs").exists()
