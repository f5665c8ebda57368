"""``evosyn.envs.pack_check``: what a pack lacks, as errors that stop a command and warnings about recorded facts."""
from __future__ import annotations

from pathlib import Path

import pytest

from evosyn.envs.pack_check import first_error, problems
from evosyn.envs.packs import get_pack

# the 4 settings a first try sets (issue: a pack that verified tasks but recorded "unknown" families, no
# tool-use patterns, no policy gating, and a user who called its member id a customer id)
MINIMAL = '''
from evosyn.envs.packs import DomainPack


class Pack(DomainPack):
    name = __package__.rpartition(".")[2]
    controllable = {"num_write": ["1", "2"]}

    def environment(self):
        from .environment import GymDomain

        return GymDomain()

    def task_builder(self, domain, prior):
        from .generator import Generator

        return Generator(domain, prior)
'''


@pytest.fixture
def pack_folder(tmp_path, user_registry) -> Path:
    from evosyn.flows.cli_new_domain import write_pack

    folder = write_pack("gym_check", tmp_path)
    user_registry(tmp_path)
    return folder


def lines(name: str, level: str) -> list[str]:
    return [f.line() for f in problems(get_pack(name), "check") if f.level == level]


def test_the_template_has_no_error_and_says_its_official_tasks_are_few(pack_folder):
    assert lines("gym_check", "error") == []
    assert lines("gym_check", "warning") == ["official tasks: only 2 with gold actions: the official-matched test "
                                             "set repeats their few cells"]


def test_defaults_that_change_recorded_facts_are_named(pack_folder):
    (pack_folder / "pack.py").write_text(MINIMAL)
    warned = {line.split(":")[0] for line in lines("gym_check", "warning")}
    assert {"family_by_tool", "focus_by_tool", "shape_values", "gated_prefixes", "identify_reads", "phrasing",
            "planner_rules.violable"} <= warned
    assert lines("gym_check", "error") == []
    assert first_error(get_pack("gym_check"), "run") is None  # warnings never stop a command


def test_refusals_the_generator_cannot_build_are_named(pack_folder):
    text = (pack_folder / "pack.py").read_text()
    (pack_folder / "pack.py").write_text(text.replace('violable={"book_class": ["booking_limit"]}',
                                                      'violable={"book_class": ["late_fee"], "renew": ["x"]}'))
    warned = lines("gym_check", "warning")
    assert "planner_rules.violable: names families ['renew'] that ontology.json's task_family lacks: their rules " \
           "are never planned" in warned
    assert any(w.startswith("planner_rules.violable: names rules ['late_fee', 'x']") for w in warned), warned


def test_errors_name_the_setting(pack_folder):
    text = (pack_folder / "pack.py").read_text()
    (pack_folder / "pack.py").write_text(text.replace("controllable = {", "controllable = {}\n    _c = {"))
    assert first_error(get_pack("gym_check"), "synth") is None  # a synthesis pass needs no controllable property
    assert first_error(get_pack("gym_check"), "run").startswith("controllable: empty")


def test_a_policy_module_without_check_write_is_an_error(pack_folder):
    (pack_folder / "policy.py").write_text("RULES = []\n")
    assert first_error(get_pack("gym_check"), "synth").startswith("policy.py: ")
    assert "check_write" in first_error(get_pack("gym_check"), "synth")


def test_few_or_no_official_tasks_are_said(pack_folder):
    env = pack_folder / "environment.py"
    env.write_text(env.read_text().replace("OFFICIAL = [", "OFFICIAL = []\n_UNUSED = ["))
    assert any(line.startswith("official tasks: none") for line in lines("gym_check", "warning"))


def test_maps_naming_unknown_tools_or_values_are_named(pack_folder):
    text = (pack_folder / "pack.py").read_text()
    (pack_folder / "pack.py").write_text(text.replace('family_by_tool = {"book_class": "book_class", ',
                                                      'family_by_tool = {"book_class": "booking", "enrol": "x", '))
    warned = lines("gym_check", "warning")
    assert any(w.startswith("family_by_tool: names ['enrol'], which are not write tools") for w in warned), warned
    assert any(w.startswith("family_by_tool: names ['booking', 'x'], which are not task_family values")
               for w in warned), warned
