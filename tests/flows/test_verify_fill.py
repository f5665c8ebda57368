"""`evosyn verify --task --trajectory` with hand-typed tool outputs: a tool message that differs from the replay's
output shows the expected text; `--fill-observations` fills every tool output from the replay."""
from __future__ import annotations

import json

from tests.flows.test_cli_envs import EXAMPLE
from tests.flows.test_cli_new_domain import evosyn, new_domain

EXPECTED = '{"member_id":"M1","name":"Ada","bookings":[]}'  # what get_member_details returns on replay


def _hand_typed(tmp_path):
    """The guide's conversation with its first tool output typed by hand (spaces) and its second left out."""
    conversation = json.loads((EXAMPLE / "conversation.json").read_text())
    messages = []
    for m in conversation["messages"]:
        if m.get("tool_call_id") == "c0":
            m = {**m, "content": '{"member_id": "M1", "name": "Ada", "bookings": []}'}
        if m.get("tool_call_id") == "c1":
            continue
        messages.append(m)
    path = tmp_path / "typed.json"
    path.write_text(json.dumps({"messages": messages, "termination": "agent_stop"}))
    return conversation, path


def test_a_differing_tool_message_shows_the_expected_text(tmp_path):
    packs, _ = new_domain(tmp_path, "gym_fill")
    _, typed = _hand_typed(tmp_path)
    args = ["verify", "--domain", "gym_fill", "--task", str(EXAMPLE / "task.json"), "--trajectory", str(typed)]
    out = evosyn(*args, packs=packs, home=tmp_path / "h")
    assert out.returncode == 1, out.stdout + out.stderr
    assert EXPECTED in out.stdout, out.stdout  # byte for byte, on one line of its own
    line = next(line for line in out.stdout.splitlines() if EXPECTED in line)
    assert "get_member_details (c0)" in line, line
    assert "--fill-observations" in out.stdout
    js = evosyn(*args, "--format", "json", packs=packs, home=tmp_path / "h")
    verdict = json.loads(js.stdout)
    assert {"tool": "get_member_details", "call_id": "c0", "expected": EXPECTED,
            "recorded": '{"member_id": "M1", "name": "Ada", "bookings": []}'} in verdict["observations"], verdict


def test_fill_observations_writes_a_trajectory_that_verifies(tmp_path):
    packs, _ = new_domain(tmp_path, "gym_fill")
    conversation, typed = _hand_typed(tmp_path)
    args = ["verify", "--domain", "gym_fill", "--task", str(EXAMPLE / "task.json"), "--trajectory", str(typed),
            "--fill-observations"]
    out = evosyn(*args, "--output", str(tmp_path / "filled.json"), packs=packs, home=tmp_path / "h")
    assert out.returncode == 0, out.stdout + out.stderr  # the filled trajectory verifies
    assert f"wrote {tmp_path / 'filled.json'}: 2 tool outputs filled from the replay" in out.stdout, out.stdout
    filled = json.loads((tmp_path / "filled.json").read_text())
    tools = {m["tool_call_id"]: m["content"] for m in filled["messages"] if m["role"] == "tool"}
    original = {m["tool_call_id"]: m["content"] for m in conversation["messages"] if m["role"] == "tool"}
    assert tools == original and filled["termination"] == "agent_stop"
    printed = evosyn(*args, packs=packs, home=tmp_path / "h")  # no --output: the trajectory on stdout
    assert printed.returncode == 0 and json.loads(printed.stdout) == filled, printed.stdout + printed.stderr
    lone = evosyn("verify", "--domain", "gym_fill", "--task", str(EXAMPLE / "task.json"), "--trajectory", str(typed),
                  "--output", str(tmp_path / "x.json"), packs=packs, home=tmp_path / "h")
    assert lone.returncode == 2 and lone.stderr.startswith("error: --output") and lone.stderr.count("\n") == 1
