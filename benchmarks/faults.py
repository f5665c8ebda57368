"""`evosyn bench faults`: the crash, resume and fail-loud guarantees, measured end to end.

Every check runs the real CLI as a subprocess on its own store root (real
Prefect, Parquet, DuckDB, MLflow), the way a user or a hostile environment
would meet it:

- **kill + resume**: SIGKILL at each stage boundary of round 1 (and in round 2's
  reflect), then ``evosyn run --resume``; every table's content hash must equal
  that of an uninterrupted run of the same seed;
- **fuzzed replies**: malformed replies through every role's parse-and-validate
  path; 0 crashes;
- **faulty LLM**: a round against the local scripted server with 30% of first
  requests failing (429, 500, malformed) keeps the same verified tasks as a
  fault-free round;
- **server down**: a non-zero exit and one ``error:`` line;
- **concurrent first use**: 3 runs started at once on a fresh store all finish,
  and the store they leave is consistent;
- **key leaks**: the fake API key of the LLM runs appears in no file they wrote
  and in none of their output;
- **init**, **random**, **damage**, **hostile**: the store's and the client's
  rows (benchmarks/faults_store.py).
"""
from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from evosyn.envs.base import Domain

FAKE_KEY = "sk-evosyn-bench-FAKEKEY-0123456789abcdef"
KILL_ENV = "EVOSYN_FAULT_KILL_AT"
# (name shown, value of KILL_ENV): the stage boundaries of round 1, then round 2's reflect
KILL_POINTS = (("design", "design"), ("plan", "plan"), ("generate", "generate"), ("rollout", "rollout"),
               ("verify", "verify"), ("mid-training save", "train"), ("evaluate", "evaluate"),
               ("test-set build", "testset"), ("round 2 reflect", "reflect@2"))
RUN_CONFIG = "rounds: 2\nbudget: {budget}\nseed: {seed}\ntest_size: {test_size}\nchunk_size: 6\n"
LLM_ROLES = ("designer", "planner", "generator", "teacher", "user", "repair", "reflector")


@dataclass
class Check:
    area: str
    check: str
    passed: bool
    detail: str
    seconds: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- the CLI as a user runs it
class Bench:
    def __init__(self, workdir: Path, say: Callable[[str], None] = lambda s: None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.prefect_home = self.workdir / "prefect"  # one Prefect database for every run: migrated once
        self.say = say
        self.outputs: list[str] = []  # every stdout / stderr, searched for the key at the end

    @functools.cached_property
    def domain(self) -> Domain:
        """The environment of the domain the bench's runs use (their config names none: the default pack),
        resolved once, when a check first needs it (the scripted LLM server answers for it)."""
        from evosyn.flows.compile import compile_domain

        return compile_domain(None).env

    def env(self, home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", KILL_ENV, "PREFECT_API_URL", "MLFLOW_TRACKING_URI")}
        env.update({"EVOSYN_HOME": str(home), "PREFECT_HOME": str(self.prefect_home), "NO_PROXY": "*",
                    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"})
        env.update(extra or {})
        return env

    def start(self, home: Path, *args: str, extra: dict[str, str] | None = None) -> subprocess.Popen:
        # its own session, so that whatever the run spawned (Prefect's server) goes with it after a kill;
        # output to files, not pipes: an orphaned child would hold a pipe open after a kill
        out = tempfile.TemporaryFile(mode="w+", dir=self.workdir)
        err = tempfile.TemporaryFile(mode="w+", dir=self.workdir)
        p = subprocess.Popen([sys.executable, "-m", "evosyn.flows.cli", *args], env=self.env(home, extra), stdout=out,
                             stderr=err, text=True, cwd=self.workdir, start_new_session=True)
        p.files = (out, err)  # type: ignore[attr-defined]
        return p

    def finish(self, p: subprocess.Popen, timeout: float = 900) -> subprocess.CompletedProcess:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            p.wait()
        _kill_group(p)  # whatever it left behind
        texts = []
        for fh in p.files:  # type: ignore[attr-defined]
            fh.seek(0)
            texts.append(fh.read())
            fh.close()
        self.outputs += texts
        return subprocess.CompletedProcess(p.args, p.returncode, texts[0], texts[1])

    def cli(self, home: Path, *args: str, extra: dict[str, str] | None = None,
            timeout: float = 900) -> subprocess.CompletedProcess:
        return self.finish(self.start(home, *args, extra=extra), timeout)


def _kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(text: str, n: int = 3) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[-400:]


def _digests(home: Path) -> dict[str, str]:
    """Content hash per table over every run of the store (the run and its test set)."""
    from evosyn.storage.digest import table_digests
    from evosyn.storage.store import Store

    store = Store(home, create=False)
    return table_digests(store, store.runs(any_table=True))


def _run_id(home: Path) -> str | None:
    from evosyn.storage.store import Store

    runs = Store(home, create=False).runs()  # the `runs` table: the test set has no row there
    return runs[0] if runs else None


# ---------------------------------------------------------------- kill + resume
def kill_and_resume(b: Bench, seed: int = 0, budget: int = 24, test_size: int = 20,
                    points: tuple[tuple[str, str], ...] = KILL_POINTS) -> list[Check]:
    cfg = b.workdir / f"run-s{seed}.yaml"
    cfg.write_text(RUN_CONFIG.format(budget=budget, seed=seed, test_size=test_size))
    t0 = time.perf_counter()
    clean = b.workdir / "kill" / "uninterrupted"
    res = b.cli(clean, "run", "--config", str(cfg))
    if res.returncode != 0:
        return [Check("kill + resume", "uninterrupted run", False, f"exit {res.returncode}: {_tail(res.stderr)}")]
    reference = _digests(clean)
    b.say(f"kill + resume: uninterrupted run in {time.perf_counter() - t0:.0f}s")
    out = []
    for name, point in points:
        t0 = time.perf_counter()
        home = b.workdir / "kill" / point.replace("@", "-r")
        killed = b.cli(home, "run", "--config", str(cfg), extra={KILL_ENV: point})
        run_id = _run_id(home) if home.exists() else None
        if killed.returncode != -signal.SIGKILL:
            out.append(Check("kill + resume", f"SIGKILL at {name}", False,
                             f"the run was not killed there (exit {killed.returncode}): {_tail(killed.stderr)}",
                             time.perf_counter() - t0))
            continue
        if run_id is None:  # killed before the run row: a plain rerun is the resume
            resumed = b.cli(home, "run", "--config", str(cfg))
        else:
            resumed = b.cli(home, "run", "--resume", run_id)
        if resumed.returncode != 0:
            out.append(Check("kill + resume", f"SIGKILL at {name}", False,
                             f"resume failed (exit {resumed.returncode}): {_tail(resumed.stderr)}",
                             time.perf_counter() - t0))
            continue
        got = _digests(home)
        differ = sorted(t for t in set(reference) | set(got) if reference.get(t) != got.get(t))
        detail = (f"{len(got)} tables row-identical to the uninterrupted run" if not differ
                  else f"tables differ: {', '.join(differ)}")
        out.append(Check("kill + resume", f"SIGKILL at {name}", not differ, detail, time.perf_counter() - t0,
                         {"differ": differ}))
        b.say(f"kill + resume at {name}: {'ok' if not differ else detail} ({time.perf_counter() - t0:.0f}s)")
    return out


# ---------------------------------------------------------------- fuzzed replies
def fuzzed_replies(dom: Domain, n: int = 3000, seed: int = 0) -> Check:
    from evosyn.benchmarks.fuzz import fuzz

    t0 = time.perf_counter()
    crashes_seen: list[str] = []
    counts = fuzz(dom, n=n, random_seed=seed, on_crash=lambda role, what: crashes_seen.append(f"{role}: {what}"))
    replies = sum(c["replies"] for c in counts.values())
    crashes = sum(c["crashes"] for c in counts.values())
    per_role = ", ".join(f"{r} {c['replies']}/{c['crashes']}" for r, c in counts.items())
    return Check("fuzzed replies", f"{replies} malformed replies over {len(counts)} roles",
                 crashes == 0 and replies >= n, f"{crashes} crashes (replies/crashes per role: {per_role})",
                 time.perf_counter() - t0, {"per_role": counts, "crashes": crashes_seen[:20]})


# ---------------------------------------------------------------- LLM runs against the local scripted server
def _llm_config(path: Path, base_url: str, *, max_retries: int = 4) -> Path:
    roles = "".join(f"  {r}: {{provider: openai, model: gpt-4o-mini, base_url: '{base_url}', "
                    f"max_retries: {max_retries}, max_invalid_retries: 3, max_concurrency: 4}}\n" for r in LLM_ROLES)
    path.write_text("rounds: 1\nbudget: 8\nseed: 0\ntest_size: 20\nchunk_size: 4\n"
                    f"backend: llm\nroles:\n{roles}")
    return path


def _kept(home: Path) -> list[str]:
    from evosyn.storage.store import Store

    return sorted({v.task_id for v in Store(home, create=False).read_records("verdicts")
                   if v.passed and not v.run_id.startswith("testset-")})


def faulty_llm_round(b: Bench, rate: float = 0.3) -> Check:
    from evosyn.benchmarks.fake_llm_server import FakeLLMServer
    from evosyn.benchmarks.llm_script import Faulty, RoleScript

    t0 = time.perf_counter()
    faulty = Faulty(RoleScript(b.domain), rate=rate)
    with FakeLLMServer(faulty) as server:
        cfg = _llm_config(b.workdir / "llm.yaml", server.base_url)
        key = {"OPENAI_API_KEY": FAKE_KEY}
        faulty.arm(False)
        clean = b.cli(b.workdir / "llm" / "clean", "run", "--config", str(cfg), extra=key)
        requests_clean = server.count
        faulty.arm(True)
        bad = b.cli(b.workdir / "llm" / "faulty", "run", "--config", str(cfg), extra=key)
        faulty.arm(False)
        requests_faulty = server.count - requests_clean
    if clean.returncode != 0 or bad.returncode != 0:
        return Check("faulty LLM", f"{rate:.0%} faulty replies vs fault-free", False,
                     f"exit {clean.returncode} / {bad.returncode}: {_tail(clean.stderr + bad.stderr)}",
                     time.perf_counter() - t0)
    a, f = _kept(b.workdir / "llm" / "clean"), _kept(b.workdir / "llm" / "faulty")
    faults = dict(faulty.faults)
    ok = a == f and len(a) > 0 and sum(faults.values()) > 0
    return Check("faulty LLM", f"{rate:.0%} faulty replies vs fault-free", ok,
                 f"kept {len(f)} vs {len(a)} tasks, {'same' if a == f else 'different'} ids; faults {faults}; "
                 f"requests {requests_faulty} vs {requests_clean}", time.perf_counter() - t0,
                 {"kept_clean": a, "kept_faulty": f, "faults": faults})


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def server_down(b: Bench) -> Check:
    t0 = time.perf_counter()
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    cfg = _llm_config(b.workdir / "llm-down.yaml", url, max_retries=1)
    home = b.workdir / "llm" / "down"
    res = b.cli(home, "run", "--config", str(cfg), extra={"OPENAI_API_KEY": FAKE_KEY}, timeout=600)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    run_id = _run_id(home) if home.exists() else None
    status = mlflow_status = None
    if run_id:  # it failed after it began: failed in the runs table and in MLflow
        import mlflow

        from evosyn.storage.store import Store

        rows = Store(home, create=False).read_records("runs", run_id=run_id)
        status = rows[-1].status if rows else None
        mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
        ml = mlflow.search_runs(experiment_names=["evosyn"])
        parent = ml[ml["tags.evosyn.level"] == "run"] if len(ml) else ml
        mlflow_status = parent["status"].iloc[0] if len(parent) else None
    recorded = run_id is None or (status == "failed" and mlflow_status == "FAILED")
    ok = (res.returncode != 0 and len(errors) == 1 and "Traceback" not in res.stderr and url in errors[0]
          and recorded)
    return Check("server down", "LLM server unreachable", ok,
                 f"exit {res.returncode}; {len(errors)} error line(s): {errors[0][:200] if errors else _tail(res.stderr)}"
                 f"; run {status or 'not started'}, MLflow {mlflow_status or '-'}", time.perf_counter() - t0,
                 {"stderr": res.stderr[-2000:]})


# ---------------------------------------------------------------- concurrent first use
def concurrent_runs(b: Bench, n: int = 3, budget: int = 12, test_size: int = 20) -> Check:
    import mlflow

    from evosyn.storage.store import Store

    t0 = time.perf_counter()
    home = b.workdir / "concurrent"
    cfgs = []
    for seed in range(n):
        path = b.workdir / f"concurrent-s{seed}.yaml"
        path.write_text(RUN_CONFIG.format(budget=budget, seed=seed, test_size=test_size).replace("rounds: 2",
                                                                                                 "rounds: 1"))
        cfgs.append(path)
    procs = [b.start(home, "run", "--config", str(c)) for c in cfgs]
    results = [b.finish(p) for p in procs]
    failed = [f"exit {r.returncode}: {_tail(r.stderr, 1)}" for r in results if r.returncode != 0]
    if failed:
        return Check("concurrent first use", f"{n} runs at once on a fresh store", False,
                     f"{len(failed)} of {n} failed: {'; '.join(failed)}", time.perf_counter() - t0)
    store = Store(home, create=False)
    runs = [r for r in store.read_records("runs") if not r.run_id.startswith("testset-")]
    finished = {r.run_id for r in runs if r.status == "finished"}
    dupes = _duplicate_keys(store)
    mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
    ml = mlflow.search_runs(experiment_names=["evosyn"])
    parents = int((ml["tags.evosyn.level"] == "run").sum()) if len(ml) else 0
    testsets = [r for r in store.runs(any_table=True) if r.startswith("testset-")]
    from evosyn.tasks.testset import KINDS

    ok = len(finished) == n and not dupes and parents == n and len(testsets) == len(KINDS)  # each set built once
    return Check("concurrent first use", f"{n} runs at once on a fresh store", ok,
                 f"{len(finished)}/{n} finished; {parents} MLflow parent runs; test sets {len(testsets)}; "
                 f"duplicated keys: {', '.join(dupes) or 'none'}", time.perf_counter() - t0)


def _duplicate_keys(store) -> list[str]:
    """Tables holding the same row twice."""
    from evosyn.storage.digest import normalized_rows
    from evosyn.storage.records import TABLES

    out = []
    for table in sorted(TABLES):
        for run_id in store.runs(any_table=True):  # per run: two runs may hold equal rows (the same initial space)
            rows = normalized_rows(store, table, run_id)
            if len(rows) != len(set(rows)):
                out.append(f"{table} of {run_id}")
    return out




# ---------------------------------------------------------------- secrets
def key_leaks(b: Bench, key: str = FAKE_KEY) -> Check:
    t0 = time.perf_counter()
    needle = key.encode()
    files, hits = 0, []
    for path in b.workdir.rglob("*"):
        if not path.is_file():
            continue
        files += 1
        try:
            if needle in path.read_bytes():
                hits.append(str(path.relative_to(b.workdir)))
        except OSError:
            continue
    hits += [f"console output {i}" for i, text in enumerate(b.outputs) if key in (text or "")]
    return Check("key leaks", "the fake API key in any file or output of the runs", not hits,
                 f"{len(hits)} occurrences in {files} files and {len(b.outputs)} outputs"
                 + (f": {', '.join(hits[:5])}" if hits else ""), time.perf_counter() - t0)


# ---------------------------------------------------------------- all of it
def run(workdir: Path | None = None, *, fuzz_n: int = 3000, only: set[str] | None = None,
        also: Callable[[Bench, Callable[[str], bool]], list[Check]] | None = None,
        say: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Every area ``only`` names (all: None); ``also(bench, want)``: more rows on the same bench (the store's and
    the client's, benchmarks/faults_store.py), before the search for the key."""
    t0 = time.perf_counter()
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="evosyn-bench-faults-")
        workdir = Path(tmp.name)
    b = Bench(workdir, say)
    want = lambda area: only is None or area in only  # noqa: E731
    checks: list[Check] = []
    try:
        if want("kill"):
            checks += kill_and_resume(b)
        if want("fuzz"):
            checks.append(fuzzed_replies(b.domain, fuzz_n))
            say(f"fuzz: {checks[-1].detail}")
        if want("llm"):
            checks.append(faulty_llm_round(b))
            say(f"faulty LLM: {checks[-1].detail}")
            checks.append(server_down(b))
            say(f"server down: {checks[-1].detail}")
        if want("concurrent"):
            checks.append(concurrent_runs(b))
            say(f"concurrent: {checks[-1].detail}")
        if also is not None:
            checks += also(b, want)
        if want("llm") or want("hostile"):  # the fake key of the LLM runs: searched for in everything they wrote
            checks.append(key_leaks(b))
    finally:
        if tmp is not None:
            tmp.cleanup()
    return {"passed": all(c.passed for c in checks), "checks": [asdict(c) for c in checks],
            "seconds": time.perf_counter() - t0, "workdir": str(workdir) if tmp is None else None}
