"""tau2 retail: DB of entity dicts, so episodes are copy-on-write views of one shared DB."""
from envs.tau2.domain import Tau2Source

SOURCE = Tau2Source(name="retail", module="tau2.domains.retail.environment", copy_on_write=True)


def get_environment():
    from envs.registry import get_domain

    return get_domain("retail")
