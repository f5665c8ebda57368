"""Arms of one seed start from the same round 1 (issue 13): their round-1 rows are identical (slow)."""
import pytest

from evosyn.storage.digest import normalized_rows
from evosyn.storage.store import Store
from tests.flows.test_run import run

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

pytestmark = pytest.mark.slow

ROUND_ONE = ("directions", "blueprints", "tasks", "trajectories", "verdicts", "sft_examples", "evaluations")


def test_evosyn_and_static_of_one_seed_have_the_same_round_one(tmp_path):
    home = tmp_path / "h"
    for arm in ("evosyn", "static"):
        cfg = tmp_path / f"{arm}.yaml"
        cfg.write_text(f"domain: airline\nrounds: 1\nbudget: 24\nseed: 3\ntest_size: 20\nchunk_size: 6\narm: {arm}\n")
        run(home, "run", "--config", str(cfg), "--quiet")
    store = Store(home, create=False)
    evosyn, static = (next(r for r in store.runs() if f"-{arm}-" in r) for arm in ("evosyn", "static"))
    # beyond them, evosyn's Reflector scored its learner on the round's probe set: those rows are its own
    probed = {e.trajectory_id for e in store.read_records("evaluations", run_id=evosyn) if e.task_set == "probe"}
    assert probed
    for table in ROUND_ONE:  # run ids are replaced by a placeholder; every id is hashed from content
        rows = [r for r in normalized_rows(store, table, evosyn)
                if '"task_set":"probe"' not in r and not any(f'"trajectory_id":"{t}"' in r for t in probed)]
        assert rows and rows == normalized_rows(store, table, static), table
