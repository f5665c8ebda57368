"""Building a new store's MLflow database says nothing: MLflow's "Creating initial MLflow database tables..." and
"Updating database tables" INFO lines are not news to a user whose first run just began."""
from __future__ import annotations

import subprocess
import sys


def test_a_new_tracking_database_is_built_silently(tmp_path):
    code = ("import sys\n"
            "from evosyn.storage.tracking import Tracker\n"
            "Tracker(sys.argv[1])\n")  # the way a run first opens it
    env_free = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "store")], capture_output=True, text=True,
                         env=env_free, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "store" / "mlflow.db").is_file()
    assert "MLflow database tables" not in out.stderr and "INFO" not in out.stderr, out.stderr
