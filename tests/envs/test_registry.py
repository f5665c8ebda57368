import json
import subprocess
import sys

import pytest

from envs.packs import UnknownDomain, get_domain, known


def test_known_domains():
    assert known() == ["airline", "retail", "telecom"]


def test_unknown_domain_lists_known_ones():
    with pytest.raises(UnknownDomain, match="unknown domain 'bank'; known domains: airline, retail, telecom"):
        get_domain("bank")


def test_importing_a_domain_does_not_import_litellm():
    code = ("import sys; from envs.packs import get_domain; d = get_domain('airline'); "
            "d.episode().step('get_user_details', {'user_id': 'mia_li_3668'}); "
            "print('litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("name, kinds", [
    ("airline", {"book_reservation": "write", "get_user_details": "read", "calculate": "generic",
                 "transfer_to_human_agents": "generic", "send_certificate": "write"}),
    ("retail", {"cancel_pending_order": "write", "find_user_id_by_email": "read"}),
])
def test_tool_types_come_from_tau2_tags(name, kinds):
    dom = get_domain(name)
    for tool, kind in kinds.items():
        assert dom.tool_kind(tool) == kind
    schema = dom.tool("get_user_details").openai_schema()
    assert schema["type"] == "function" and schema["function"]["parameters"]["required"] == ["user_id"]


def test_telecom_has_user_tools(telecom):
    assert {t.requestor for t in telecom.tools()} == {"assistant", "user"}
    assert telecom.tool_kind("toggle_airplane_mode", "user") is not None


def test_tool_error_is_an_observation(airline):
    obs = airline.episode().step("get_user_details", {"user_id": "nobody"})
    assert obs.error and obs.content.startswith("Error:")
    obs = airline.episode().step("no_such_tool", {})
    assert obs.error


def test_argument_validation(airline):
    assert airline.validate_arguments("get_user_details", {"user_id": "x"}) is None
    assert "unknown arguments" in airline.validate_arguments("get_user_details", {"user_id": "x", "z": 1})
    assert "do not match" in airline.validate_arguments("get_user_details", {})
    assert "no assistant tool" in airline.validate_arguments("fly", {})


def test_splits_and_summary(airline, retail, telecom):
    assert airline.splits()["base"] == 50 and len(airline.tasks("test")) == 20
    assert retail.splits()["base"] == 114 and telecom.splits()["base"] == 114
    s = airline.summary()
    assert s.entity_counts == {"flights": 300, "users": 500, "reservations": 2000}
    assert len(s.example_ids["users"]) == 3 and s.tools["cancel_reservation"] == "write"
    json.dumps(s.__dict__)
    with pytest.raises(KeyError, match="known: train, test, base"):
        airline.tasks("nope")
