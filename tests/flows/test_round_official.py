"""A run config's `official_eval`: checked in one line before any work; each round scores its learner on tau2's split."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from evosyn.envs.packs import get_domain
from evosyn.config import ConfigError, OfficialEvalConfig, RoleConfig, validate_config
from tests.flows.test_run_tracking import cli

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

CONFIG = ("domain: airline\nrounds: 1\nbudget: 8\nseed: 2\ntest_size: 10\nchunk_size: 4\n"
          "official_eval: {split: test, trials: 2, max_tasks: 3}\n")


@pytest.mark.parametrize("value, field", [({"split": "te st"}, "official_eval.split"),
                                          ({"trials": 0}, "official_eval.trials"),
                                          ({"max_tasks": 0}, "official_eval.max_tasks"),
                                          ({"k": 2}, "official_eval.k")])
def test_bad_values_are_one_line_naming_the_field(value, field):
    with pytest.raises(ConfigError) as err:
        validate_config({"official_eval": value})
    assert f"field '{field}'" in str(err.value) and "\n" not in str(err.value)


def test_the_split_and_the_llm_user_are_checked_against_the_domain():
    from evosyn.tasks.official_agents import OfficialError, check_official_config

    check_official_config(OfficialEvalConfig(), get_domain("airline"))  # test is a split of airline's tasks
    with pytest.raises(OfficialError, match=r"official_eval.split: 'small' is not a split of tau2's airline tasks "
                                            r"\(known: train, test, base\)"):
        check_official_config(OfficialEvalConfig(split="small"), get_domain("airline"))
    check_official_config(OfficialEvalConfig(split="small"), get_domain("telecom"))  # telecom has one
    user = RoleConfig(backend="llm", provider="openai", model="gpt-4o")
    with pytest.raises(OfficialError, match="official_eval.user.api_key_env: environment variable OPENAI_API_KEY"):
        check_official_config(OfficialEvalConfig(user=user), get_domain("airline"))


def test_the_task_folder_is_checked_before_any_work(tmp_path):
    import json

    from evosyn.envs.tau2.task_folder import package_folder
    from evosyn.tasks.official_agents import OfficialError, check_official_config

    with pytest.raises(OfficialError, match=r"^official_eval.tasks_path: .*: no airline tasks found"):
        check_official_config(OfficialEvalConfig(tasks_path=str(tmp_path)), get_domain("airline"))
    tasks = json.loads((package_folder("airline") / "tasks.json").read_text())[:2]
    (tmp_path / "tasks.json").write_text(json.dumps(tasks))  # no split file: tau2's "base" split only
    check_official_config(OfficialEvalConfig(split="base", tasks_path=str(tmp_path)), get_domain("airline"))
    with pytest.raises(OfficialError, match=rf"official_eval.split: 'test' is not a split of the airline tasks in "
                                            rf"{tmp_path} \(known: base\)"):
        check_official_config(OfficialEvalConfig(tasks_path=str(tmp_path)), get_domain("airline"))


def test_the_run_id_does_not_change_with_official_eval():
    """What a run also measures changes no row it synthesizes: runs made before the option keep their ids."""
    from evosyn.flows.run import run_id_for

    cfg = validate_config({"domain": "airline"})
    assert run_id_for(cfg) == run_id_for(cfg.model_copy(update={"official_eval": OfficialEvalConfig(trials=3)}))


def test_evosyn_run_refuses_a_split_the_domain_lacks_before_any_work(tmp_path):
    from evosyn.flows.cli import main

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG.replace("split: test", "split: dev"))
    home = tmp_path / "h"
    result = CliRunner().invoke(main, ["--home", str(home), "run", "--config", str(cfg)])
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.startswith("error: official_eval.split: 'dev' is not a split") \
        and result.stderr.count("\n") == 1
    assert not home.exists()


@pytest.mark.slow
def test_each_round_scores_its_learner_on_the_official_split_and_a_resume_adds_nothing(tmp_path):
    from mlflow.tracking import MlflowClient

    from evosyn.envs.packs import get_domain
    from evosyn.storage.store import Store
    from evosyn.storage.tracking import EXPERIMENT, default_tracking_uri

    home, cfg = tmp_path / "h", tmp_path / "cfg.yaml"
    cfg.write_text(CONFIG)
    cli(home, "run", "--config", str(cfg))
    store = Store(home, create=False)
    run_id = next(r for r in store.runs() if not r.startswith("testset-"))
    evals = store.read_records("evaluations", run_id=run_id)
    official = [e for e in evals if e.task_set == "official:test"]
    test = [e for e in evals if e.task_set == "test"]
    first3 = [t.id for t in get_domain("airline").tasks("test")][:3]
    assert sorted((e.task_id, e.trial) for e in official) == sorted((i, k) for i in first3 for k in (0, 1))
    assert {e.round for e in official} == {1}
    assert {e.model_version for e in official} == {e.model_version for e in test}  # the round's own learner
    client = MlflowClient(tracking_uri=default_tracking_uri(home))
    exp = client.get_experiment_by_name(EXPERIMENT)
    round_run = client.search_runs([exp.experiment_id], "tags.`evosyn.round` = '1'")[0]
    from evosyn.tasks.official import is_success, pass_hat_ks

    by_task = {}
    for e in sorted(official, key=lambda e: e.trial):
        by_task.setdefault(e.task_id, []).append(is_success(e.reward))
    assert round_run.data.metrics["official_test_pass_hat_2"] == pytest.approx(pass_hat_ks(by_task)[2])
    assert round_run.data.metrics["official_test_tasks"] == 3
    assert round_run.data.params["official_tasks"] == get_domain("airline").task_set().label  # the task set named
    cli(home, "run", "--resume", run_id)
    again = [e for e in Store(home, create=False).read_records("evaluations", run_id=run_id)
             if e.task_set == "official:test"]
    assert sorted(e.model_dump_json() for e in again) == sorted(e.model_dump_json() for e in official)
