"""A fault in a pack's own code, as one line naming its file and line (``evosyn.envs.pack_errors``)."""
from __future__ import annotations

import json

import pytest

from evosyn.envs import packs
from evosyn.envs.ontology import SpaceError, load_initial_space
from evosyn.envs.pack_errors import ToolFault, message, run_tool
from evosyn.envs.packs import get_domain, get_pack, known


@pytest.fixture
def gym(tmp_path, user_registry):
    from evosyn.flows.cli_new_domain import write_pack

    folder = write_pack("gym_fault", tmp_path)
    user_registry(tmp_path)
    return folder


def test_a_pack_that_exits_at_import_is_recorded_and_the_others_load(tmp_path, user_registry):
    (tmp_path / "quitter").mkdir()
    (tmp_path / "quitter" / "__init__.py").write_text("import sys\n\nsys.exit(3)\n")
    user_registry(tmp_path)
    assert "airline" in known()  # no SystemExit out of the registry
    assert packs.broken() == {"quitter": f"SystemExit at {tmp_path / 'quitter' / '__init__.py'}:3: the pack "
                                         "called sys.exit(3)"}
    with pytest.raises(packs.BrokenPack, match=r"SystemExit at .*quitter/__init__.py:3"):
        get_pack("quitter")


def test_a_syntax_error_names_its_file_and_line(tmp_path, user_registry):
    (tmp_path / "typo").mkdir()
    (tmp_path / "typo" / "__init__.py").write_text("x = 1\ndef f(:\n")
    user_registry(tmp_path)
    assert packs.broken()["typo"].startswith(f"SyntaxError at {tmp_path / 'typo' / '__init__.py'}:2")


def test_pydantic_and_json_errors_keep_the_field_and_the_position(tmp_path):
    from pydantic import BaseModel

    class Row(BaseModel):
        n: int

    with pytest.raises(Exception) as caught:
        Row.model_validate({"n": "x"})
    assert message(caught.value) == "Row: n: Input should be a valid integer, unable to parse string as an integer"
    with pytest.raises(json.JSONDecodeError) as caught:
        json.loads('{"a": 1\n "b": 2}')  # in memory: no file to name
    assert message(caught.value) == "line 2 column 2: Expecting ',' delimiter"
    data = tmp_path / "db.json"
    data.write_text('{"a": 1\n "b": 2}')
    with pytest.raises(json.JSONDecodeError) as caught, data.open() as f:
        json.load(f)
    assert message(caught.value) == f"{data}:2:2: Expecting ',' delimiter"


def test_the_space_names_the_factor_and_the_field(gym):
    space = gym / "ontology.json"
    raw = json.loads(space.read_text())
    raw["factors"][1]["values"] = []
    space.write_text(json.dumps(raw))
    with pytest.raises(SpaceError, match=r"^factors\[1\] \('expected_outcome'\): values: List should have at least "
                                         r"1 item"):
        load_initial_space(get_pack("gym_fault"))
    space.write_text(json.dumps({**raw, "factors": raw["factors"][:1]}))
    with pytest.raises(SpaceError, match="^factors: only 'task_family'; the Designer crosses it with a second"):
        load_initial_space(get_pack("gym_fault"))


def test_a_tool_that_raises_is_a_tool_fault_naming_the_tool_and_line(gym):
    env_file = gym / "environment.py"
    env_file.write_text(env_file.read_text().replace(
        "def get_member_details(state: State, a: MemberArgs) -> Member:\n",
        "def get_member_details(state: State, a: MemberArgs) -> Member:\n    return state.members[a.member_id].age\n"))
    env = get_domain("gym_fault")
    with pytest.raises(ToolFault, match=r"^tool 'get_member_details' raised KeyError at .*gym_fault/environment.py:"
                                        r"\d+ \(in get_member_details\): 'nobody'"):
        run_tool(env.episode(), "get_member_details", {"member_id": "nobody"})
