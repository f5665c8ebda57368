"""The trial `evosyn envs check` runs a pack through (``evosyn.agents.pack_trial``): every tool once, official and
generated tasks' gold actions with the policy; each fault one line (the CLI's cases: tests/flows/test_cli_user_packs.py)."""
from __future__ import annotations

import pytest

from evosyn.agents.pack_trial import trial
from evosyn.envs.packs import get_domain


@pytest.fixture
def gym(tmp_path, user_registry):
    from evosyn.flows.cli_new_domain import write_pack

    folder = write_pack("gym_trial", tmp_path)
    user_registry(tmp_path)
    return folder


def errors(name: str) -> list[str]:
    return [f.line() for f in trial(get_domain(name)) if f.level == "error"]


def test_the_trial_passes_the_template_and_the_built_in_packs(gym):
    for name in ("gym_trial", "airline", "retail", "car_bench"):
        assert errors(name) == [], name


def test_a_read_tool_no_task_calls_is_still_called(gym):
    """`transfer_to_human_agents` is in no gold action of the template: only calling every tool finds it."""
    env_file = gym / "environment.py"
    env_file.write_text(env_file.read_text().replace('    return "Transfer successful"\n',
                                                     '    return "Transfer " + a.summary.count("x")\n'))
    assert [e.split(" at ")[0] for e in errors("gym_trial")] == [
        "tool transfer_to_human_agents: tool 'transfer_to_human_agents' raised TypeError"]
