"""A user's own pack, broken as a new user breaks one (issue 58, cases 6 and 7), through the real CLI: each fault is
one `error:` line naming the pack's file and line and the fix, and a broken pack never takes down another domain."""
from __future__ import annotations

from tests.flows.test_cli_new_domain import edit, evosyn, new_domain


def one_line(out) -> str:
    lines = [line for line in out.stderr.splitlines()  # tau2's import notice, verify's progress label
             if "No .env file found" not in line and not line.startswith("verifying ")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out.stderr, out.stderr[-3000:]
    return lines[0]


def test_a_pack_calling_sys_exit_at_import_stops_only_its_own_domain(tmp_path):
    packs, folder = new_domain(tmp_path, "gym_exit")
    (folder / "__init__.py").write_text((folder / "__init__.py").read_text() + "import sys\nsys.exit(3)\n")
    home = tmp_path / "h"
    out = evosyn("envs", "list", packs=packs, home=home)
    assert out.returncode == 0 and "airline" in out.stdout.split(), out.stderr[-2000:]
    assert "gym_exit  (failed to load: SystemExit at packs/gym_exit/__init__.py:13: the pack called sys.exit(3))" \
        in out.stdout, out.stdout
    out = evosyn("preview", "--n", "1", packs=packs, home=home)
    assert out.returncode == 0 and "preview: 1 samples on airline" in out.stdout, out.stderr[-2000:]
    out = evosyn("synth", "--domain", "gym_exit", "--n", "2", packs=packs, home=home)
    assert out.returncode == 2
    assert one_line(out).startswith("error: --domain gym_exit: the pack failed to load: SystemExit at "
                                    "packs/gym_exit/__init__.py:13: the pack called sys.exit(3)")
    out = evosyn("envs", "check", "gym_exit", packs=packs, home=home)
    assert out.returncode == 2 and one_line(out) == ("error: gym_exit: the pack failed to load: SystemExit at "
                                                     "packs/gym_exit/__init__.py:13: the pack called sys.exit(3)")


def test_a_second_default_pack_is_one_line_naming_both_and_the_fix(tmp_path):
    packs, folder = new_domain(tmp_path, "gym_default")
    edit(folder / "pack.py", "class Pack(DomainPack):\n", "class Pack(DomainPack):\n    default = True\n")
    home = tmp_path / "h"
    for command in (["preview", "--n", "1"], ["synth", "--n", "2"], ["run", "--rounds", "1", "--budget", "5"]):
        out = evosyn(*command, packs=packs, home=home)
        assert out.returncode == 2, (command, out.stderr[-2000:])
        line = one_line(out)
        assert line.startswith("error: default: 2 domain packs are the default, 'airline' (") and \
               "'gym_default' (packs/gym_default/pack.py:13)" in line, line
        assert "remove `default = True` from 'gym_default' (the default is 'airline')" in line, line
    out = evosyn("synth", "--domain", "gym_default", "--n", "2", "--quiet", packs=packs, home=home)
    assert out.returncode == 0, out.stderr[-2000:]  # named, either pack works


def test_a_tool_that_raises_is_named_by_verify_synth_and_envs_check(tmp_path):
    packs, folder = new_domain(tmp_path, "gym_tool")
    edit(folder / "environment.py", "def get_class_details(state: State, a: ClassArgs) -> GymClass:\n",
         "def get_class_details(state: State, a: ClassArgs) -> GymClass:\n    len(None)\n")
    home = tmp_path / "h"
    fault = ("tool 'get_class_details' raised TypeError at packs/gym_tool/environment.py:110 (in get_class_details): "
             "object of type 'NoneType' has no len()")
    out = evosyn("verify", "--domain", "gym_tool", "--official", packs=packs, home=home)
    assert out.returncode == 2 and one_line(out).startswith(f"error: --domain gym_tool: {fault}")
    out = evosyn("envs", "check", "gym_tool", packs=packs, home=home)
    assert out.returncode == 1 and f"error: tool get_class_details: {fault}" in out.stdout, out.stdout
    out = evosyn("synth", "--domain", "gym_tool", "--n", "2", packs=packs, home=home)
    assert "generator error: tool 'get_class_details' raised TypeError at" in out.stdout, out.stdout[-3000:]


def test_envs_check_runs_the_policy_and_the_generator(tmp_path):
    packs, folder = new_domain(tmp_path, "gym_rules")
    edit(folder / "policy.py", "    if call.name == \"book_class\" and member is not None and len(",
         "    if member is not None and member.tier == 'gold':\n        return []\n"
         "    if call.name == \"book_class\" and member is not None and len(")
    edit(folder / "generator.py", "        else:  # cancel_booking\n",
         "        else:  # cancel_booking\n            {}['oops']\n")
    out = evosyn("envs", "check", "gym_rules", packs=packs, home=tmp_path / "h")
    assert out.returncode == 1, out.stdout
    errors = [line for line in out.stdout.splitlines() if line.startswith("error: ")]
    assert errors == [
        ("error: policy.py: [unverifiable] book_class: arguments cannot be checked against the policy (AttributeError: "
         "'Member' object has no attribute 'tier', in rule check_write at packs/gym_rules/policy.py:20)"),
        "error: task_builder: generator error: KeyError at packs/gym_rules/generator.py:55 (in _fulfil): 'oops'"], errors
    assert out.stdout.splitlines()[-1] == "gym_rules: errors 2, warnings 1"


def test_a_space_the_designer_cannot_use_is_refused_before_any_work(tmp_path):
    import json

    packs, folder = new_domain(tmp_path, "gym_space")
    space = folder / "ontology.json"
    original = json.loads(space.read_text())
    cases = [
        ([], "factors: empty; the Designer needs a 'task_family' factor"),
        ([f for f in original["factors"] if f["key"] != "task_family"], "factors: no 'task_family' factor"),
        ([{**f, "values": []} if f["key"] == "tool_use_pattern" else f for f in original["factors"]],
         ("factors[3] ('tool_use_pattern'): values: List should have at least 1 item after validation, not 0 (give "
          "it at least one value, or remove the factor)")),
    ]
    for factors, said in cases:
        space.write_text(json.dumps({**original, "factors": factors}))
        out = evosyn("synth", "--domain", "gym_space", "--n", "2", packs=packs, home=tmp_path / "h")
        assert out.returncode == 2
        assert one_line(out).startswith(f"error: --domain gym_space: packs/gym_space/ontology.json: not a valid initial "
                                        f"space: {said}"), out.stderr
    space.write_text('{"domain": "gym_space",\n  "factors": [\n    {"key": "task_family" "values": []}]}\n')
    out = evosyn("envs", "check", "gym_space", packs=packs, home=tmp_path / "h")
    assert out.returncode == 1
    assert "error: packs/gym_space/ontology.json:3:27: not valid JSON (Expecting ',' delimiter)" in out.stdout, out.stdout


def test_a_malformed_data_file_keeps_its_line_and_column(tmp_path):
    packs, folder = new_domain(tmp_path, "gym_db")
    (folder / "db.json").write_text('{"members": {\n  "M1": {"member_id": "M1", "name": "Ada"}\n  "M2": 3}}\n')
    edit(folder / "environment.py", "        self.initial = initial_state()\n",
         "        from pathlib import Path\n\n"
         "        self.initial = State.model_validate_json((Path(__file__).parent / 'db.json').read_text())\n")
    out = evosyn("synth", "--domain", "gym_db", "--n", "2", packs=packs, home=tmp_path / "h")
    assert out.returncode == 2
    assert one_line(out) == ("error: --domain gym_db: environment(): the gym_db environment failed to load: "
                             "ValidationError at packs/gym_db/environment.py:194 (in __init__): packs/gym_db/db.json:3:3: "
                             "Invalid JSON: expected `,` or `}`")
