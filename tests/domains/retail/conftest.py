"""Fixtures for the retail pack: the real tau2 retail environment (``retail_env``) and its ``generator``."""
from tests.domains.conftest import pack_fixtures

retail_env, generator = pack_fixtures("retail", "retail_env")
