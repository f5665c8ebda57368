"""Shared fixture helpers for the domain packs' tests."""
from __future__ import annotations

import pytest


def pack_fixtures(name: str, env_fixture: str):
    """Session fixtures ``env_fixture`` (the pack's tau2 environment, built fresh from the pack, not the
    registry's process-wide one; the DB loads once per session) and ``generator`` (its embedded generator
    with the default prior). Assign both in a pack's conftest: ``env, generator = pack_fixtures(...)``."""
    from evosyn.agents.plans import DEFAULT_PRIOR
    from evosyn.envs.packs import get_pack

    @pytest.fixture(scope="session", name=env_fixture)
    def environment():
        pack = get_pack(name)
        env = pack.environment()
        env.bind_pack(pack)  # as the registry binds the environments it builds
        return env

    @pytest.fixture(scope="session", name="generator")
    def generator(request):
        return get_pack(name).task_builder(request.getfixturevalue(env_fixture), DEFAULT_PRIOR)

    return environment, generator
