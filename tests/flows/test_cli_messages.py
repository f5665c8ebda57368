"""What the tables say is what the records hold: rule codes in square brackets print as themselves (rich markup
never eats them), rejection reasons print whole, and a domain without a benchmark prints no benchmark reward.

A pack of one's own (the template, `evosyn new-domain`) whose policy breaks a long rule on every booking: `verify`,
`synth` and `show` on it, and `show` on a tau2 domain, which names tau2's reward."""
from __future__ import annotations

import json
import re

import pytest

from tests.flows.test_cli_envs import EXAMPLE
from tests.flows.test_cli_new_domain import edit, evosyn, new_domain

RULE = ("[late_cancellation_fee] a booking made within the cancellation window must carry the late fee notice, and "
        "the member must be told the fee amount before the [confirmation] step, as section 4.2 of the policy says")


def flat(text: str) -> str:
    """A panel's text with its borders gone and its wrapped lines joined: one space between words."""
    return " ".join(re.sub(r"[│┃┏┓┗┛┡┩└┘━─┳┻╇┼╭╮╰╯]", " ", text).split())


def column(text: str, i: int) -> str:
    """Column ``i`` of a table's body rows, its wrapped lines joined: a cell's whole text, one space between words."""
    cells = [line.split("│")[1:-1][i] for line in text.splitlines() if line.startswith("│")]
    return " ".join(" ".join(cells).split())


@pytest.fixture(scope="module")
def strict(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("strict")
    packs, folder = new_domain(tmp_path, "gym_strict")
    edit(folder / "policy.py", "    return []\n", f"    if call.name == 'book_class':\n        return [{RULE!r}]\n"
                                                  "    return []\n")
    return packs, tmp_path / "h"


def test_verify_prints_rule_codes_and_whole_reasons_and_no_benchmark_reward(strict):
    packs, home = strict
    out = evosyn("verify", "--domain", "gym_strict", "--task", str(EXAMPLE / "task.json"), "--trajectory",
                 str(EXAMPLE / "conversation.json"), packs=packs, home=home)
    assert out.returncode == 1, out.stderr[-2000:]
    assert RULE in column(out.stdout, 2), out.stdout
    assert "reward" not in out.stdout  # its reward is 1.0: no benchmark says so, and the verdict is a failure
    assert "gym_strict / task 0: failed (a check below failed)" in out.stdout


def test_verify_official_prints_whole_reasons_and_no_benchmark_reward(strict):
    packs, home = strict
    out = evosyn("verify", "--domain", "gym_strict", "--official", packs=packs, home=home)
    assert out.returncode == 1, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    failed = "\n".join(lines[next(i for i, x in enumerate(lines) if x.strip() == "failed"):])  # task, reasons
    assert f"policy: {RULE}" in column(failed, 1) and "reward" not in out.stdout, out.stdout


def test_synth_prints_rule_codes_and_whole_reasons(strict):
    packs, home = strict
    out = evosyn("synth", "--domain", "gym_strict", "--n", "12", "--quiet", packs=packs, home=home)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"policy: {RULE}" in column(out.stdout, 0), out.stdout


def test_show_of_a_rejected_verdict_names_no_benchmark_reward(strict):
    packs, home = strict
    assert evosyn("synth", "--domain", "gym_strict", "--n", "12", "--quiet", packs=packs, home=home).returncode == 0
    q = evosyn("query", "select verdict_id, reward from verdicts where not passed limit 1", "--format", "json",
               packs=packs, home=home)
    row = json.loads(q.stdout.splitlines()[0])
    assert row["reward"] == 1.0  # the rule over DB and COMMUNICATE holds: only the policy check failed
    out = evosyn("show", row["verdict_id"], packs=packs, home=home)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "REJECTED · attempt" in out.stdout and "reward" not in out.stdout, out.stdout
    assert RULE in flat(out.stdout)
