"""The stage functions of synthesis and learning, idempotent over the store; the Prefect flows (flows/) wrap them."""
import evosyn.storage.offline  # noqa: F401  (offline, quiet defaults before any heavy import)
