"""agents/capacity.py: `evosyn envs check` measures how many distinct tasks a pack's generator builds (issue 59,
item 2): a smaller database, fewer distinct tasks, and the advice on database size above REPEAT_NOTE."""
from __future__ import annotations

from collections import Counter

from click.testing import CliRunner

from evosyn.agents.capacity import REPEAT_NOTE, SAMPLE, capacity, chao1
from evosyn.envs.packs import get_domain

MEMBERS = '''[("Ada", []), ("Ben", ["C1"]), ("Cleo", ["C1", "C2", "C4"]), ("Dev", []),
                                        ("Eli", ["C3"])]'''


def _packs(tmp_path, user_registry):
    """The template (5 members) and the same pack with one member: ``gym_big``, ``gym_small``."""
    from evosyn.flows.cli_new_domain import write_pack

    write_pack("gym_big", tmp_path / "packs")
    env = write_pack("gym_small", tmp_path / "packs") / "environment.py"
    text = env.read_text()
    assert MEMBERS in text
    env.write_text(text.replace(MEMBERS, '[("Ada", [])]'))
    user_registry(tmp_path / "packs")


def test_a_smaller_database_builds_fewer_distinct_tasks(tmp_path, user_registry):
    _packs(tmp_path, user_registry)
    big, small = capacity(get_domain("gym_big")), capacity(get_domain("gym_small"))
    assert big.built == SAMPLE and 0 < small.built < SAMPLE  # one member: many plans it cannot realize
    assert small.distinct_actions < big.distinct_actions <= big.distinct_tasks <= SAMPLE
    assert f"{small.built} tasks built from {SAMPLE} blueprints" in small.line()
    assert small.repeats > REPEAT_NOTE and small.estimate is not None and small.estimate >= small.distinct_actions
    assert "a larger database gives more distinct ones" in small.line()
    assert capacity(get_domain("gym_small")) == small  # seeded: the same count each time


def test_chao1():
    assert chao1(Counter("abc")) is None  # no repeat: nothing to extrapolate from
    # 3 seen once, 1 twice, 1 four times: 5 + 3 * 2 / (2 * 2)
    assert chao1(Counter("abcddeeee")) == 5 + 1.5


def test_envs_check_prints_the_estimate(tmp_path, user_registry):
    from evosyn.flows.cli import main

    _packs(tmp_path, user_registry)
    out = CliRunner().invoke(main, ["envs", "check", "gym_small"])
    assert out.exit_code == 0, out.output
    line = next(x for x in out.output.splitlines() if x.startswith("capacity: "))
    assert line == capacity(get_domain("gym_small")).line()
    assert f"blueprints of the initial space (seed 0): at least {capacity(get_domain('gym_small')).distinct_actions} " \
        "distinct by their gold actions" in line
