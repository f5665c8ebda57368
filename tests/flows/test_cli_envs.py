import json
from pathlib import Path

from evosyn.envs.packs import known
from tests.flows.test_cli import evosyn
from tests.flows.test_cli_new_domain import evosyn as in_folder
from tests.flows.test_cli_new_domain import new_domain

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "own-domain"  # the guide's verify example


def test_envs_list_and_show(tmp_path):
    out = evosyn("envs", "list", home=tmp_path)
    assert out.stdout.split() == known(with_environment=True)
    out = evosyn("envs", "show", "airline", home=tmp_path)
    assert out.returncode == 0
    assert "book_reservation" in out.stdout and "write" in out.stdout and "Cancel flight" in out.stdout


def test_unknown_domain_is_one_line(tmp_path):
    out = evosyn("envs", "show", "bank", home=tmp_path)
    assert out.returncode == 2
    assert out.stderr == f"error: envs show bank: unknown domain (known domains: {', '.join(known(True))})\n"


def test_verify_official_airline(tmp_path):
    out = evosyn("verify", "--domain", "airline", "--official", home=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:]
    assert "│ passed  │ 43" in out.stdout and "│ skipped │ 7" in out.stdout
    for tid in ("0", "10", "26", "28", "31", "34", "46"):
        assert f"│ {tid} " in out.stdout


def test_verify_takes_your_own_task_and_trajectory(tmp_path):
    """The guide's example task and conversation (docs/examples/own-domain/) pass; a conversation that leaves out
    the booking fails with the checks that say why; a file of the wrong form is one line."""
    packs, _ = new_domain(tmp_path, "gym_desk")
    conversation = json.loads((EXAMPLE / "conversation.json").read_text())
    booking = next(c["id"] for m in conversation["messages"] for c in m.get("tool_calls", [])
                   if c["name"] == "book_class")
    no_booking = [m for m in conversation["messages"] if m.get("tool_call_id") != booking
                  and not any(c["id"] == booking for c in m.get("tool_calls", []))]
    (tmp_path / "bad.json").write_text(json.dumps(no_booking))  # a bare list of messages is accepted too
    args = ["verify", "--domain", "gym_desk", "--task", str(EXAMPLE / "task.json"), "--trajectory"]
    out = in_folder(*args, str(EXAMPLE / "conversation.json"), "--format", "json", packs=packs, home=tmp_path / "h")
    verdict = json.loads(out.stdout)
    assert out.returncode == 0 and verdict["passed"] and verdict["task_id"] == "0", out.stderr
    assert {c["name"] for c in verdict["checks"] if c["passed"] and not c["skipped"]} == {
        "executable", "replay", "state", "actions", "communicate", "policy"}
    assert verdict["observed"]["task_family"] == ["book_class"]
    out = in_folder(*args, str(tmp_path / "bad.json"), packs=packs, home=tmp_path / "h")
    assert out.returncode == 1 and "FAILED" in out.stdout and "gold action not performed: book_class" in out.stdout
    out = in_folder(*args, str(EXAMPLE / "task.json"), packs=packs, home=tmp_path / "h")  # a task, not a conversation
    assert out.returncode == 2 and out.stderr.startswith("error: --trajectory") and out.stderr.count("\n") == 1
    (tmp_path / "tasks.json").write_text(json.dumps([{**json.loads((EXAMPLE / "task.json").read_text()), "id": i}
                                                     for i in ("0", "7")]))  # an export's list of tasks
    listed = ["verify", "--domain", "gym_desk", "--task", str(tmp_path / "tasks.json"), "--trajectory",
              str(EXAMPLE / "conversation.json")]
    assert in_folder(*listed, "--task-id", "7", packs=packs, home=tmp_path / "h").returncode == 0
    out = in_folder(*listed, packs=packs, home=tmp_path / "h")
    assert out.returncode == 2 and "holds 2 tasks; pick one with --task-id (0, 7)" in out.stderr, out.stderr
    out = in_folder("verify", "--domain", "gym_desk", "--task", str(EXAMPLE / "task.json"), packs=packs,
                    home=tmp_path / "h")
    assert out.returncode == 2 and "--task and --trajectory go together" in out.stderr


def test_a_broken_pack_is_listed_with_its_error_and_stops_no_other_domain(tmp_path):
    packs, folder = new_domain(tmp_path, "gym_broken")
    (folder / "__init__.py").write_text("import no_such_module_anywhere\n")
    out = in_folder("envs", "list", packs=packs, home=tmp_path / "h")
    assert out.returncode == 0 and "airline" in out.stdout.split()
    assert "gym_broken  (failed to load: ModuleNotFoundError at packs/gym_broken/__init__.py:1: No module named " \
           "'no_such_module_anywhere')" in out.stdout
    out = in_folder("synth", "--domain", "gym_broken", "--n", "3", packs=packs, home=tmp_path / "h")
    assert out.returncode == 2 and out.stderr.startswith("error: --domain gym_broken: the pack failed to load")
    out = in_folder("envs", "check", "gym_broken", packs=packs, home=tmp_path / "h")
    assert out.returncode == 2 and out.stderr == ("error: gym_broken: the pack failed to load: ModuleNotFoundError at "
                                                  "packs/gym_broken/__init__.py:1: No module named "
                                                  "'no_such_module_anywhere'\n")
    out = in_folder("--debug", "envs", "check", "gym_broken", packs=packs, home=tmp_path / "h")
    assert out.returncode == 2 and "Traceback" in out.stderr and "no_such_module_anywhere" in out.stderr
    out = in_folder("synth", "--domain", "airline", "--n", "3", "--quiet", packs=packs, home=tmp_path / "h")
    assert out.returncode == 0, out.stderr[-2000:]
