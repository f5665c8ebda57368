"""Docker files, checked without a Docker engine: they parse, copy paths that exist, pin versions that
agree with pyproject.toml, and the compose file wires the services the README describes."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
INSTRUCTIONS = {"FROM", "ENV", "WORKDIR", "COPY", "RUN", "VOLUME", "CMD", "ARG", "LABEL", "EXPOSE", "ENTRYPOINT"}


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, buf = [], ""
    for line in path.read_text().splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        buf += line.rstrip("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            word, _, rest = buf.strip().partition(" ")
            out.append((word, rest))
            buf = ""
    assert not buf, f"{path.name}: dangling line continuation"
    return out


def requirement(name: str, extra: str | None = None) -> Requirement:
    reqs = PYPROJECT["project"]["optional-dependencies"][extra] if extra else PYPROJECT["project"]["dependencies"]
    return next(Requirement(r) for r in reqs if Requirement(r).name == name)


def pins(text: str) -> dict[str, Version]:
    return {m[0].lower(): Version(m[1]) for m in re.findall(r'"?([A-Za-z0-9_.-]+)==([0-9][0-9A-Za-z.+-]*)"?', text)}


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.gpu"])
def test_dockerfile_parses_and_copies_existing_paths(name):
    steps = instructions(DOCKER / name)
    assert {w for w, _ in steps} <= INSTRUCTIONS, {w for w, _ in steps} - INSTRUCTIONS
    base = steps[0]
    assert base[0] == "FROM" and re.search(r":\d+\.\d+", base[1]), f"{name}: base image not pinned: {base[1]}"
    copied = [args.split()[:-1] for w, args in steps if w == "COPY"]
    for sources in copied:
        for src in sources:
            assert (REPO / src).exists(), f"{name}: COPY {src}: no such path in the repository"
    # every package pyproject.toml ships is copied in, so `pip install .` builds the same package
    for pkg in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]:
        assert [pkg.rstrip("*")] in copied, f"{name}: package {pkg} not copied"
    assert any(w == "RUN" and "pip install ." in a for w, a in steps)
    cmd = next(a for w, a in steps if w == "CMD")
    assert '"worker", "start"' in cmd and "--install-policy" in cmd


def test_python_versions_agree_with_pyproject():
    floor = Version(PYPROJECT["project"]["requires-python"].lstrip(">="))
    cpu = instructions(DOCKER / "Dockerfile")[0][1]
    assert Version(re.search(r"python:(\d+\.\d+)", cpu)[1]) >= floor
    gpu = (DOCKER / "Dockerfile.gpu").read_text()
    assert all(Version(v) >= floor for v in re.findall(r"python(\d+\.\d+) -m venv", gpu))


def test_gpu_pins_satisfy_the_train_and_serve_extras():
    pinned = pins((DOCKER / "Dockerfile.gpu").read_text())
    for name, extra in (("llamafactory", "train"), ("deepspeed", "train"), ("torch", "train"), ("vllm", "serve")):
        assert name in pinned, f"Dockerfile.gpu does not pin {name}"
        assert pinned[name] in requirement(name, extra).specifier, f"{name}=={pinned[name]} vs pyproject"


def test_compose_wires_postgres_prefect_mlflow_and_a_worker():
    spec = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = spec["services"]
    assert set(services) == {"postgres", "prefect-server", "mlflow", "worker-cpu"}
    prefect_tag = services["prefect-server"]["image"].split(":")[1]
    assert Version(prefect_tag.split("-")[0]) in requirement("prefect").specifier
    assert "postgresql+asyncpg://" in services["prefect-server"]["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    mlflow_cmd = " ".join(services["mlflow"]["command"])
    assert "--backend-store-uri postgresql://" in mlflow_cmd and "--artifacts-destination /mlartifacts" in mlflow_cmd
    assert services["mlflow"]["environment"]["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert any(v.startswith("mlartifacts:") for v in services["mlflow"]["volumes"])
    worker = services["worker-cpu"]["environment"]
    assert worker["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert worker["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    for svc in services.values():
        build = svc.get("build")
        if build:
            assert (DOCKER / build["context"] / build["dockerfile"]).is_file()
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            assert src in spec["volumes"] or (DOCKER / src).exists(), f"volume source {src} missing"
    # the services listen on loopback only unless someone decides otherwise
    assert all(p.startswith("127.0.0.1:") for s in services.values() for p in s.get("ports", []))
