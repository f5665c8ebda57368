"""A sweep's rerun skips the cells finished in the store: asked of the store's location (an s3:// prefix too),
never of this machine's local folder of an S3 store."""
from __future__ import annotations

import pytest

from evosyn.config import RunConfig
from evosyn.flows import sweep_workers
from evosyn.storage.records import Run
from evosyn.storage.store import Store
from tests.s3server import s3_env, s3_root, s3_server  # noqa: F401 (fixtures)


def _cfg(root: str) -> RunConfig:
    return RunConfig.model_validate({"domain": "airline", "rounds": 1, "budget": 8, "store": {"root": root}})


def _finish(location: str, run_id: str, status: str = "finished") -> None:
    Store(location).write([Run(run_id=run_id, round=0, domain="airline", rounds=1, budget=8, status=status)],
                          f"run-{status}")


def _cases(location: str) -> None:
    cfg = _cfg(location)
    assert not sweep_workers._finished(cfg, "r-none")  # no store yet
    _finish(location, "r-done")
    _finish(location, "r-running", "running")
    assert sweep_workers._finished(cfg, "r-done")
    assert not sweep_workers._finished(cfg, "r-running")
    assert not sweep_workers._finished(cfg, "r-other")


def test_a_local_store(tmp_path):
    _cases(str(tmp_path / "store"))


@pytest.mark.slow
def test_an_s3_store(s3_root):  # noqa: F811
    _cases(s3_root)
