import evosyn.storage.offline  # noqa: F401  (offline, quiet defaults before any heavy import)
