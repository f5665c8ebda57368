"""The compile step: a run config checked against its pack once, and what the rounds need resolved."""
from __future__ import annotations

import pytest

from evosyn.config import RunConfig
from evosyn.envs.packs import default_domain, get_domain
from evosyn.flows.cli_app import UserError
from evosyn.flows.compile import compile_domain, compile_run
from evosyn.storage.userfiles import ConfigError
from evosyn.tasks import testset


def test_a_run_is_resolved_once_with_its_test_sets():
    run = compile_run(RunConfig(domain="", test_size=12))
    env = get_domain(default_domain())
    assert run.env is env and run.pack is env.pack and run.cfg.domain == run.name == env.name
    assert run.test_sets == {k: testset.test_set_run_id(env, n=12, kind=k) for k in testset.KINDS} and not run.skipped
    assert run.llm_roles == {}  # every role embedded


def test_each_bad_field_is_one_line_before_any_work(tmp_path):
    with pytest.raises(UserError, match=r"--domain bank: unknown domain \(known domains: .*airline"):
        compile_run(RunConfig(domain="bank", store={"root": str(tmp_path / "s")}))
    with pytest.raises(ConfigError, match=r"^prior\.suppress\.turns: the airline generator does not control it"):
        compile_run(RunConfig(domain="airline", prior={"suppress": {"turns": {"yes": 0.2}}}))
    with pytest.raises(ConfigError, match=r"^initial_factors: the airline generator does not control 'turns'"):
        compile_run(RunConfig(domain="airline", initial_factors=["turns"]))
    assert not (tmp_path / "s").exists()  # nothing was created


def test_a_domain_option_resolves_to_its_environment():
    assert compile_domain("retail").env is get_domain("retail")
    with pytest.raises(UserError, match=r"^--from bank: unknown domain"):
        compile_domain("bank", "--from")
