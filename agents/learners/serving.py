"""Serve a checkpoint behind an OpenAI-compatible API for as long as its evaluation lasts.

vLLM (``--enable-auto-tool-choice --tool-call-parser hermes``: the Qwen3 tool-call
format) where it is installed beside LLaMA-Factory and a GPU is present;
``llamafactory-cli api`` (its Hugging Face engine, CPU or GPU) otherwise. The
server listens on 127.0.0.1 on a free port, in its own session (agents/servers.py), with
its log next to the checkpoint; ``serving`` waits until ``/v1/models`` answers and
stops the whole process tree when the block ends, also on an error.
"""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import yaml

from evosyn.agents import servers
from evosyn.agents.learners.llamafactory import TrainingError, find_cli, gpu_count, with_parent
from evosyn.agents.servers import ServerExited, ServerNotReady, free_port, http_ok, log_tail, wait_ready
from evosyn.storage import atomic
from evosyn.config import LlamaFactoryConfig

SERVED_NAME = "checkpoint"  # the model name requests use (both servers are told it)


class ServeError(TrainingError):
    pass


@dataclass(frozen=True)
class Served:
    base_url: str
    model: str
    engine: str
    log: Path


def vllm_cli(cli: str) -> str | None:
    """vLLM's CLI beside LLaMA-Factory's (the same environment), or on PATH."""
    beside = Path(cli).parent / "vllm"
    return str(beside) if beside.exists() else shutil.which("vllm")


def engine_for(lf: LlamaFactoryConfig, cli: str) -> str:
    if lf.serve != "auto":
        return lf.serve
    return "vllm" if vllm_cli(cli) and gpu_count() > 0 else "llamafactory"


def command(engine: str, checkpoint: Path, lf: LlamaFactoryConfig, cli: str, port: int
            ) -> tuple[list[str], dict[str, str]]:
    """The server's argv and the environment it adds."""
    if engine == "vllm":
        vllm = vllm_cli(cli)
        if vllm is None:
            raise ServeError("llamafactory.serve: vllm is not installed beside llamafactory-cli nor on PATH")
        return [vllm, "serve", str(checkpoint), "--host", "127.0.0.1", "--port", str(port),
                "--served-model-name", SERVED_NAME, "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                "--max-model-len", str(int(lf.recipe.get("cutoff_len", 16384)) + lf.max_new_tokens)], {}
    cfg = checkpoint.parent / "serve.yaml"
    atomic.write_text(cfg, yaml.safe_dump({"model_name_or_path": str(checkpoint), "template": lf.template,
                                           "infer_backend": "huggingface", "trust_remote_code": True,
                                           "max_new_tokens": lf.max_new_tokens}, sort_keys=False))
    return [cli, "api", str(cfg)], {"API_HOST": "127.0.0.1", "API_PORT": str(port), "API_MODEL_NAME": SERVED_NAME,
                                    "API_VERBOSE": "0"}


def _tail(path: Path) -> str:
    return log_tail(path, n=1, limit=300) or "(no output)"


@contextmanager
def serving(checkpoint: Path, lf: LlamaFactoryConfig, cli: str | None = None) -> Iterator[Served]:
    """The checkpoint served on 127.0.0.1 while the block runs; ``ServeError`` if it does not come up."""
    cli = find_cli(cli)
    engine, port = engine_for(lf, cli), free_port()
    argv, extra = command(engine, checkpoint, lf, cli, port)
    log = checkpoint.parent / f"serve-{engine}.log"
    env = {**os.environ, "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1", "NO_PROXY": "127.0.0.1,localhost",
           **extra}
    base = f"http://127.0.0.1:{port}/v1"
    proc = servers.start(with_parent(argv), log, env=env, append=False)
    try:
        try:
            wait_ready(proc, lambda: http_ok(f"{base}/models", timeout=5.0) and servers.listens(proc, port),
                       lf.serve_timeout_s, interval=1.0)
        except ServerExited as exc:
            raise ServeError(f"{engine} server for {checkpoint} exited with {exc.returncode} before it "
                             f"answered ({_tail(log)}); see {log}") from None
        except ServerNotReady:
            raise ServeError(f"{engine} server for {checkpoint} did not answer within {lf.serve_timeout_s:.0f}s "
                             f"(llamafactory.serve_timeout_s); see {log}") from None
        yield Served(base, SERVED_NAME, engine, log)
    finally:
        servers.stop(proc, grace=20.0)
