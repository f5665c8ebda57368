"""MLflow tracking: a parent run per EvoSyn run, a nested run per round.

Defaults to a local ``sqlite:///<root>/mlflow.db`` store with artifacts under
``<root>/mlartifacts``; any tracking URI can be given instead (the config's
``store.tracking_uri``, else ``MLFLOW_TRACKING_URI``, e.g. a shared MLflow server). MLflow is
imported lazily because it is slow to import and not every command needs it.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Mapping

from storage.records import Reflection, Run, SynthesisSpace

EXPERIMENT = "evosyn"


def default_tracking_uri(root: Path) -> str:
    return f"sqlite:///{Path(root).resolve() / 'mlflow.db'}"


def _flat_params(params: Mapping[str, Any]) -> dict[str, str]:
    return {k: (v if isinstance(v, str) else json.dumps(v, default=str))[:6000]
            for k, v in params.items()}


class Tracker:
    def __init__(self, root: Path, tracking_uri: str | None = None, experiment: str = EXPERIMENT):
        from mlflow.tracking import MlflowClient

        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(self.root)
        self.client = MlflowClient(tracking_uri=self.uri)
        exp = self.client.get_experiment_by_name(experiment)
        if exp is None:
            # a local store keeps artifacts beside it; a tracking server uses its own artifact store
            local = self.uri.startswith(("sqlite:", "file:")) or "://" not in self.uri
            artifacts = (self.root / "mlartifacts").resolve().as_uri() if local else None
            self.experiment_id = self.client.create_experiment(experiment, artifact_location=artifacts)
        else:
            self.experiment_id = exp.experiment_id

    # ------------------------------------------------------------ runs
    def _find(self, filter_string: str) -> str | None:
        found = self.client.search_runs([self.experiment_id], filter_string=filter_string, max_results=1)
        return found[0].info.run_id if found else None

    def start_run(self, run: Run) -> str:
        """The parent MLflow run of an EvoSyn run (reused on resume)."""
        existing = self._find(f"tags.`evosyn.run_id` = '{run.run_id}' and tags.`evosyn.level` = 'run'")
        if existing:
            return existing
        mlrun = self.client.create_run(
            self.experiment_id, run_name=run.run_id,
            tags={"evosyn.run_id": run.run_id, "evosyn.level": "run", "evosyn.arm": run.arm,
                  "evosyn.domain": run.domain})
        self.client.log_batch(mlrun.info.run_id, params=[
            _param(k, v) for k, v in _flat_params({
                "domain": run.domain, "arm": run.arm, "backend": run.backend, "seed": run.seed,
                "rounds": run.rounds, "budget": run.budget}).items()])
        return mlrun.info.run_id

    def start_round(self, parent_id: str, run_id: str, round: int) -> str:
        existing = self._find(f"tags.`evosyn.run_id` = '{run_id}' and tags.`evosyn.round` = '{round}'")
        if existing:
            return existing
        mlrun = self.client.create_run(
            self.experiment_id, run_name=f"{run_id}/round-{round}",
            tags={"mlflow.parentRunId": parent_id, "evosyn.run_id": run_id,
                  "evosyn.level": "round", "evosyn.round": str(round)})
        return mlrun.info.run_id

    def finish(self, mlflow_run_id: str, status: str = "FINISHED") -> None:
        self.client.set_terminated(mlflow_run_id, status=status)

    # ------------------------------------------------------------ logging
    def log_params(self, mlflow_run_id: str, params: Mapping[str, Any]) -> None:
        self.client.log_batch(mlflow_run_id, params=[_param(k, v) for k, v in _flat_params(params).items()])

    def log_metrics(self, mlflow_run_id: str, metrics: Mapping[str, float], step: int = 0) -> None:
        from mlflow.entities import Metric
        import time

        now = int(time.time() * 1000)
        batch = [Metric(metric_name(k), float(v), now, step) for k, v in metrics.items() if v is not None]
        if batch:
            self.client.log_batch(mlflow_run_id, metrics=batch)

    def log_json(self, mlflow_run_id: str, name: str, obj: Any, artifact_path: str | None = None) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))
            self.client.log_artifact(mlflow_run_id, str(path), artifact_path=artifact_path)

    def log_space(self, mlflow_run_id: str, space: SynthesisSpace) -> None:
        self.log_json(mlflow_run_id, f"space_v{space.version}.json", space.model_dump(mode="json"),
                      artifact_path="spaces")

    def log_reflection(self, mlflow_run_id: str, reflection: Reflection) -> None:
        self.log_json(mlflow_run_id, f"reflection_round{reflection.round}.json",
                      reflection.model_dump(mode="json"), artifact_path="reflections")

    def log_file(self, mlflow_run_id: str, path: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(mlflow_run_id, str(path), artifact_path=artifact_path)


def metric_name(key: str) -> str:
    """MLflow allows alphanumerics and _ - . space : / in metric names ("5+" becomes "5plus")."""
    return re.sub(r"[^A-Za-z0-9_\-. :/]", "", key.replace("+", "plus"))


def _param(key: str, value: str):
    from mlflow.entities import Param

    return Param(key, value)
