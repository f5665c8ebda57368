"""``python -m evosyn``: the ``evosyn`` command."""
from evosyn.flows.cli import run

if __name__ == "__main__":
    run()
