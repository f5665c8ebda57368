"""`evosyn bench faults`, the second audit's rows: hostile inputs, user SQL, broken packs, a damaged test set,
unvouched files, and documented commands on every built-in domain.

Each row runs the real CLI as a subprocess (``Bench.cli``) the way a user or a hostile environment meets it, and
holds it to the command line's contract: bad input is one ``error:`` line and exit 2, a failed run one line and
exit 1, no traceback, and nothing written where nothing should be.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Callable

from evosyn.benchmarks.faults import Bench, Check, _tail



def built_in() -> list[str]:
    """The domains evosyn ships (its own packs, not a user's folder): each documented command runs on every one."""
    from evosyn.envs.packs import known

    import evosyn.domains as shipped

    own = {p.name for p in Path(shipped.__file__).parent.iterdir() if (p / "__init__.py").is_file()}
    return [d for d in known() if d in own]


def _lines(text: str) -> list[str]:
    return [ln for ln in (text or "").splitlines() if ln.strip()]


def one_line(res: subprocess.CompletedProcess, code: int) -> tuple[bool, str]:
    """(held, what happened): exit ``code``, one ``error:`` line on stderr, no traceback."""
    lines = _lines(res.stderr)
    errors = [ln for ln in lines if ln.startswith("error:")]
    held = res.returncode == code and len(errors) == 1 and "Traceback" not in res.stderr + res.stdout
    shown = errors[0] if errors else _tail(res.stderr, 2)
    return held, f"exit {res.returncode}; {len(lines)} stderr line(s): {shown[:220]}"


def _row(area: str, name: str, run: Callable[[], tuple[bool, str]]) -> Check:
    t0 = time.perf_counter()
    try:
        ok, detail = run()
    except Exception as exc:  # a row that cannot run fails, with why
        ok, detail = False, f"the row itself failed: {type(exc).__name__}: {exc}"[:300]
    return Check(area, name, ok, detail, time.perf_counter() - t0)


# ---------------------------------------------------------------- hostile inputs
def _deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def input_rows(b: Bench) -> list[Check]:
    work = b.workdir / "inputs"
    work.mkdir(parents=True, exist_ok=True)
    home = work / "home"
    good = work / "trajectory.json"
    good.write_text(json.dumps({"messages": [], "termination": "agent_stop"}))

    domain = b.domain.name  # the default pack's

    def verify(task: Path, trajectory: Path) -> subprocess.CompletedProcess:
        return b.cli(home, "verify", "--domain", domain, "--task", str(task), "--trajectory", str(trajectory),
                     timeout=120)

    def deep() -> tuple[bool, str]:
        f = work / "deep.json"
        f.write_text(_deep_json(100_000))
        return one_line(verify(f, good), 2)

    def digits() -> tuple[bool, str]:
        f = work / "digits.json"
        f.write_text('{"id": "t", "x": ' + "7" * 5000 + "}")
        return one_line(verify(f, good), 2)

    def huge() -> tuple[bool, str]:
        f = work / "huge.json"
        with open(f, "wb") as fh:  # sparse: 300 MB announced, nothing on disk
            fh.truncate(300 * 1024 * 1024)
        t0 = time.perf_counter()
        p = b.start(home, "verify", "--domain", domain, "--task", str(good), "--trajectory", str(f))
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        res = b.finish(p)
        secs, peak = time.perf_counter() - t0, usage.ru_maxrss / 1024
        ok, detail = one_line(res, 2)
        f.unlink()
        return ok and peak < 300, f"{detail}; peak {peak:.0f} MB, {secs:.1f} s"

    def config(name: str, text: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            cfg = work / f"{name}.yaml"
            cfg.write_text(text)
            res = b.cli(home / name, "run", "--config", str(cfg), timeout=300)
            ok, detail = one_line(res, 2)
            left = (home / name / "tables").exists()
            return ok and not left, detail + ("; the store holds tables (a run was started)" if left else "")
        return go

    rows = [("verify: JSON nested 100,000 levels", deep), ("verify: an integer of 5,000 digits", digits),
            ("verify: a 300 MB trajectory", huge),
            ("run: seed 10^23", config("seed", "rounds: 1\nbudget: 8\nseed: 100000000000000000000000\n")),
            ("run: batch_poll_s 1e308",
             config("poll", "rounds: 1\nbudget: 8\nroles:\n  designer: {batch_poll_s: 1e308}\n")),
            ("run: a duplicate YAML key", config("dup", "rounds: 1\nbudget: 8\nseed: 1\nseed: 2\n"))]
    return [_row("hostile input", name, go) for name, go in rows]


# ---------------------------------------------------------------- user SQL
def query_rows(b: Bench) -> list[Check]:
    work = b.workdir / "query"
    home = work / "home"
    res = b.cli(home, "synth", "--n", "6", "--quiet", timeout=600)  # the default pack
    if res.returncode != 0:
        return [Check("user SQL", "a store to query", False, f"synth failed: {_tail(res.stderr)}")]
    tasks = next((home / "tables" / "tasks").rglob("*.parquet"))
    outside = work / "outside.parquet"
    inside = tasks.parent / "planted.parquet"
    secret = work / "secret.csv"
    secret.write_text("name,key\nalice,s3cr3t\n")

    def refused(sql: str, written: Path | None = None) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            t0 = time.perf_counter()
            r = b.cli(home, "query", sql, timeout=120)
            ok, detail = one_line(r, 2)
            made = written is not None and written.exists()
            quick = time.perf_counter() - t0 < 30
            fetched = "download" in r.stderr.lower()  # refused before any network request, not failed by one
            return (ok and not made and quick and not fetched and "s3cr3t" not in r.stdout,
                    detail + ("; the file was written" if made else "") + ("; it tried a download" if fetched
                                                                          else ""))
        return go

    def plain() -> tuple[bool, str]:
        r = b.cli(home, "query", "select count(*) as n from tasks", "--format", "json", timeout=120)
        return r.returncode == 0 and '"n"' in r.stdout, f"exit {r.returncode}; {r.stdout.strip()[:80]}"

    rows = [("a query of the store's tables still works", plain),
            ("COPY TO a file outside the store", refused(f"COPY (select 1 as x) TO '{outside}' (FORMAT parquet)",
                                                         outside)),
            ("COPY TO a file inside the store's tables", refused(f"COPY (select 'x' as evil) TO '{inside}' "
                                                                 "(FORMAT parquet)", inside)),
            ("read_csv of a file outside the store", refused(f"select * from read_csv('{secret}')")),
            ("ATTACH a database", refused(f"ATTACH '{work / 'other.duckdb'}' AS other", work / "other.duckdb")),
            ("INSTALL an extension", refused("INSTALL httpfs"))]
    return [_row("user SQL", name, go) for name, go in rows]


# ---------------------------------------------------------------- documented commands on every built-in domain
def domain_rows(b: Bench) -> list[Check]:
    home = b.workdir / "domains"

    def official(domain: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            r = b.cli(home, "verify", "--domain", domain, "--official", timeout=900)
            ok = r.returncode in (0, 1) and "Traceback" not in r.stderr and not any(
                ln.startswith("error:") for ln in _lines(r.stderr))
            counts = [ln.strip(" │┃") for ln in _lines(r.stdout) if ln.strip(" │┃").startswith(("passed", "failed"))]
            return ok, f"exit {r.returncode}; " + "; ".join(" ".join(c.split()) for c in counts)[:200]
        return go

    def bench_verify(domain: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            r = b.cli(home, "bench", "verify", "--domain", domain, "--limit", "5",
                      "--output", str(b.workdir / f"bv-{domain}.json"), timeout=1200)
            ok = r.returncode == 0 and "Traceback" not in r.stderr
            return ok, f"exit {r.returncode}; {_tail(r.stdout, 1)[:200]}"
        return go

    domains = built_in()
    rows = [(f"verify --official, defaults, {d}", official(d)) for d in domains]
    rows += [(f"bench verify --limit 5, defaults, {d}", bench_verify(d)) for d in domains]
    return [_row("documented commands", name, go) for name, go in rows]


# ---------------------------------------------------------------- a damaged test set, a file no marker vouches for
def store_rows(b: Bench) -> list[Check]:
    import shutil

    from evosyn.benchmarks.faults import _digests, _run_id
    from evosyn.benchmarks.faults_store import reference

    _, ref_home, _ = reference(b)

    def copy(name: str) -> tuple[Path, dict]:
        home = b.workdir / "store" / name
        shutil.rmtree(home, ignore_errors=True)
        shutil.copytree(ref_home, home)
        return home, _digests(home)

    def test_set() -> tuple[bool, str]:
        home, want = copy("testset")
        chunks = sorted((home / "tables" / "tasks").glob("run_id=testset-*/round=0/*.parquet"))
        if not chunks:
            return False, "the reference run holds no test-set chunk"
        chunks[0].write_bytes(chunks[0].read_bytes()[:100])
        repair = b.cli(home, "store", "check", "--repair", timeout=900)
        after = b.cli(home, "store", "check", timeout=300)
        got = _digests(home)
        differ = sorted(t for t in set(want) | set(got) if want.get(t) != got.get(t))
        identical = repair.returncode == 0 and after.returncode == 0 and not differ
        loud = repair.returncode == 1 and one_line(repair, 1)[0]  # or: a loud failure naming what is lost
        return bool(identical or loud), (f"repair exit {repair.returncode}, check after exit {after.returncode}; "
                                         + ("14 tables row-identical" if not differ else f"differ: {', '.join(differ)}")
                                         + f"; {_tail(repair.stdout, 1)[:200]}")

    def unvouched() -> tuple[bool, str]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        home, want = copy("unvouched")
        run_id = _run_id(home)
        planted = home / "tables" / "tasks" / f"run_id={run_id}" / "round=1" / "evil.parquet"
        pq.write_table(pa.table({"evil": ["x"]}), planted)
        check = b.cli(home, "store", "check", timeout=300)
        named = any(str(planted) in ln or planted.name in ln for ln in _lines(check.stdout))
        repair = b.cli(home, "store", "check", "--repair", timeout=600)
        query = b.cli(home, "query", "select count(task_id) as n from tasks", "--format", "json", timeout=120)
        got = _digests(home)
        differ = sorted(t for t in set(want) | set(got) if want.get(t) != got.get(t))
        ok = check.returncode == 1 and named and repair.returncode == 0 and query.returncode == 0 and not differ \
            and not planted.exists()
        return ok, (f"check exit {check.returncode} ({'named' if named else 'not named'}); repair exit "
                    f"{repair.returncode}; query exit {query.returncode}; "
                    + ("14 tables row-identical" if not differ else f"differ: {', '.join(differ)}"))

    rows = [("a truncated test-set chunk, store check --repair", test_set),
            ("a planted Parquet file no marker vouches for", unvouched)]
    return [_row("store", name, go) for name, go in rows]


# ---------------------------------------------------------------- a user's pack, broken as a new user breaks one
def _pack(b: Bench, name: str, edit: Callable[[Path], None]) -> tuple[Path, Path]:
    """(the user's pack folder, a home) with pack ``name`` scaffolded by `evosyn new-domain` and broken by ``edit``."""
    packs = b.workdir / "packs" / name
    home = packs.parent / f"home-{name}"
    res = b.cli(home, "new-domain", name, "--dir", str(packs), timeout=120)
    if res.returncode != 0:
        raise RuntimeError(f"new-domain failed: {_tail(res.stderr)}")
    edit(packs / name)
    return packs, home


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        raise RuntimeError(f"{path.name}: the template changed ({old.strip()!r} not found)")
    path.write_text(text.replace(old, new, 1))


def pack_rows(b: Bench) -> list[Check]:
    def user(packs: Path) -> dict[str, str]:
        return {"EVOSYN_DOMAINS": str(packs)}

    def exits() -> tuple[bool, str]:
        packs, home = _pack(b, "pk_exit", lambda f: _append(f / "__init__.py", "import sys\nsys.exit(3)\n"))
        listed = b.cli(home, "envs", "list", extra=user(packs), timeout=120)
        other = b.cli(home, "preview", "--n", "1", extra=user(packs), timeout=300)
        own = b.cli(home, "synth", "--domain", "pk_exit", "--n", "2", extra=user(packs), timeout=300)
        ok, detail = one_line(own, 2)
        return (ok and listed.returncode == 0 and other.returncode == 0 and "pk_exit" in listed.stdout,
                f"envs list exit {listed.returncode}, preview of the default exit {other.returncode}; its own "
                f"domain: {detail}")

    def defaults() -> tuple[bool, str]:
        packs, home = _pack(b, "pk_default", lambda f: _replace(f / "pack.py", "class Pack(DomainPack):\n",
                                                                "class Pack(DomainPack):\n    default = True\n"))
        ok, detail = one_line(b.cli(home, "preview", "--n", "1", extra=user(packs), timeout=300), 2)
        return ok, detail

    def raising_tool() -> tuple[bool, str]:
        def edit(f: Path) -> None:
            text = (f / "environment.py").read_text()
            at = text.index("def get_", text.index("@tool") if "@tool" in text else 0)
            head = text.index(":\n", at) + 2
            (f / "environment.py").write_text(text[:head] + "    len(None)\n" + text[head:])
        packs, home = _pack(b, "pk_tool", edit)
        ok, detail = one_line(b.cli(home, "verify", "--domain", "pk_tool", "--official", extra=user(packs),
                                    timeout=300), 2)
        return ok and "environment.py:" in detail, detail

    def empty_factors() -> tuple[bool, str]:
        def edit(f: Path) -> None:
            space = json.loads((f / "ontology.json").read_text())
            (f / "ontology.json").write_text(json.dumps({**space, "factors": []}))
        packs, home = _pack(b, "pk_space", edit)
        ok, detail = one_line(b.cli(home, "synth", "--domain", "pk_space", "--n", "2", extra=user(packs),
                                    timeout=300), 2)
        return ok and "ontology.json" in detail, detail

    rows = [("a pack that calls sys.exit at import", exits), ("a second default pack", defaults),
            ("a tool that raises TypeError (verify --official)", raising_tool),
            ("an ontology with no factors", empty_factors)]
    return [_row("broken pack", name, go) for name, go in rows]


AREAS = {"inputs": input_rows, "query": query_rows, "store": store_rows, "packs": pack_rows, "domains": domain_rows}


def checks(b: Bench, want: Callable[[str], bool]) -> list[Check]:
    out: list[Check] = []
    for area, rows in AREAS.items():
        if want(area):
            out += rows(b)
            for c in out[-1:]:
                b.say(f"{area}: {c.check}: {'ok' if c.passed else c.detail}")
    return out
