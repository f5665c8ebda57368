"""A run's id, and the lock that keeps one process per run id: light enough for the CLI to take before any
slow start-up (Prefect's temporary server, the flow imports), so a second `evosyn run` of a running config
says "already running" at once."""
from __future__ import annotations

import hashlib
from contextlib import AbstractContextManager
from pathlib import Path

from evosyn.config import EXECUTION_FIELDS, RoleConfig, RunConfig
from evosyn.envs.pack_version import user_pack_version
from evosyn.storage.locks import StoreLockTimeout, store_lock
from evosyn.storage.records import PROBING_ARMS

NEWER_ROLE_FIELDS = ("max_reply_bytes", "on_invalid")


class RunBusy(RuntimeError):
    """The same run id is already running in another process on this store."""


def run_id_for(cfg: RunConfig, with_pack: bool = True) -> str:
    """The run id of ``cfg``: what it synthesizes and learns, hashed. A pack of the user's own (edited in place)
    adds its code version (``evosyn.envs.pack_version``), so a rerun after an edit is a new run; ``with_pack``
    False: the id without it (``--reuse``'s key, and the id such a run had before versions were covered).
    Built-in packs add nothing: their ids are as they were."""
    # where it trains and what it also measures (official_eval) change no row the run synthesizes or learns;
    # the llamafactory section only matters to a run that uses it (ids of embedded runs stay as they were)
    # nor does how its rounds fan out (task_runner, dask_address)
    exclude: dict = {k: True for k in ("store", "train_deployment", "official_eval", *EXECUTION_FIELDS)}
    if cfg.learner == "embedded":
        exclude["llamafactory"] = True
    if cfg.served is None:  # the served learner's endpoint: ids of runs without one stay as they were
        exclude["served"] = True
    if cfg.prior.is_default():  # the default prior: ids of runs without a planted gap stay as they were
        exclude["prior"] = True
    elif cfg.prior.writes is None:  # nor do those of planted gaps on the default write counts
        exclude["prior"] = {"writes": True}
    if not cfg.initial_factors:  # the pack's initial space: ids stay as they were
        exclude["initial_factors"] = True
    if not cfg.dedup.drop:  # flagging changes only the dedup table; dropping changes what is trained
        exclude["dedup"] = True
    # another data folder is another run; only the run's own domain's entry counts (one sweep config names
    # every domain's), and without one the ids stay as they were before the key existed
    others = {d: True for d in cfg.env_data if d != cfg.domain}
    if len(others) == len(cfg.env_data):
        exclude["env_data"] = True
    elif others:
        exclude["env_data"] = others
    # role fields added later, at their defaults: ids of LLM runs stay as they were
    later = {r: {k for k in NEWER_ROLE_FIELDS if getattr(rc, k) == RoleConfig.model_fields[k].default}
             for r, rc in cfg.roles.items()}
    if any(later.values()):
        exclude["roles"] = {r: keys for r, keys in later.items() if keys}
    if cfg.arm not in PROBING_ARMS:  # an arm that reads no probe set makes the same rows with any probe_size
        cfg = cfg.model_copy(update={"probe_size": 0})
    body = cfg.model_dump_json(exclude=exclude)
    version = user_pack_version(cfg.domain) if with_pack else None
    if version is not None:
        body += f"\npack {version}"
    digest = hashlib.sha256(body.encode()).hexdigest()[:6]
    return f"{cfg.domain}-{cfg.arm}-s{cfg.seed}-{digest}"


def run_lock(root: Path, run_id: str) -> AbstractContextManager:
    """The held lock of ``run_id`` on ``root`` (release with ``__exit__``); ``RunBusy`` when another process
    holds it. One process per run id: a second `run` of the same config (or a second --resume) would redo the
    same stages beside the first and pay for the same LLM calls twice. Re-entrant within a thread."""
    busy = store_lock(root, f"run-{run_id}", timeout=0)
    try:
        busy.__enter__()
    except StoreLockTimeout:
        raise RunBusy(f"run {run_id} is already running in another process on {root} (wait for it, "
                      "or stop it and --resume)") from None
    return busy
