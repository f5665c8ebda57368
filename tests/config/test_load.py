from pathlib import Path

import pytest

from evosyn.config import ConfigError, load_config


def write(tmp_path, text):
    p = tmp_path / "cfg.yaml"
    p.write_text(text)
    return p


def test_valid_config_with_env_and_flag_overrides(tmp_path):
    p = write(tmp_path, "domain: airline\nrounds: 2\nroles:\n  planner: {backend: llm, provider: openai, model: m}\n")
    cfg = load_config(p, overrides={"seed": 7}, env={"EVOSYN_BUDGET": "40"})
    assert (cfg.rounds, cfg.budget, cfg.seed, cfg.roles["planner"].model) == (2, 40, 7, "m")


@pytest.mark.parametrize("text, needle", [
    ("domain: air lines\n", "field 'domain'"),  # a pack name (known names are checked in flows/inputs.py)
    ("rounds: 0\n", "field 'rounds'"),
    ("budgett: 3\n", "field 'budgett': unknown field"),
    ("roles:\n  painter: {}\n", "field 'roles.painter"),
    ("rounds: [1\n", "YAML syntax error at line"),
    ("- a\n- b\n", "top level must be a mapping"),
])
def test_bad_configs_give_one_line(tmp_path, text, needle):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    msg = str(err.value)
    assert needle in msg and "\n" not in msg


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.yaml")


def test_a_base_url_with_credentials_is_refused_without_echoing_them():
    from evosyn.config import ConfigError, validate_config

    with pytest.raises(ConfigError) as err:
        validate_config({"roles": {"planner": {"provider": "openai_compatible", "model": "m",
                                               "base_url": "https://user:sk-SECRET@vllm.example/v1"}}})
    msg = str(err.value)
    assert "roles.planner.base_url" in msg and "api_key_env" in msg and "sk-SECRET" not in msg


def test_stop_rule_zero_means_never_and_negative_is_refused():
    from evosyn.config import validate_config

    assert validate_config({"stop_after_static_rounds": 0}).stop_after_static_rounds == 0
    assert validate_config({}).stop_after_static_rounds == 2  # App. B.1: two rounds without a space update
    with pytest.raises(ConfigError, match="stop_after_static_rounds"):
        validate_config({"stop_after_static_rounds": -1})


def test_probe_size_needs_a_learner_it_can_probe_and_defaults_to_the_round():
    from evosyn.config import PROBE_SIZE, validate_config

    assert validate_config({"probe_size": 300}).probe_size == 300
    assert validate_config({"probe_size": 0}).probe_size == 0  # the diagnostic set only
    # unset: as large as the round's budget, at most a fixed test set's size; none for a LLaMA-Factory checkpoint
    assert validate_config({}).probe_size == min(validate_config({}).budget, PROBE_SIZE) == 200
    assert validate_config({"budget": 40}).probe_size == 40
    assert validate_config({"budget": 1200}).probe_size == PROBE_SIZE == 300
    assert validate_config({"learner": "llamafactory"}).probe_size == 0
    with pytest.raises(ConfigError, match="probe_size: not with learner: llamafactory"):
        validate_config({"probe_size": 10, "learner": "llamafactory"})
    served = {"learner": "served", "served": {"base_url": "http://127.0.0.1:8000/v1", "model": "m"}}
    assert validate_config(served).probe_size == 200  # a served model is probed as the embedded learner is
    assert validate_config({**served, "probe_size": 10}).probe_size == 10


def test_the_probe_set_is_in_the_run_id_only_of_arms_that_read_it():
    """An arm whose Reflector reads no learner evidence makes the same rows with any probe set: its id keeps the one
    it had before the probe set was on by default."""
    from evosyn.flows.run import run_id_for
    from evosyn.config import validate_config

    for arm in ("static", "no_feedback"):
        ids = {run_id_for(validate_config({"domain": "airline", "arm": arm, "probe_size": n})) for n in (None, 0, 300)}
        assert len(ids) == 1
    ids = {run_id_for(validate_config({"domain": "airline", "arm": "evosyn", "probe_size": n})) for n in (0, 200, 300)}
    assert len(ids) == 3
    assert run_id_for(validate_config({"domain": "airline", "arm": "evosyn"})) == run_id_for(
        validate_config({"domain": "airline", "arm": "evosyn", "probe_size": 200}))


def test_prior_writes_are_counts_with_weights_and_keep_run_ids_of_older_configs(tmp_path):
    from evosyn.flows.run import run_id_for

    cfg = load_config(write(tmp_path, "domain: airline\nprior:\n  writes: {'1': 0.5, 5: 0.5}\n"))
    assert cfg.prior.writes == {1: 0.5, 5: 0.5} and not cfg.prior.is_default()
    for text, needle in [("prior:\n  writes: {9: 1.0}\n", "prior.writes: write counts 0-6"),
                         ("prior:\n  writes: {1: 0.0}\n", "no positive weight"),
                         ("prior:\n  writes: {2: -1.0}\n", "2: -1.0")]:
        with pytest.raises(ConfigError, match=needle) as err:
            load_config(write(tmp_path, text))
        assert "\n" not in str(err.value)
    # the write counts enter a run's id only when set: default and planted-gap runs keep the ids they had
    plain = load_config(write(tmp_path, "domain: airline\n"))
    planted = load_config(write(tmp_path, "domain: airline\nprior:\n  suppress: {multi_item: {'yes': 0.2}}\n"))
    even = load_config(write(tmp_path, "domain: airline\nprior:\n  suppress: {multi_item: {'yes': 0.2}}\n"
                                       "  writes: {1: 1.0}\n"))
    assert run_id_for(plain) == "airline-evosyn-s0-" + _digest(plain, {"prior": True})
    assert run_id_for(planted) == "airline-evosyn-s0-" + _digest(planted, {"prior": {"writes": True}})
    assert len({run_id_for(plain), run_id_for(planted), run_id_for(even)}) == 3


def test_initial_factors_enter_a_run_id_only_when_set(tmp_path):
    from evosyn.flows.run import run_id_for

    plain = load_config(write(tmp_path, "domain: airline\n"))
    paper = load_config(write(tmp_path, "domain: airline\ninitial_factors: [num_write, num_read]\n"))
    assert paper.initial_factors == ["num_write", "num_read"] and plain.initial_factors == []
    assert run_id_for(plain) == "airline-evosyn-s0-" + _digest(plain, {"prior": True})
    assert run_id_for(paper) == "airline-evosyn-s0-" + _digest(paper, {"prior": True}, keep_initial=True)
    assert run_id_for(paper) != run_id_for(plain)
    # the id it had before initial_factors existed (and before the probe set was on by default)
    assert run_id_for(load_config(write(tmp_path, "domain: airline\nprobe_size: 0\n"))) == "airline-evosyn-s0-c88398"


def _digest(cfg, exclude, keep_initial=False):
    import hashlib

    # a dedup section that only flags is no part of an id (tests/tasks/test_dedup.py), nor is how a round fans
    # out, nor an empty env_data, nor an unset served learner
    dump = cfg.model_dump_json(exclude={"store": True, "train_deployment": True, "official_eval": True,
                                        "task_runner": True, "dask_address": True,
                                        "llamafactory": True, **({} if keep_initial else {"initial_factors": True}),
                                        "dedup": True, "env_data": True, "served": True, **exclude})
    return hashlib.sha256(dump.encode()).hexdigest()[:6]


def test_env_data_enters_a_run_id_and_the_stored_config_only_for_the_runs_own_domain(tmp_path):
    from evosyn.flows.run import run_id_for

    plain = load_config(write(tmp_path, "domain: car_bench\n"))
    other = load_config(write(tmp_path, "domain: car_bench\nenv_data: {airline: /data/a}\n"))
    own = load_config(write(tmp_path, "domain: car_bench\nenv_data: {car_bench: /data/c, airline: /data/a}\n"))
    assert run_id_for(plain) == run_id_for(other) != run_id_for(own)
    assert "env_data" not in plain.stored_json() and '"car_bench":"/data/c"' in own.stored_json()
    with pytest.raises(ConfigError, match="env_data"):
        load_config(write(tmp_path, "env_data: /data/c\n"))  # a mapping: domain -> folder


def test_an_s3_store_root_keeps_its_name_and_has_a_local_folder(monkeypatch, tmp_path):
    from evosyn.flows.run_id import run_id_for
    from evosyn.config import RunConfig

    monkeypatch.setenv("EVOSYN_LOCAL_HOME", str(tmp_path / "local"))
    cfg = RunConfig(store={"root": "s3://team-bucket/evosyn"})
    assert cfg.store_location() == "s3://team-bucket/evosyn" and cfg.store_root() == tmp_path / "local" / "team-bucket" / "evosyn"
    monkeypatch.setenv("EVOSYN_HOME", "s3://team-bucket/other")
    assert RunConfig().store_location() == "s3://team-bucket/other"
    assert run_id_for(cfg) == run_id_for(RunConfig(store={"root": str(tmp_path)}))  # where it is stored: not its id
    monkeypatch.setenv("EVOSYN_HOME", str(tmp_path / "h"))
    assert RunConfig().store_root() == tmp_path / "h" == Path(RunConfig().store_location())


def test_the_seed_is_bounded_to_what_the_seeded_libraries_take(tmp_path):
    """A seed the embedded learner's scikit-learn refuses (above 2**32 - 1), or that overflows the runs table's
    int64, is one line naming the field at config time, not an OverflowError that leaves a partial run."""
    import numpy as np
    from sklearn.linear_model import SGDClassifier

    from evosyn.config import SEED_MAX, validate_config
    from evosyn.tasks.loop import probe_seed

    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, "seed: 100000000000000000000000\n"))
    assert "field 'seed': Input should be less than or equal to 4294967295" in str(err.value)
    assert validate_config({"seed": SEED_MAX}).seed == SEED_MAX
    x, y = np.array([[0.0], [1.0]]), np.array([0, 1])
    SGDClassifier(random_state=SEED_MAX, max_iter=5, tol=None).fit(x, y)  # the learner's seed: accepted
    with pytest.raises(ValueError):
        SGDClassifier(random_state=SEED_MAX + 1, max_iter=5, tol=None).fit(x, y)
    assert probe_seed(SEED_MAX, 50) < 2**63 and 1000 * SEED_MAX + 64 < 2**63  # derived seeds: still int64


def _number_fields(model, prefix=""):
    """(dotted name, FieldInfo) of every int / float field of a config model and the sections it nests."""
    import typing

    from evosyn.config.base import Section

    for name, info in model.model_fields.items():
        kinds = {info.annotation, *typing.get_args(info.annotation)}
        for kind in kinds:
            if isinstance(kind, type) and issubclass(kind, Section):
                yield from _number_fields(kind, f"{prefix}{name}.")
            if typing.get_origin(kind) is dict and isinstance(typing.get_args(kind)[1], type) \
                    and issubclass(typing.get_args(kind)[1], Section):
                yield from _number_fields(typing.get_args(kind)[1], f"{prefix}{name}.")
        if kinds & {int, float} and bool not in kinds:
            yield prefix + name, info


def test_every_number_of_the_config_has_both_bounds():
    from evosyn.config import RunConfig

    fields = dict(_number_fields(RunConfig))
    assert {"seed", "roles.batch_poll_s", "served.trials", "llamafactory.train_timeout_s"} <= set(fields)
    unbounded = [name for name, info in fields.items()
                 if not any(getattr(m, a, None) is not None for m in info.metadata for a in ("le", "lt"))
                 or not any(getattr(m, a, None) is not None for m in info.metadata for a in ("ge", "gt"))]
    assert unbounded == []


@pytest.mark.parametrize("text, field", [
    ("roles:\n  planner: {batch: true, batch_poll_s: 1e308}\n", "roles.planner.batch_poll_s"),
    ("roles:\n  planner: {batch_window_s: .inf}\n", "roles.planner.batch_window_s"),
    ("roles:\n  planner: {timeout_s: .nan}\n", "roles.planner.timeout_s"),
    ("roles:\n  planner: {input_cost_per_mtok: .nan}\n", "roles.planner.input_cost_per_mtok"),
    ("roles:\n  planner: {schema_max_items: 100000000000}\n", "roles.planner.schema_max_items"),
    ("prior:\n  writes: {1: .inf}\n", "prior.writes.1"),
    ("dedup: {threshold: .nan}\n", "dedup.threshold"),
    ("served: {model: m, base_url: 'http://127.0.0.1:8000/v1', batch_poll_s: .inf}\nlearner: served\n",
     "served.batch_poll_s"),
])
def test_a_number_out_of_bounds_or_not_finite_is_one_line_naming_its_field(tmp_path, text, field):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    assert f"field '{field}'" in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_key_written_twice_is_one_line_with_its_line(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, "domain: airline\nrounds: 1\nbudget: 4\nrounds: 3\n"))
    assert str(err.value) == f"invalid config {tmp_path / 'cfg.yaml'}: duplicate key 'rounds' at line 4 (keep one)"
