"""deployments/prefect.yaml: entry points that load, parameters the flows accept, pools, the sweep schedule."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PREFECT_YAML = REPO / "deployments" / "prefect.yaml"


@pytest.fixture(scope="module")
def spec() -> dict:
    return yaml.safe_load(PREFECT_YAML.read_text())


@pytest.fixture(scope="module")
def deployments(spec) -> dict[str, dict]:
    return {d["name"]: d for d in spec["deployments"]}


def test_the_three_deployments_on_their_pools(deployments):
    assert set(deployments) == {"evosyn-run", "evosyn-sweep", "sft-train"}
    pools = {n: d["work_pool"]["name"] for n, d in deployments.items()}
    assert pools == {"evosyn-run": "cpu", "evosyn-sweep": "cpu", "sft-train": "gpu"}


def test_definitions_are_shared_through_anchors():
    text = PREFECT_YAML.read_text()
    assert "definitions:" in text
    for anchor in ("cpu_pool", "gpu_pool", "run_config", "weekly_sweep"):
        assert f"&{anchor}" in text and f"*{anchor}" in text, anchor


def test_sweep_has_an_inactive_cron_schedule(deployments):
    schedules = deployments["evosyn-sweep"]["schedules"]
    assert len(schedules) == 1 and schedules[0]["active"] is False
    from prefect.client.schemas.schedules import CronSchedule

    CronSchedule(cron=schedules[0]["cron"], timezone=schedules[0]["timezone"])  # raises on a bad cron
    assert "schedules" not in deployments["evosyn-run"]


def test_pull_step_resolves_the_code_dir_on_the_worker(spec):
    (step,) = spec["pull"]
    assert step["prefect.deployments.steps.set_working_directory"]["directory"] == "{{ $EVOSYN_PROJECT_DIR }}"


def test_entrypoints_load_flows_and_parameters_validate(deployments):
    from prefect.flows import load_flow_from_entrypoint
    from prefect.utilities.callables import parameter_schema

    from evosyn.config import validate_config

    names = {"evosyn-run": "evosyn-run", "evosyn-sweep": "evosyn-sweep", "sft-train": "sft-train"}
    for name, dep in deployments.items():
        path, func = dep["entrypoint"].split(":")
        assert path.startswith("flows/") and (REPO / path).is_file(), dep["entrypoint"]
        flow = load_flow_from_entrypoint(str(REPO / path) + ":" + func)
        assert flow.name == names[name]
        schema = parameter_schema(flow).model_dump()
        assert set(dep.get("parameters", {})) <= set(schema["properties"]), name
    validate_config(deployments["evosyn-run"]["parameters"]["cfg"], source="prefect.yaml evosyn-run")
    sweep = deployments["evosyn-sweep"]["parameters"]
    validate_config(sweep["base"], source="prefect.yaml evosyn-sweep")
    assert sweep["arms"] and sweep["seeds"]
    # the weekly sweep names no domain: [] means every installed pack with an environment
    # (flows.sweep.sweep_domains; tests/flows/test_sweep.py), and the base run takes the default pack
    assert sweep["domains"] == [] and "domain" not in sweep["base"]


def test_train_deployment_config_field():
    from evosyn.config import ConfigError, validate_config

    assert validate_config({}).train_deployment is None
    assert validate_config({"train_deployment": "sft-train/sft-train"}).train_deployment == "sft-train/sft-train"
    with pytest.raises(ConfigError, match="train_deployment"):
        validate_config({"train_deployment": "sft-train"})


def test_run_id_does_not_depend_on_where_training_runs():
    from evosyn.flows.run import run_id_for
    from evosyn.config import validate_config

    assert run_id_for(validate_config({})) == run_id_for(validate_config({"train_deployment": "sft-train/sft-train"}))
