"""LLaMA-Factory accepts our ShareGPT export and trains a tiny model on CPU (marker: train).

Runs `llamafactory-cli` from the [train] environment: EVOSYN_LLAMAFACTORY_CLI or
PATH. `.ci/run` builds that environment and sets EVOSYN_REQUIRE_TRAIN=1, so in CI
a missing LLaMA-Factory fails this test instead of skipping it.
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from agents.learners.llamafactory import PAPER_RECIPE, deepspeed_config_path, run_training, sft_config, \
    write_config, write_dataset
from pipeline.datasets import sft_examples

pytestmark = pytest.mark.train


def cli_or_skip() -> str:
    cli = os.environ.get("EVOSYN_LLAMAFACTORY_CLI") or shutil.which("llamafactory-cli")
    if not cli:
        if os.environ.get("EVOSYN_REQUIRE_TRAIN"):
            pytest.fail("EVOSYN_REQUIRE_TRAIN is set but llamafactory-cli was not found")
        pytest.skip("llamafactory-cli not installed (the [train] extra)")
    return cli


def test_paper_recipe_yaml(tmp_path):
    cfg = yaml.safe_load(write_config(sft_config("Qwen/Qwen3-8B", tmp_path / "d", tmp_path / "o"),
                                      tmp_path / "c.yaml").read_text())
    assert (cfg["template"], cfg["cutoff_len"], cfg["num_train_epochs"], cfg["learning_rate"]) == ("qwen3", 16384, 6.0, 1e-5)
    assert (cfg["lr_scheduler_type"], cfg["warmup_ratio"], cfg["bf16"], cfg["flash_attn"]) == ("cosine", 0.1, True, "fa2")
    assert (cfg["per_device_train_batch_size"], cfg["gradient_accumulation_steps"]) == (1, 2)
    assert Path(cfg["deepspeed"]) == deepspeed_config_path() and '"stage": 3' in deepspeed_config_path().read_text()
    assert PAPER_RECIPE["finetuning_type"] == "full"


def test_tiny_model_trains_on_every_exported_example(tmp_path, space, synth_pass):
    cli = cli_or_skip()
    result = synth_pass(space, 36, seed=7)
    examples = sft_examples([(c.task, c.trajectory) for c in result.kept], 0.0, seed=0)
    n = write_dataset(examples, tmp_path / "data")
    assert n == len(result.kept) > 30
    python = Path(cli).parent / "python"
    subprocess.run([str(python), str(Path(__file__).with_name("tiny_lm.py")), str(tmp_path / "model"),
                    str(tmp_path / "data" / "evosyn.json")], check=True, capture_output=True, timeout=600)
    cfg = sft_config(str(tmp_path / "model"), tmp_path / "data", tmp_path / "ckpt", deepspeed=False, bf16=False,
                     flash_attn="disabled", cutoff_len=2048, max_steps=3, num_train_epochs=1.0,
                     preprocessing_num_workers=1, logging_steps=1, plot_loss=False)
    lines: list[str] = []
    log = run_training(write_config(cfg, tmp_path / "sft.yaml"), cli, log=lines.append, timeout=900)
    text = log.read_text()
    assert re.search(rf"Num examples = {n}\b", text), "LLaMA-Factory dropped examples"
    assert not re.search(r"invalid|dropped", text, re.I)
    assert "train_loss" in text and (tmp_path / "ckpt" / "config.json").exists()
