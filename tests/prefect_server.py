"""One Prefect server per test process, for the test modules that run many flows.

Every `evosyn run` without ``PREFECT_API_URL`` starts a temporary Prefect server of its own (flows/prefect_api.py),
which costs seconds of CPU on each run. A module that runs many flows and does not test that start says
``SHARED_PREFECT_API = True``: its tests (and the processes they start) then talk to one server of this test
process, started on first use with the same settings as a temporary one, as a user's runs talk to the server of
`evosyn up`. The tests of the temporary server, of `evosyn up` and of a fresh machine leave it out.
The server is stopped at the end of the session and checked gone, also after a failing test.
"""
from __future__ import annotations

import pytest

from tests.prefect_home import PREFECT_HOME

SHARED = "SHARED_PREFECT_API"


def _refresh() -> None:
    """Prefect's settings of this process reloaded (when already loaded), to see ``PREFECT_API_URL`` as it is now."""
    import sys

    if "prefect.context" in sys.modules:
        import prefect.context

        prefect.context.refresh_global_settings_context()


@pytest.fixture(scope="session")
def prefect_server():
    """The API URL of this test process's Prefect server (its database in the tests' shared PREFECT_HOME)."""
    from evosyn.agents.servers import alive
    from evosyn.flows.prefect_api import start_temporary

    # start_temporary points PREFECT_API_URL at the server it starts: undone here, each module opts in
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PREFECT_HOME", PREFECT_HOME)
        env.delenv("PREFECT_API_URL", raising=False)
        server = start_temporary((300.0, 300.0))
    _refresh()
    try:
        yield server.api
    finally:
        server.stop()
        assert not alive(server.proc.pid), f"the shared Prefect server (pid {server.proc.pid}) is still running"


def _runs_flows(request) -> bool:
    """Whether the module asks for the shared server and any of its selected tests is a slow one (the fast
    loop's tests of such a module run no flow: they never start it)."""
    if not getattr(request.module, SHARED, False):
        return False
    return any(item.module is request.module and item.get_closest_marker("slow") for item in request.session.items)


@pytest.fixture(scope="module", autouse=True)
def _shared_prefect_api(request):
    if not _runs_flows(request):
        yield
        return
    api = request.getfixturevalue("prefect_server")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PREFECT_API_URL", api)
        _refresh()
        yield
    _refresh()
