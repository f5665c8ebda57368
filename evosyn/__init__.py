"""EvoSyn: closed-loop synthesis of training data for tool-using LLM agents.

One import namespace over the repository's layer folders (pyproject.toml, ``[tool.setuptools] package-dir``):
``evosyn.storage`` <- ``evosyn.config`` <- ``evosyn.envs`` <- ``evosyn.agents`` <- ``evosyn.domains`` <-
``evosyn.tasks`` <- ``evosyn.flows`` <- ``evosyn.benchmarks``.
"""
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("evosyn")
except _metadata.PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"
