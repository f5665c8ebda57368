"""`evosyn bench faults`, the store's and the client's rows: a store that heals, a client that bounds.

- **init**: a kill inside each first-time initialisation (MLflow's database at several delays, the DuckDB
  catalog) and a full disk while MLflow builds its database; the rerun is row-identical on every table;
- **random**: SIGKILL of the main PID only, at random times over a small run on a fresh store (so the
  first-time initialisations are in the window), then a resume: row-identical on every table, and no
  process of the killed run left behind (the temporary Prefect server dies with its parent);
- **damage**: in a finished run, one chunk file deleted, one truncated and one corrupted in each of three
  tables: `evosyn store check` names each in one line, `--resume` rebuilds them row-identically and the run
  stays finished;
- **hostile**: an LLM run against a hostile server (huge announced length, endless chunked body, stalled
  headers, a 50 MB reply, deep nesting, an echoed key): one line and a non-zero exit each, peak memory
  within 200 MB of the same run against a sane server, and the key nowhere under the store root.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from evosyn.benchmarks.faults import FAKE_KEY, KILL_ENV, LLM_ROLES, RUN_CONFIG, Bench, Check, _digests, _run_id, _tail

INIT_FAULTS = (("kill in MLflow's database build (at once)", {KILL_ENV: "mlflow-init"}),
               ("kill in MLflow's database build (after 0.5 s)", {KILL_ENV: "mlflow-init",
                                                                  "EVOSYN_FAULT_KILL_AFTER_S": "0.5"}),
               ("kill in MLflow's database build (after 1.5 s)", {KILL_ENV: "mlflow-init",
                                                                  "EVOSYN_FAULT_KILL_AFTER_S": "1.5"}),
               ("kill in the catalog build", {KILL_ENV: "catalog-init"}),
               ("full disk in MLflow's database build", {"EVOSYN_FAULT_FULL_AT": "mlflow-init"}))
DAMAGE = ("deleted", "truncated", "corrupted")
DAMAGED_TABLES = ("tasks", "trajectories", "verdicts")
MEMORY_SLACK_MB = 200


def reference(b: Bench, seed: int = 0, budget: int = 24, test_size: int = 20) -> tuple[Path, Path, dict]:
    """(config, home, digests) of the uninterrupted run every row compares with (shared with kill + resume)."""
    cfg = b.workdir / f"run-s{seed}.yaml"
    cfg.write_text(RUN_CONFIG.format(budget=budget, seed=seed, test_size=test_size))
    home = b.workdir / "kill" / "uninterrupted"
    if not home.exists() or _run_id(home) is None:
        res = b.cli(home, "run", "--config", str(cfg))
        if res.returncode != 0:
            raise RuntimeError(f"the uninterrupted run failed (exit {res.returncode}): {_tail(res.stderr)}")
    return cfg, home, _digests(home)


def _differ(want: dict, home: Path) -> list[str]:
    got = _digests(home)
    return sorted(t for t in set(want) | set(got) if want.get(t) != got.get(t))


def _resume(b: Bench, home: Path, cfg: Path):
    run_id = _run_id(home) if home.exists() else None
    return b.cli(home, "run", "--resume", run_id) if run_id else b.cli(home, "run", "--config", str(cfg))


# ---------------------------------------------------------------- first-time initialisations
def init_faults(b: Bench) -> list[Check]:
    cfg, _, want = reference(b)
    out = []
    for n, (name, env) in enumerate(INIT_FAULTS):
        t0 = time.perf_counter()
        home = b.workdir / "init" / str(n)
        first = b.cli(home, "run", "--config", str(cfg), extra=env)
        full = "EVOSYN_FAULT_FULL_AT" in env
        lines = [ln for ln in first.stderr.splitlines() if ln.strip()]
        if full:
            stopped = first.returncode == 1 and "Traceback" not in first.stderr and lines[-1].startswith("error:")
        else:
            stopped = first.returncode in (-signal.SIGKILL, 0)  # 0: the build finished before the timer
        again = _resume(b, home, cfg)
        differ = _differ(want, home) if again.returncode == 0 else ["(resume failed)"]
        ok = stopped and again.returncode == 0 and not differ
        how = f"first exit {first.returncode}" + (f" ({lines[-1][:160]})" if full and lines else "")
        out.append(Check("first-time init", name, ok,
                         f"{how}; rerun exit {again.returncode}; " +
                         ("13 tables row-identical" if not differ else f"tables differ: {', '.join(differ)}"
                          if again.returncode == 0 else _tail(again.stderr)), time.perf_counter() - t0))
        b.say(f"init: {name}: {'ok' if ok else out[-1].detail}")
    return out


# ---------------------------------------------------------------- random kills of the main PID only
def _descendants(pid: int) -> list[psutil.Process]:
    """Every process the command started (the temporary Prefect server runs in a session of its own)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _left(procs: list[psutil.Process], wait_s: float = 30.0) -> list[int]:
    """Those of ``procs`` still running after ``wait_s``: their parent's death should have stopped them."""
    deadline = time.monotonic() + wait_s
    while True:
        left = [p.pid for p in procs if _running(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return False


def random_kills(b: Bench, trials: int = 20, seed: int = 0) -> list[Check]:
    cfg, ref_home, want = reference(b)
    t0 = time.perf_counter()
    timing = b.cli(b.workdir / "random" / "timing", "run", "--config", str(cfg))  # a fresh store's own length
    length = time.perf_counter() - t0 if timing.returncode == 0 else 60.0
    rng = random.Random(seed)
    out = []
    for n in range(trials):
        # half over the whole run, half over its first quarter, where the first-time initialisations are
        at = rng.uniform(0.0, length if n % 2 == 0 else length / 4)
        t0 = time.perf_counter()
        home = b.workdir / "random" / f"t{n}"
        p = b.start(home, "run", "--config", str(cfg))
        try:
            p.wait(timeout=at)
            killed, left = False, []  # it finished first
        except subprocess.TimeoutExpired:
            children = _descendants(p.pid)
            os.kill(p.pid, signal.SIGKILL)  # the main PID only: what the OOM killer does
            p.wait()
            killed, left = True, _left(children)
            for pid in left:  # counted: now cleared, so the next trial starts clean
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        b.finish(p)
        again = _resume(b, home, cfg)
        differ = _differ(want, home) if again.returncode == 0 else ["(resume failed)"]
        ok = again.returncode == 0 and not differ and not left
        detail = (f"killed at {at:.1f}s of {length:.0f}s" if killed else f"finished before {at:.1f}s") + \
            f"; {len(left)} process(es) left; resume exit {again.returncode}; " + \
            ("13 tables row-identical" if not differ else f"differ: {', '.join(differ)} {_tail(again.stderr, 1)}")
        out.append(Check("random kill (main PID)", f"trial {n + 1}", ok, detail, time.perf_counter() - t0,
                         {"at_s": at, "killed": killed, "left": left}))
        b.say(f"random kill {n + 1}/{trials}: {detail}")
        shutil.rmtree(home, ignore_errors=True)  # disk: 20 stores
    return out


# ---------------------------------------------------------------- damaged chunks
def _damage(path: Path, how: str) -> None:
    if how == "deleted":
        path.unlink()
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:  # one byte in the middle changed: the footer still reads, the checksum does not match
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))


def damaged_chunks(b: Bench) -> Check:
    from evosyn.storage.store import Store

    cfg, ref_home, _ = reference(b)
    t0 = time.perf_counter()
    home = b.workdir / "damage"
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(ref_home, home)
    want = _digests(home)  # the copy before the damage
    run_id = _run_id(home)
    store = Store(home, create=False)
    damaged = []
    for table in DAMAGED_TABLES:
        files = [p for p in store.files(table, run_id=run_id, round=1) if p.stem.startswith(("gen-", "chunk-"))]
        for how, path in zip(DAMAGE, files):
            _damage(path, how)
            damaged.append(path)
    check = b.cli(home, "store", "check")
    lines = [ln for ln in check.stdout.splitlines() if ln.strip()]
    named = sum(any(str(d) in ln for ln in lines) for d in damaged)
    resumed = b.cli(home, "run", "--resume", run_id)
    differ = _differ(want, home) if resumed.returncode == 0 else ["(resume failed)"]
    status = Store(home, create=False).read_records("runs", run_id=run_id)[0].status
    after = b.cli(home, "store", "check")
    ok = (check.returncode == 1 and len(lines) == len(damaged) == named == 9 and not differ
          and status == "finished" and after.returncode == 0)
    return Check("damaged chunks", "deleted, truncated, corrupted x tasks, trajectories, verdicts", ok,
                 f"store check: {len(lines)} lines for {len(damaged)} damaged files ({named} named), exit "
                 f"{check.returncode}; resume exit {resumed.returncode}, "
                 + ("13 tables row-identical" if not differ else f"differ: {', '.join(differ)}")
                 + f"; run {status}; check after: exit {after.returncode}", time.perf_counter() - t0)


# ---------------------------------------------------------------- a hostile LLM server
def _llm_cfg(path: Path, url: str) -> Path:
    roles = "".join(f"  {r}: {{provider: openai, model: gpt-4o-mini, base_url: '{url}', max_retries: 0, "
                    f"max_invalid_retries: 1, timeout_s: 20}}\n" for r in LLM_ROLES)
    path.write_text(f"rounds: 1\nbudget: 8\nseed: 0\ntest_size: 20\nchunk_size: 4\nbackend: llm\nroles:\n{roles}")
    return path


def _peak_mb(b: Bench, home: Path, cfg: Path) -> tuple[subprocess.CompletedProcess, float]:
    """The run, and its peak resident memory (MB), from the kernel's own account of the child (wait4)."""
    p = b.start(home, "run", "--config", str(cfg), extra={"OPENAI_API_KEY": FAKE_KEY})
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return b.finish(p), usage.ru_maxrss / 1024


def hostile_server(b: Bench) -> list[Check]:
    from evosyn.benchmarks.fake_llm_server import FakeLLMServer
    from evosyn.benchmarks.hostile_server import MODES, HostileServer
    from evosyn.benchmarks.llm_script import RoleScript

    t0 = time.perf_counter()
    with FakeLLMServer(RoleScript(b.domain)) as sane:
        res, base = _peak_mb(b, b.workdir / "hostile" / "sane", _llm_cfg(b.workdir / "sane.yaml", sane.base_url))
    out = [Check("hostile server", "a sane server (the baseline)", res.returncode == 0,
                 f"exit {res.returncode}; peak {base:.0f} MB", time.perf_counter() - t0, {"peak_mb": base})]
    for mode in MODES:
        t0 = time.perf_counter()
        home = b.workdir / "hostile" / mode
        with HostileServer(mode) as server:
            res, peak = _peak_mb(b, home, _llm_cfg(b.workdir / f"{mode}.yaml", server.base_url))
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
        leaks = [str(p) for p in home.rglob("*") if p.is_file() and FAKE_KEY.encode() in p.read_bytes()]
        ok = (res.returncode != 0 and len(errors) == 1 and "Traceback" not in res.stderr
              and peak - base <= MEMORY_SLACK_MB and not leaks)
        out.append(Check("hostile server", mode, ok,
                         f"exit {res.returncode}; {errors[0][:180] if errors else _tail(res.stderr, 1)}; peak "
                         f"{peak:.0f} MB ({peak - base:+.0f} vs sane); key in {len(leaks)} files",
                         time.perf_counter() - t0, {"peak_mb": peak, "leaks": leaks[:5]}))
        b.say(f"hostile {mode}: {out[-1].detail}")
    return out


def checks(b: Bench, want: Callable[[str], bool], trials: int = 20) -> list[Check]:
    """The rows of the areas ``want`` names: init, random, damage, hostile."""
    out: list[Check] = []
    if want("init"):
        out += init_faults(b)
    if want("random"):
        out += random_kills(b, trials=trials)
    if want("damage"):
        out.append(damaged_chunks(b))
        b.say(f"damage: {out[-1].detail}")
    if want("hostile"):
        out += hostile_server(b)
    return out
