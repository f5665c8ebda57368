"""LLaMA-Factory takes our exports whole and trains a tiny model on CPU (marker: train).

Runs `llamafactory-cli` (and its environment's python) from the [train] environment:
EVOSYN_LLAMAFACTORY_CLI or PATH. `.ci/run` builds that environment and sets
EVOSYN_REQUIRE_TRAIN=1, so in CI a missing LLaMA-Factory fails these tests instead of skipping them.
"""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from evosyn.agents.learners.exports import write_openai
from evosyn.agents.learners.llamafactory import PAPER_RECIPE, deepspeed_config_path, run_training, sft_config, \
    write_config, write_dataset
from evosyn.envs.packs import get_domain
from evosyn.tasks.datasets import sft_examples

pytestmark = pytest.mark.train
HERE = Path(__file__).parent


def cli_or_skip() -> str:
    cli = os.environ.get("EVOSYN_LLAMAFACTORY_CLI") or shutil.which("llamafactory-cli")
    if not cli:
        if os.environ.get("EVOSYN_REQUIRE_TRAIN"):
            pytest.fail("EVOSYN_REQUIRE_TRAIN is set but llamafactory-cli was not found")
        pytest.skip("llamafactory-cli not installed (the [train] extra)")
    return cli


def train_python(cli: str) -> str:
    return str(Path(cli).parent / "python")


def tiny_model(cli: str, sharegpt_file: Path, out: Path) -> Path:
    subprocess.run([train_python(cli), str(HERE / "tiny_lm.py"), str(out), str(sharegpt_file)], check=True,
                   capture_output=True, timeout=600)
    return out


def test_paper_recipe_yaml(tmp_path):
    cfg = yaml.safe_load(write_config(sft_config("Qwen/Qwen3-8B", tmp_path / "d", tmp_path / "o"),
                                      tmp_path / "c.yaml").read_text())
    assert (cfg["template"], cfg["cutoff_len"], cfg["num_train_epochs"], cfg["learning_rate"]) == ("qwen3", 16384, 6.0, 1e-5)
    assert (cfg["lr_scheduler_type"], cfg["warmup_ratio"], cfg["bf16"], cfg["flash_attn"]) == ("cosine", 0.1, True, "fa2")
    assert (cfg["per_device_train_batch_size"], cfg["gradient_accumulation_steps"]) == (1, 2)
    assert Path(cfg["deepspeed"]) == deepspeed_config_path() and '"stage": 3' in deepspeed_config_path().read_text()
    assert PAPER_RECIPE["finetuning_type"] == "full"


def with_parallel_and_text(examples):
    """Two more examples: two consecutive calls made one parallel call, and text written beside a call."""
    for e in examples:
        m = e.messages
        at = next((i for i in range(len(m) - 3) if m[i].tool_calls and m[i + 1].role == "tool"
                   and m[i + 2].tool_calls and m[i + 3].role == "tool"), None)
        if at is not None:
            both = m[at].model_copy(update={"tool_calls": [*m[at].tool_calls, *m[at + 2].tool_calls]})
            parallel = [*m[:at], both, m[at + 1], m[at + 3], *m[at + 4:]]
            texty = [*m[:at], m[at].model_copy(update={"content": "One moment."}), *m[at + 1:]]
            return [*examples, e.model_copy(update={"example_id": e.example_id + "-par", "messages": parallel}),
                    e.model_copy(update={"example_id": e.example_id + "-txt", "messages": texty})]
    raise AssertionError("no trajectory with two calls in a row")


def lf_load(cli: str, dataset_dir: Path, tokenizer: Path, out: Path) -> list[dict]:
    env = {**os.environ, "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1"}
    subprocess.run([train_python(cli), str(HERE / "lf_load.py"), str(dataset_dir), "evosyn", str(tokenizer), "qwen3",
                    str(out)], check=True, capture_output=True, timeout=600, env=env)
    return json.loads(out.read_text())


def rendered_calls(text: str) -> list[dict]:
    """The calls in the rendered conversation (after the system block, whose tool prompt shows a call's form)."""
    turns = text.split("<|im_end|>", 1)[1]
    return [json.loads(block) for block in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", turns, re.S)]


def test_llamafactory_loader_keeps_every_exported_example_with_tools_and_system(tmp_path, space, synth_pass):
    """Both exports through LLaMA-Factory's own loader and qwen3 template: nothing skipped as abnormal, the
    policy and the tools in every row, every call (parallel ones too) rendered with its arguments."""
    cli = cli_or_skip()
    result = synth_pass(space, 24, seed=3)
    examples = with_parallel_and_text(sft_examples([(c.task, c.trajectory) for c in result.kept], get_domain("airline"), 0.0, seed=0))
    policy = get_domain("airline").policy
    sg = write_dataset(examples, tmp_path / "sharegpt", system=policy)
    oa = write_openai(examples, tmp_path / "openai", system=policy)
    assert len(sg.rows) == len(oa.rows) == len(examples) and not sg.dropped and not oa.dropped
    tokenizer = tiny_model(cli, tmp_path / "sharegpt" / "evosyn.json", tmp_path / "tiny")
    tools = [json.dumps(t, ensure_ascii=False) for t in examples[0].tools]
    calls = [[{"name": c.name, "arguments": c.arguments} for m in e.messages if m.role == "assistant"
              for c in m.tool_calls] for e in examples]
    loaded = {}
    for fmt in ("sharegpt", "openai"):
        rows = loaded[fmt] = lf_load(cli, tmp_path / fmt, tokenizer, tmp_path / f"{fmt}-loaded.json")
        assert len(rows) == len(examples) and all(r["kept"] for r in rows), f"{fmt}: LLaMA-Factory skipped examples"
        # its OpenAI converter appends "\n" to a system prompt that has tools beside it
        assert all(r["system"] == (policy if fmt == "sharegpt" else policy + "\n") for r in rows)
        assert all(json.loads(r["tools"]) == examples[0].tools for r in rows)
        for row, want in zip(rows, calls):
            assert policy in row["text"] and all(t in row["text"] for t in tools)
            got = rendered_calls(row["text"])
            if fmt == "openai":  # its converter passes OpenAI's argument strings through: rendered as strings
                got = [{**c, "arguments": json.loads(c["arguments"])} for c in got]
            assert got == want, f"{fmt}: tool calls not rendered as exported"
    for rows in loaded.values():  # the parallel calls: two calls in one turn, their results in one turn
        assert "</tool_call>\n<tool_call>" in rows[-2]["text"] and "</tool_response>\n<tool_response>" in rows[-2]["text"]
    assert "One moment.<tool_call>" in loaded["sharegpt"][-1]["text"]  # text beside a call: kept by ShareGPT
    # (LLaMA-Factory's OpenAI converter replaces an assistant message's text by its calls)


def test_tiny_model_trains_on_every_exported_example(tmp_path, space, synth_pass):
    cli = cli_or_skip()
    result = synth_pass(space, 36, seed=7)
    examples = sft_examples([(c.task, c.trajectory) for c in result.kept], get_domain("airline"), 0.0, seed=0)
    n = len(write_dataset(examples, tmp_path / "data", system=get_domain("airline").policy).rows)
    assert n == len(result.kept) > 30
    tiny_model(cli, tmp_path / "data" / "evosyn.json", tmp_path / "model")
    cfg = sft_config(str(tmp_path / "model"), tmp_path / "data", tmp_path / "ckpt", deepspeed=False, bf16=False,
                     flash_attn="disabled", cutoff_len=2048, max_steps=3, num_train_epochs=1.0,
                     preprocessing_num_workers=1, logging_steps=1, plot_loss=False)
    lines: list[str] = []
    log = run_training(write_config(cfg, tmp_path / "sft.yaml"), cli, log=lines.append, timeout=900)
    text = log.read_text()
    assert re.search(rf"Num examples = {n}\b", text), "LLaMA-Factory dropped examples"
    assert not re.search(r"invalid|dropped|abnormal", text, re.I)
    assert "train_loss" in text and (tmp_path / "ckpt" / "config.json").exists()
