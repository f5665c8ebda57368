"""The ``EVOSYN_*`` environment variables that override a run config's top-level fields, read by pydantic-settings.

Precedence (``load_config``): the file, then these variables, then the command's flags. An empty variable counts as
unset. A value reaches ``RunConfig`` as the text the variable holds, so a bad one is refused there, with the same
one-line message as the same text in the file.
"""
from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

PREFIX = "EVOSYN_"


class EnvOverrides(BaseSettings):
    """Each field is the variable ``EVOSYN_<FIELD>`` and overrides the run config's field of that name in lower
    case."""

    # case-sensitive, as the shell is: EVOSYN_ROUNDS, not evosyn_rounds. The other EVOSYN_* variables (EVOSYN_HOME,
    # EVOSYN_DOMAINS, ...) are no fields of the run config, and are not read here
    model_config = SettingsConfigDict(env_prefix=PREFIX, case_sensitive=True, env_ignore_empty=True, extra="ignore")

    # each the variable's text, not its field's type: RunConfig validates it, with the line the same text in the
    # file would give
    DOMAIN: str | None = Field(default=None, description="the domain pack the run synthesizes for")
    ARM: str | None = Field(default=None, description="which arm runs")
    BACKEND: str | None = Field(default=None, description="`llm`: the roles named under `roles:` run on their model")
    ROUNDS: str | None = Field(default=None, description="closed-loop rounds")
    BUDGET: str | None = Field(default=None, description="blueprints synthesized per round")
    SEED: str | None = Field(default=None, description="the seed of every random choice of the run")
    LEARNER: str | None = Field(default=None, description="the task agent trained each round")


# environment variable -> the RunConfig field it overrides
ENV_OVERRIDES = {PREFIX + name: name.lower() for name in EnvOverrides.model_fields}


def env_overrides(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """RunConfig field -> the text its variable holds, for the variables set: in the process's environment, or in
    ``env`` where one is given (``{}``: none), read by the same names and rules."""
    if env is not None:  # the settings model would read the process's environment too: the names, by hand
        return {ENV_OVERRIDES[var]: value for var, value in env.items() if var in ENV_OVERRIDES and value}
    return {name.lower(): value for name, value in EnvOverrides().model_dump(exclude_none=True).items()}
