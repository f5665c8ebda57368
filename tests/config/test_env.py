"""The EVOSYN_* overrides: read by pydantic-settings from the process's environment, after the file and before the
flags, by their exact names, an empty one unset, a bad one refused by RunConfig with the file's one line."""
import pytest

from evosyn.config import ENV_OVERRIDES, ConfigError, EnvOverrides, env_overrides, load_config

NAMES = {"EVOSYN_DOMAIN": "domain", "EVOSYN_ARM": "arm", "EVOSYN_BACKEND": "backend", "EVOSYN_ROUNDS": "rounds",
         "EVOSYN_BUDGET": "budget", "EVOSYN_SEED": "seed", "EVOSYN_LEARNER": "learner"}


@pytest.fixture
def clean_env(monkeypatch):
    for var in ENV_OVERRIDES:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_the_variables_are_the_settings_fields_and_keep_their_names():
    assert ENV_OVERRIDES == NAMES
    assert list(EnvOverrides.model_fields) == [f.upper() for f in NAMES.values()]


def test_the_environment_comes_after_the_file_and_before_the_flags(clean_env, tmp_path):
    cfg_file = tmp_path / "cfg.yaml"
    cfg_file.write_text("rounds: 2\nbudget: 10\nseed: 1\n")
    clean_env.setenv("EVOSYN_BUDGET", "40")
    clean_env.setenv("EVOSYN_SEED", "5")
    clean_env.setenv("EVOSYN_ARM", "static")
    cfg = load_config(cfg_file, overrides={"seed": 7, "arm": None})  # a flag not given leaves the variable's value
    assert (cfg.rounds, cfg.budget, cfg.seed, cfg.arm) == (2, 40, 7, "static")


def test_only_the_exact_names_count_and_an_empty_one_is_unset(clean_env):
    clean_env.setenv("evosyn_rounds", "5")  # not EVOSYN_ROUNDS: the shell's names are case-sensitive
    clean_env.setenv("EVOSYN_BUDGET", "")
    clean_env.setenv("EVOSYN_HOME", "/elsewhere")  # an EVOSYN_* variable that is no config field
    assert env_overrides() == {}
    cfg = load_config()
    assert (cfg.rounds, cfg.budget) == (3, 200)


def test_a_bad_value_is_refused_with_the_files_line(clean_env, tmp_path):
    clean_env.setenv("EVOSYN_ROUNDS", "0")
    with pytest.raises(ConfigError) as from_env:
        load_config()
    clean_env.delenv("EVOSYN_ROUNDS")
    (tmp_path / "cfg.yaml").write_text("rounds: '0'\n")
    with pytest.raises(ConfigError) as from_file:
        load_config(tmp_path / "cfg.yaml")
    assert str(from_env.value) == ("invalid config: field 'rounds': Input should be greater than or equal to 1 "
                                   "(got '0')")
    assert str(from_file.value).split(": ", 1)[1] == str(from_env.value).split(": ", 1)[1]


def test_a_given_mapping_is_read_instead_of_the_environment(clean_env):
    clean_env.setenv("EVOSYN_SEED", "9")
    assert env_overrides({}) == {}  # a command that reads no override (evosyn train's config)
    assert env_overrides({"EVOSYN_BUDGET": "40", "EVOSYN_SEED": "", "evosyn_rounds": "5"}) == {"budget": "40"}
    assert env_overrides() == {"seed": "9"}
