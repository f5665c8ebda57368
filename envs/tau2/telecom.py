"""tau2 telecom: a small agent DB plus a user-device DB; episodes deep-copy both."""
from envs.tau2.domain import Tau2Source

SOURCE = Tau2Source(name="telecom", module="tau2.domains.telecom.environment", copy_on_write=False)


def get_environment():
    from envs.registry import get_domain

    return get_domain("telecom")
