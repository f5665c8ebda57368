import pytest


@pytest.fixture(scope="session")
def retail_env():
    """The tau2 retail domain built directly (the DB loads once per session)."""
    from envs.tau2.domain import Tau2Domain, Tau2Source

    return Tau2Domain(Tau2Source(name="retail", module="tau2.domains.retail.environment", copy_on_write=True))


@pytest.fixture(scope="session")
def generator(retail_env):
    from domains.retail.generator import RetailGenerator

    return RetailGenerator(retail_env)
