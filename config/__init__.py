"""The run configuration: YAML -> pydantic models, ``EVOSYN_*`` environment overrides, ``.env`` for secrets.

It sits just above storage (it reads ``evosyn.storage.records.Arm`` and the user-file helpers of
``evosyn.storage.userfiles``); storage never imports it. Every field says what it is (``Field(description=...)``),
and docs/reference/config.md is generated from the models' JSON schema.

- ``roles.py``: ``RoleConfig``, one role's model; ``sections.py``: the sections a run config nests;
- ``run.py``: ``RunConfig``, the top level; ``env.py``: the environment overrides (pydantic-settings);
- ``load.py``: ``load_config`` (file, environment, flags) and ``validate_config``, each problem one line.
"""
from evosyn.config.env import ENV_OVERRIDES, EnvOverrides, env_overrides
from evosyn.config.load import load_config, read_config_file, validate_config
from evosyn.config.roles import ROLES, RoleConfig
from evosyn.config.run import EXECUTION_FIELDS, PROBE_SIZE, SEED_MAX, RunConfig, default_probe_size
from evosyn.config.sections import (MAX_PRIOR_WRITES, DedupConfig, GeneratorPrior, HookConfig, LlamaFactoryConfig,
                                    OfficialEvalConfig, ServedLearnerConfig, StoreConfig)
from evosyn.storage.userfiles import ConfigError, load_dotenv_secrets, read_text_file

__all__ = ["ENV_OVERRIDES", "EXECUTION_FIELDS", "MAX_PRIOR_WRITES", "PROBE_SIZE", "ROLES", "SEED_MAX", "ConfigError",
           "DedupConfig", "EnvOverrides", "GeneratorPrior", "HookConfig", "LlamaFactoryConfig", "OfficialEvalConfig",
           "RoleConfig", "RunConfig", "ServedLearnerConfig", "StoreConfig", "default_probe_size", "env_overrides",
           "load_config", "load_dotenv_secrets", "read_config_file", "read_text_file", "validate_config"]
