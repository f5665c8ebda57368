import pytest


@pytest.fixture(scope="session")
def airline():
    from evosyn.envs.packs import get_domain

    return get_domain("airline")


@pytest.fixture(scope="session")
def retail():
    from evosyn.envs.packs import get_domain

    return get_domain("retail")


@pytest.fixture(scope="session")
def telecom():
    from evosyn.envs.packs import get_domain

    return get_domain("telecom")


def with_actions(domain, split="base"):
    return [t for t in domain.tasks(split) if t.gold_actions]
