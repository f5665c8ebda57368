"""The LLaMA-Factory SFT path: dataset export, the paper's full-SFT recipe as YAML, the run, and its checks.

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

from evosyn.agents.learners.exports import DATASET_NAME, Exported, System, dataset_info, export_rows, sharegpt
from evosyn.storage import atomic
from evosyn.config import LlamaFactoryConfig
from evosyn.storage.records import SFTExample

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
    return Path(str(resources.files("evosyn.agents.learners").joinpath("ds_z3_config.json")))


def write_dataset(examples: Iterable[SFTExample], dataset_dir: Path, system: System = "") -> Exported:
    """``evosyn.json`` (ShareGPT, ``system`` as every row's system prompt, or a function giving each row's)
    and ``dataset_info.json``."""
    dataset_dir.mkdir(parents=True, exist_ok=True)
    exported = export_rows(examples, sharegpt, system)
    atomic.write_json(dataset_dir / f"{DATASET_NAME}.json", exported.rows)
    atomic.write_json(dataset_dir / "dataset_info.json", dataset_info(f"{DATASET_NAME}.json"), indent=2)
    return exported


def sft_config(model: str, dataset_dir: Path, output_dir: Path, deepspeed: bool = True,
               **overrides: Any) -> dict[str, Any]:
    cfg = {"model_name_or_path": model, "dataset": DATASET_NAME, "dataset_dir": str(dataset_dir),
           "output_dir": str(output_dir), **PAPER_RECIPE}
    if deepspeed:
        cfg["deepspeed"] = str(deepspeed_config_path())
    cfg.update(overrides)
    return cfg


def recipe_of(lf: LlamaFactoryConfig, dataset_dir: Path, output_dir: Path) -> dict[str, Any]:
    """A run's recipe: the paper's, its template, DeepSpeed or not, then the config's overrides."""
    return sft_config(lf.model, dataset_dir, output_dir, deepspeed=lf.deepspeed, template=lf.template,
                      **lf.recipe)


def write_config(cfg: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, yaml.safe_dump(cfg, sort_keys=False))
    return path


def needs_gpu(recipe: dict[str, Any]) -> list[str]:
    """What in a recipe only runs on a GPU (empty: it trains on CPU)."""
    need = [k for k in ("bf16", "fp16") if recipe.get(k)]
    if recipe.get("deepspeed"):
        need.append("deepspeed")
    if recipe.get("flash_attn") == "fa2":
        need.append("flash_attn: fa2")
    return need


def gpu_count() -> int:
    """NVIDIA GPUs this machine shows (``nvidia-smi -L``); 0 without a driver."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines()) if out.returncode == 0 else 0


def find_cli(explicit: str | None = None) -> str:
    cli = explicit or os.environ.get("EVOSYN_LLAMAFACTORY_CLI") or shutil.which("llamafactory-cli")
    if not cli or not Path(cli).exists() and not shutil.which(cli):
        raise TrainingError("llamafactory-cli not found: install the [train] extra (or set "
                            "EVOSYN_LLAMAFACTORY_CLI to its path in a separate environment)")
    return cli


def check_learner(lf: LlamaFactoryConfig, train_deployment: str | None = None) -> str:
    """Before any work: the CLI that serves (and, without a deployment, trains) each checkpoint, and a GPU
    where the recipe needs one. Returns the CLI; raises ``TrainingError`` (one line, naming the fix)."""
    try:
        cli = find_cli()
    except TrainingError as exc:
        raise TrainingError(f"learner llamafactory: {exc}") from None
    need = needs_gpu(recipe_of(lf, Path("."), Path(".")))
    if need and not train_deployment and gpu_count() == 0:
        raise TrainingError(f"learner llamafactory: the recipe needs a GPU ({', '.join(need)}) and this machine "
                            "has none: set train_deployment to train on the gpu pool, or, for a small model on "
                            "CPU, llamafactory.deepspeed: false and llamafactory.recipe {bf16: false, "
                            "flash_attn: disabled}")
    if lf.serve == "vllm" and gpu_count() == 0:
        raise TrainingError("llamafactory.serve: vllm needs a GPU and this machine has none (use serve: auto, "
                            "which serves with `llamafactory-cli api` here)")
    return cli


def with_parent(argv: list[str]) -> list[str]:
    """``argv`` killed when this process dies (``setpriv --pdeathsig``, util-linux), where it can be: a run
    killed mid-round leaves no training or server behind holding memory (or the port)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else argv


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
        proc = subprocess.Popen(with_parent([find_cli(cli), "train", str(config_path)]), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=run_env)
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            log(line.rstrip())
        code = proc.wait(timeout=timeout)
    if code != 0:
        tail = [ln for ln in log_path.read_text().splitlines() if ln.strip()][-1:] or ["(no output)"]
        raise TrainingError(f"llamafactory-cli train exited with {code} ({tail[0][-200:]}); see {log_path}")
    return log_path
