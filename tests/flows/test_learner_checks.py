"""`learner: llamafactory` is checked before any work: one `error:` line, exit 2, nothing written."""
import os
import subprocess
import sys

import pytest

from evosyn.agents.learners.llamafactory import gpu_count


def evosyn(home, *args, cli: str | None = None, path: str = "/usr/bin:/bin"):
    env = {**os.environ, "EVOSYN_HOME": str(home), "PATH": path}
    env.pop("EVOSYN_LLAMAFACTORY_CLI", None)
    if cli:
        env["EVOSYN_LLAMAFACTORY_CLI"] = cli
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def one_error_line(out) -> str:
    assert out.returncode == 2 and out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
    return out.stderr


def test_a_missing_cli_is_one_line_before_work(tmp_path):
    err = one_error_line(evosyn(tmp_path / "h", "run", "--learner", "llamafactory", "--rounds", "1"))
    assert err.startswith("error: learner llamafactory: llamafactory-cli not found") and "EVOSYN_LLAMAFACTORY_CLI" in err
    assert not (tmp_path / "h").exists()


@pytest.mark.skipif(gpu_count() > 0, reason="this machine has a GPU")
def test_the_papers_recipe_without_a_gpu_is_one_line_naming_the_fix(tmp_path):
    err = one_error_line(evosyn(tmp_path / "h", "run", "--learner", "llamafactory", cli="/bin/true"))
    assert "the recipe needs a GPU (bf16, deepspeed, flash_attn: fa2)" in err and "train_deployment" in err
    assert not (tmp_path / "h").exists()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("learner: llamafactory\nllamafactory: {deepspeed: false, recipe: {bf16: false, flash_attn: "
                   "disabled}, serve: vllm}\n")
    err = one_error_line(evosyn(tmp_path / "h", "run", "--config", str(cfg), cli="/bin/true"))
    assert err.startswith("error: llamafactory.serve: vllm needs a GPU")


def test_an_unknown_learner_is_refused(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("learner: axolotl\n")
    err = one_error_line(evosyn(tmp_path / "h", "run", "--config", str(cfg)))
    assert "field 'learner'" in err and "'embedded', 'llamafactory' or 'served'" in err
    out = evosyn(tmp_path / "h", "run", "--learner", "axolotl")
    assert out.returncode == 2 and "'axolotl' is not one of 'embedded', 'llamafactory', 'served'" in out.stderr
