"""Records, Parquet store, DuckDB catalog and MLflow tracking (the lowest layer)."""
from evosyn.storage import offline as _offline  # noqa: F401  (sets offline defaults first)
