"""The install is one namespace, ``evosyn``: the wheel's only top-level name, so it sits beside any package called
``agents``, ``tasks`` or ``storage`` (OpenAI's Agents SDK installs ``agents``)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("storage", "config", "envs", "agents", "domains", "tasks", "flows", "benchmarks")
# benchmark results are data of this repository, not of the package
NOT_SHIPPED = ("benchmarks/results/",)


def checkout_files(*paths: str) -> list[str]:
    """The checkout's files (tracked, or new and not ignored): what a clean clone holds."""
    done = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *paths], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:  # not a git checkout: every file on disk
        return sorted(str(p.relative_to(ROOT)) for top in (paths or ("",)) for p in (ROOT / top).rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts and ".egg-info" not in str(p))
    return [f for f in done.stdout.splitlines() if (ROOT / f).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of a clean copy of the checkout (pip builds in the source tree: a stale build/ would leak in)."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    for name in checkout_files():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (found,) = out.glob("evosyn-*.whl")
    return found


def test_the_wheel_has_one_top_level_name(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"evosyn", wheel.name.split("-py3")[0] + ".dist-info"}, sorted(tops)


def test_the_wheel_holds_every_file_of_the_layers(wheel):
    """A subpackage missing from pyproject.toml's ``packages`` list (or a data file its patterns miss) fails here."""
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in checkout_files(*LAYERS, "evosyn") if not f.startswith(NOT_SHIPPED) and
               f"evosyn/{f.removeprefix('evosyn/')}" not in names]
    assert not missing, f"not in the wheel ({len(missing)}): {missing[:20]}"
    assert not [n for n in names if n.startswith("evosyn/benchmarks/results/")]


@pytest.mark.slow
def test_installs_beside_openai_agents(wheel, tmp_path):
    """The wheel and ``openai-agents`` in one venv: both import, and the CLI runs a small preview."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # our dependencies from the test environment (a .pth of its site-packages: not a site dir, so its editable
    # finder is not loaded), the wheel and openai-agents installed in the new venv itself
    here = subprocess.run([sys.executable, "-c", "import prefect, pathlib; print(pathlib.Path(prefect.__file__)"
                           ".parents[1])"], capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "test_env.pth").write_text(here + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for args in (["--no-deps", str(wheel)], ["openai-agents"]):
        done = subprocess.run([str(py), "-m", "pip", "install", "-q", *args], capture_output=True, text=True,
                              timeout=900, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
    # openai-agents is installed in the new venv, or already in the test environment (verifiers, of the dev
    # extra, depends on it): either way the interpreter's `agents` is OpenAI's, and evosyn's is the wheel's
    code = ("import agents, evosyn.agents, evosyn.flows.cli; from agents import Agent; "
            "print(agents.__file__.startswith((%r, %r)), evosyn.agents.__file__.startswith(%r), Agent.__name__)"
            % (site, here, site))
    done = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert done.stdout.split() == ["True", "True", "Agent"], done.stderr[-3000:]
    home = tmp_path / "home"
    done = subprocess.run([str(venv / "bin" / "evosyn"), "--home", str(home), "preview", "--domain", "airline",
                           "--n", "1"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
