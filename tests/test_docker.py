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
    for pkg, folder in PYPROJECT["tool"]["setuptools"]["package-dir"].items():
        assert [folder] in copied, f"{name}: package {pkg} (folder {folder}) not copied"
    assert any(w == "RUN" and re.search(r'pip install "?\.[\["\s]', a + " ") for w, a in steps)
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


def interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}`` with nothing set: the default (what a bare `docker compose up` uses)."""
    return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: m[2], value)


def option(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def test_compose_wires_postgres_prefect_mlflow_and_a_worker(compose):
    services = compose["services"]
    assert set(services) == {"postgres", "prefect-server", "mlflow", "worker-cpu"}
    prefect_tag = services["prefect-server"]["image"].split(":")[1]
    assert Version(prefect_tag.split("-")[0]) in requirement("prefect").specifier
    mlflow_cmd = services["mlflow"]["command"]
    assert option(mlflow_cmd, "--artifacts-destination") == "/mlartifacts" and "--serve-artifacts" in mlflow_cmd
    assert services["mlflow"]["environment"]["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert any(v.startswith("mlartifacts:") for v in services["mlflow"]["volumes"])
    # the worker reaches each server by its service name and the port its command listens on
    worker = services["worker-cpu"]["environment"]
    prefect_port = option(services["prefect-server"]["command"], "--port")
    assert worker["PREFECT_API_URL"] == f"http://prefect-server:{prefect_port}/api"
    assert worker["MLFLOW_TRACKING_URI"] == f"http://mlflow:{option(mlflow_cmd, '--port')}"
    # the services listen on loopback only unless someone decides otherwise
    assert all(p.startswith("127.0.0.1:") for s in services.values() for p in s.get("ports", []))


def test_compose_databases_are_the_ones_evosyn_up_uses(compose):
    """Prefect's and MLflow's URLs are the forms `evosyn up --db` derives from one database URL (driver and
    database name), with the postgres service's user, password, host and port, on databases its first start
    creates; the drivers are in the images; no URL (it holds the password) is on a command line."""
    from evosyn.storage import postgres

    services = compose["services"]
    pg_env = {k: interpolate(v) for k, v in services["postgres"]["environment"].items()}
    base = f"postgresql://{pg_env['POSTGRES_USER']}:{pg_env['POSTGRES_PASSWORD']}@postgres:5432/{pg_env['POSTGRES_DB']}"
    prefect_env = services["prefect-server"]["environment"]
    mlflow_env = services["mlflow"]["environment"]
    assert interpolate(prefect_env["PREFECT_SERVER_DATABASE_CONNECTION_URL"]) == postgres.prefect_url(base)
    assert interpolate(mlflow_env["MLFLOW_BACKEND_STORE_URI"]) == postgres.mlflow_url(base)
    # the password is one variable for all three services (a .env beside the file changes it everywhere)
    for value in (prefect_env["PREFECT_SERVER_DATABASE_CONNECTION_URL"], mlflow_env["MLFLOW_BACKEND_STORE_URI"]):
        assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] in value
    created = {pg_env["POSTGRES_DB"]} | set(re.findall(r"CREATE DATABASE (\w+);", (DOCKER / "postgres-init.sql").read_text()))
    assert {postgres.database(postgres.prefect_url(base)), postgres.database(postgres.mlflow_url(base))} <= created
    init = [v for v in services["postgres"]["volumes"] if "docker-entrypoint-initdb.d" in v]
    assert init and (DOCKER / init[0].split(":")[0]).is_file()
    # MLflow's driver comes with the image's `pip install ".[postgres]"`
    assert any(w == "RUN" and 'pip install ".[postgres]"' in a for w, a in instructions(DOCKER / "Dockerfile"))
    extra = {Requirement(r).name for r in PYPROJECT["project"]["optional-dependencies"]["postgres"]}
    assert {postgres.PREFECT_DRIVER, postgres.MLFLOW_DRIVER} <= extra
    assert not [n for n, s in services.items() if "postgresql" in " ".join(s.get("command", []))]


def test_compose_references_resolve(compose):
    """Every depends_on names a service (a service_healthy one has a healthcheck), every named volume is
    declared and used, every bind mount and build file exists."""
    services, volumes = compose["services"], compose["volumes"]
    used = set()
    for name, svc in services.items():
        for dep, cond in svc.get("depends_on", {}).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            if cond.get("condition") == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep} to be healthy: it has no healthcheck"
        build = svc.get("build")
        if build:
            assert (DOCKER / build["context"] / build["dockerfile"]).is_file()
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("."):
                assert (DOCKER / src).exists(), f"{name}: bind mount {src} missing"
            else:
                assert src in volumes, f"{name}: volume {src} not declared"
                used.add(src)
    assert used == set(volumes), f"declared but unused: {set(volumes) - used}"
    # one image built once: the services that build it name the same tag
    tags = {svc["image"] for svc in services.values() if "build" in svc}
    assert len(tags) == 1
