"""The LLaMA-Factory SFT path: dataset export, the paper's full-SFT recipe as YAML, and the run.

Recipe (App. B.1): full SFT of Qwen3 with template ``qwen3``, cutoff 16384, 6 epochs,
lr 1e-5 with cosine decay and 0.1 warmup, bf16, FlashAttention-2, per-device
batch 1 x gradient accumulation 2 (x 8 GPUs), DeepSpeed ZeRO-3 (``ds_z3_config.json``).
``llamafactory-cli`` runs as a subprocess (the ``[train]`` extra, usually its
own environment); its log is streamed and kept next to the checkpoint.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from agents.learners.exports import DATASET_NAME, dataset_info, sharegpt
from storage import atomic
from storage.records import SFTExample

PAPER_RECIPE: dict[str, Any] = {
    "stage": "sft", "do_train": True, "finetuning_type": "full", "template": "qwen3", "cutoff_len": 16384,
    "num_train_epochs": 6.0, "learning_rate": 1.0e-5, "lr_scheduler_type": "cosine", "warmup_ratio": 0.1,
    "bf16": True, "flash_attn": "fa2", "per_device_train_batch_size": 1, "gradient_accumulation_steps": 2,
    "logging_steps": 10, "save_strategy": "epoch", "plot_loss": True, "overwrite_output_dir": True,
    "preprocessing_num_workers": 8, "report_to": "none",
}


class TrainingError(RuntimeError):
    pass


def deepspeed_config_path() -> Path:
    return Path(str(resources.files("agents.learners").joinpath("ds_z3_config.json")))


def write_dataset(examples: Iterable[SFTExample], dataset_dir: Path) -> int:
    dataset_dir.mkdir(parents=True, exist_ok=True)
    rows = [sharegpt(e) for e in examples]
    atomic.write_json(dataset_dir / f"{DATASET_NAME}.json", rows)
    atomic.write_json(dataset_dir / "dataset_info.json", dataset_info(f"{DATASET_NAME}.json"), indent=2)
    return len(rows)


def sft_config(model: str, dataset_dir: Path, output_dir: Path, deepspeed: bool = True,
               **overrides: Any) -> dict[str, Any]:
    cfg = {"model_name_or_path": model, "dataset": DATASET_NAME, "dataset_dir": str(dataset_dir),
           "output_dir": str(output_dir), **PAPER_RECIPE}
    if deepspeed:
        cfg["deepspeed"] = str(deepspeed_config_path())
    cfg.update(overrides)
    return cfg


def write_config(cfg: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, yaml.safe_dump(cfg, sort_keys=False))
    return path


def find_cli(explicit: str | None = None) -> str:
    cli = explicit or os.environ.get("EVOSYN_LLAMAFACTORY_CLI") or shutil.which("llamafactory-cli")
    if not cli:
        raise TrainingError("llamafactory-cli not found: install the [train] extra (or set "
                            "EVOSYN_LLAMAFACTORY_CLI to its path in a separate environment)")
    return cli


def run_training(config_path: Path, cli: str | None = None, log: Callable[[str], None] = print,
                 env: dict[str, str] | None = None, timeout: float | None = None) -> Path:
    """Run ``llamafactory-cli train CONFIG``, streaming its output; returns the log file."""
    cfg = yaml.safe_load(config_path.read_text())
    out = Path(cfg["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "evosyn_train.log"
    run_env = {**os.environ, "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1", "WANDB_DISABLED": "true",
               **(env or {})}
    with log_path.open("w") as fh:
        proc = subprocess.Popen([find_cli(cli), "train", str(config_path)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=run_env)
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            log(line.rstrip())
        code = proc.wait(timeout=timeout)
    if code != 0:
        raise TrainingError(f"llamafactory-cli train exited with {code}; see {log_path}")
    return log_path
