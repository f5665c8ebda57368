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

from evosyn.storage import outages
from evosyn.storage.locks import store_lock
from evosyn.storage.mlflow_db import ensure_tracking_db, open_error
from evosyn.storage.postgres import is_postgres, register_password
from evosyn.storage.records import Reflection, Run, SynthesisSpace

EXPERIMENT = "evosyn"
LOGGED_TAG = "evosyn.logged"  # set on a round run once all of its logging is done

# How the MLflow 3.17 UI shows the experiment (read from its JS bundle, mlflow/server/js/build):
# - `mlflow.experimentKind` is the experiment type its own selector writes ("custom_model_development" is
#   "Machine learning"); 3.17's sidebar switch (GenAI / Model training, URL `?workflowType=`) decides the
#   view, and the tag is what other MLflow UIs and clients read
# - a tag `mlflow.sharedViewState.<key>` holds a view of the Runs table (its "share view" format: search
#   facets and table state), opened by `?viewStateShareKey=<key>`: ours lists the round runs flat (sorted by
#   name: not by start time, which nests children under their collapsed parent) with the round metrics as
#   columns. Which rows are expanded is not part of a shared view.
KIND_TAG, ML_KIND = "mlflow.experimentKind", "custom_model_development"
NOTE_TAG = "mlflow.note.content"
ROUNDS_VIEW = "evosyn-rounds"
VIEW_TAG = f"mlflow.sharedViewState.{ROUNDS_VIEW}"
VIEW_BASE_COLUMNS = ["tags.`evosyn.arm`", "tags.`evosyn.domain`", "tags.`evosyn.round`"]
VIEW_TAG_LIMIT = 20000  # MLflow's longest experiment tag value


def rounds_view_path(experiment_id: str) -> str:
    """The UI path (after the server URL) of the rounds table: every round run, its metrics as columns."""
    return f"#/experiments/{experiment_id}/runs?viewStateShareKey={ROUNDS_VIEW}&workflowType=machine_learning"


def rounds_view(metrics: list[str]) -> dict[str, Any]:
    return {"searchFilter": "tags.`evosyn.level` = 'round'", "orderByKey": "tags.`mlflow.runName`",
            "orderByAsc": True, "selectedColumns": VIEW_BASE_COLUMNS + [f"metrics.`{m}`" for m in metrics]}


def _note(experiment_id: str) -> str:
    # the UI shows a description's first line until it is expanded: the link goes there
    return (f"**[Round metrics as columns]({rounds_view_path(experiment_id)})**: every round run of every EvoSyn "
            "run, one column per headline metric (more under *Columns*; *Exit shared view* returns to the "
            "default table, where each EvoSyn run is a parent run with its rounds nested under it).")


def default_tracking_uri(root: Path) -> str:
    return f"sqlite:///{Path(root).resolve() / 'mlflow.db'}"


def is_server(uri: str) -> bool:
    """Whether ``uri`` names an MLflow tracking server (HTTP), not a database."""
    return uri.startswith(("http://", "https://"))


def bound_server_retries() -> None:
    """MLflow's client retries a request to its server (connection errors, 5xx) 7 times with waits of 2, 4, ...
    128 s: about four minutes before a server whose database is gone is given up. Its waits are bounded by the
    retry budget (``EVOSYN_SERVICE_RETRY_S``) instead; a value the user set for MLflow's variables wins."""
    budget = outages.retry_s()
    retries = 0  # urllib3's i-th retry waits at most 2**(i-1) s (backoff factor 1) plus up to 1 s of jitter
    while 2 ** (retries + 1) - 1 + retries + 1 <= budget:
        retries += 1
    for var, value in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", retries), ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", 1),
                       ("MLFLOW_HTTP_REQUEST_TIMEOUT", max(5, int(budget)))):
        os.environ.setdefault(var, str(value))


def server_down_line(uri: str, exc: BaseException) -> str | None:
    """One line for an MLflow tracking server that stopped answering (refused, timed out, 5xx after its retries);
    None when ``exc`` is no such failure."""
    if not is_server(uri):
        return None
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = str(exc)
        # MLflow's client: "API request to <url> failed with exception <requests' error>" after its retries
        if f"API request to {uri.rstrip('/')}" in text and "failed with exception" in text or \
                type(exc).__module__.startswith("requests") and type(exc).__name__ in (
                    "ConnectionError", "RetryError", "Timeout", "ReadTimeout", "ConnectTimeout"):
            why = "too many 5xx responses" if "too many" in text and "error responses" in text else \
                type(exc).__name__
            return (f"the MLflow server at {uri.rstrip('/')} stopped answering ({why}) after its retries (up to "
                    f"{outages.retry_s():g} s: {outages.RETRY_ENV}); if it keeps its runs in PostgreSQL, check that "
                    "the database runs")
        exc = exc.__cause__ or exc.__context__
    return None


def _flat_params(params: Mapping[str, Any]) -> dict[str, str]:
    return {k: (v if isinstance(v, str) else json.dumps(v, default=str))[:6000]
            for k, v in params.items()}


STORE_TAG = "evosyn.store"  # the store a run's rows are in: with the run id, what identifies an MLflow run


class Tracker:
    def __init__(self, root: Path, tracking_uri: str | None = None, experiment: str = EXPERIMENT,
                 store: str | None = None):
        """``store``: where the store's tables are (``Store.where()``: its folder, or its ``s3://`` location),
        tagged on every run and part of how a run is found again: two stores (or two prefixes of one bucket) that
        log to one tracking server never share a run, even where their run ids are the same."""
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        self.store = store or str(Path(root).absolute())
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(self.root)
        register_password(self.uri)  # a database URI's password never reaches a log line, row or report
        if is_server(self.uri):
            bound_server_retries()
        # MLflow builds (migrates) a sqlite schema when a client first opens it, and two processes
        # doing it at once crash each other: the first one under the lock creates it (aside, then
        # renamed into place: storage/mlflow_db.py), later ones find it current
        with store_lock(self.root, "mlflow"):
            ensure_tracking_db(self.uri)  # a local database is built aside, never left half-made by a crash
            try:
                self.client = MlflowClient(tracking_uri=self.uri)  # opens (and checks) the store
                self.experiment_id = self._experiment(experiment)
            except MlflowException as exc:  # the store cannot be opened (a schema MLflow refuses): one line
                raise open_error(self.uri, exc) from None

    def _experiment(self, name: str) -> str:
        from mlflow.exceptions import MlflowException

        exp = self.client.get_experiment_by_name(name)
        if exp is None:
            # a database (sqlite, PostgreSQL) keeps artifacts in the store root; a tracking server uses its own
            # artifact store (MLflow's default for a database client would be ./mlruns of the working directory)
            local = self.uri.startswith(("sqlite:", "file:")) or "://" not in self.uri or is_postgres(self.uri)
            artifacts = (self.root / "mlartifacts").resolve().as_uri() if local else None
            try:
                self.client.create_experiment(name, artifact_location=artifacts, tags={KIND_TAG: ML_KIND})
            except MlflowException as e:  # a shared tracking server: another root's run created it first
                if e.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
            exp = self.client.get_experiment_by_name(name)
        # also on an experiment made before these tags existed; a note or kind the user set stays
        wanted = {KIND_TAG: ML_KIND, NOTE_TAG: _note(exp.experiment_id), VIEW_TAG: json.dumps(rounds_view([]))}
        for key, value in wanted.items():
            if key not in exp.tags:
                self._set_experiment_tag(exp.experiment_id, key, value)
        self._view_metrics: set[str] = set(_view_metrics(exp.tags.get(VIEW_TAG)))
        return exp.experiment_id

    def _set_experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
        """Set an experiment tag; a process on another root sharing this tracking store may set it at the same
        moment (the store lock is per root), and MLflow's SQL store then fails the second insert on the tag's
        unique key: the tag is set either way, and a lost race only delays a view column a round."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.set_experiment_tag(experiment_id, key, value)
        except MlflowException as e:
            # sqlite: "UNIQUE constraint failed"; PostgreSQL: "duplicate key value violates unique constraint"
            if "unique constraint" not in str(e).lower() and "IntegrityError" not in str(e):
                raise

    def _show_in_view(self, metrics: list[str]) -> None:
        """Add headline metrics (no "." in the name: per-slice ones stay under *Columns*) to the rounds view."""
        new = [m for m in dict.fromkeys(metrics) if "." not in m and m not in self._view_metrics]
        if not new:
            return
        # read again: another run may have added columns since (a lost race only delays a column a round)
        have = _view_metrics(self.client.get_experiment(self.experiment_id).tags.get(VIEW_TAG))
        value = json.dumps(rounds_view(have + [m for m in new if m not in have]))
        if len(value) <= VIEW_TAG_LIMIT:
            self._set_experiment_tag(self.experiment_id, VIEW_TAG, value)
            self._view_metrics.update(have, new)

    # ------------------------------------------------------------ runs
    def _find(self, filter_string: str) -> str | None:
        """The run of this store that ``filter_string`` matches. A run logged before runs named their store (no
        ``evosyn.store`` tag) is this store's when no run of another store matches: it is adopted (tagged)."""
        found = self.client.search_runs([self.experiment_id], filter_string=filter_string, max_results=100)
        ours = [r for r in found if r.data.tags.get(STORE_TAG) == self.store]
        if ours:
            return ours[0].info.run_id
        legacy = [r for r in found if STORE_TAG not in r.data.tags]
        if legacy and len(legacy) == len(found):
            self.client.set_tag(legacy[0].info.run_id, STORE_TAG, self.store)
            return legacy[0].info.run_id
        return None

    def start_run(self, run: Run) -> str:
        """The parent MLflow run of an EvoSyn run of this store (reused on resume, and running again)."""
        existing = self._find(f"tags.`evosyn.run_id` = '{run.run_id}' and tags.`evosyn.level` = 'run'")
        if existing:
            if self.client.get_run(existing).info.status != "RUNNING":
                self.client.update_run(existing, status="RUNNING")
            return existing
        mlrun = self.client.create_run(
            self.experiment_id, run_name=run.run_id,
            tags={"evosyn.run_id": run.run_id, "evosyn.level": "run", "evosyn.arm": run.arm,
                  "evosyn.domain": run.domain, STORE_TAG: self.store})
        self.log_params(mlrun.info.run_id, {
            "domain": run.domain, "arm": run.arm, "backend": run.backend, "seed": run.seed,
            "rounds": run.rounds, "budget": run.budget})
        return mlrun.info.run_id

    def start_round(self, parent_id: str, run_id: str, round: int) -> str:
        existing = self._find(f"tags.`evosyn.run_id` = '{run_id}' and tags.`evosyn.round` = '{round}'")
        if existing:
            return existing
        # the parent's arm and domain too: the rounds view lists rounds of every run side by side
        parent = self.client.get_run(parent_id).data.tags
        mlrun = self.client.create_run(
            self.experiment_id, run_name=f"{run_id}/round-{round}",
            tags={"mlflow.parentRunId": parent_id, "evosyn.run_id": run_id,
                  "evosyn.level": "round", "evosyn.round": str(round), STORE_TAG: self.store,
                  **{k: parent[k] for k in ("evosyn.arm", "evosyn.domain") if k in parent}})
        return mlrun.info.run_id

    def finish(self, mlflow_run_id: str, status: str = "FINISHED") -> None:
        self.client.set_terminated(mlflow_run_id, status=status)

    def is_logged(self, mlflow_run_id: str) -> bool:
        """Whether everything of this (round) run was logged: a resume then logs nothing for it."""
        return self.client.get_run(mlflow_run_id).data.tags.get(LOGGED_TAG) == "1"

    def mark_logged(self, mlflow_run_id: str) -> None:
        self.client.set_tag(mlflow_run_id, LOGGED_TAG, "1")

    # ------------------------------------------------------------ logging
    # Each call logs only what the run does not hold yet, so a resume that repeats a half-logged
    # round adds no second point, parameter or artifact.
    def log_params(self, mlflow_run_id: str, params: Mapping[str, Any]) -> None:
        have = self.client.get_run(mlflow_run_id).data.params
        new = {k: v for k, v in _flat_params(params).items() if have.get(k) != v}
        if new:  # a differing value of a logged key is refused by MLflow, loudly
            self.client.log_batch(mlflow_run_id, params=[_param(k, v) for k, v in new.items()])

    def log_metrics(self, mlflow_run_id: str, metrics: Mapping[str, float], step: int = 0) -> None:
        from mlflow.entities import Metric
        import time

        now = int(time.time() * 1000)
        batch = {metric_name(k): float(v) for k, v in metrics.items() if v is not None}
        mlrun = self.client.get_run(mlflow_run_id)
        if mlrun.data.tags.get("evosyn.level") == "round":
            self._show_in_view(list(batch))
        have = mlrun.data.metrics
        for key in [k for k in batch if k in have]:
            if any(m.step == step for m in self.client.get_metric_history(mlflow_run_id, key)):
                del batch[key]
        if batch:
            self.client.log_batch(mlflow_run_id, metrics=[Metric(k, v, now, step) for k, v in batch.items()])

    def has_artifact(self, mlflow_run_id: str, path: str) -> bool:
        folder = path.rpartition("/")[0] or None
        return any(f.path == path for f in self.client.list_artifacts(mlflow_run_id, folder))

    def log_json(self, mlflow_run_id: str, name: str, obj: Any, artifact_path: str | None = None) -> None:
        if self.has_artifact(mlflow_run_id, f"{artifact_path}/{name}" if artifact_path else name):
            return
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
        name = Path(path).name
        if not self.has_artifact(mlflow_run_id, f"{artifact_path}/{name}" if artifact_path else name):
            self.client.log_artifact(mlflow_run_id, str(path), artifact_path=artifact_path)


def _view_metrics(value: str | None) -> list[str]:
    """The metric names of a stored rounds view (none when it is missing or not ours)."""
    try:
        columns = json.loads(value or "{}").get("selectedColumns", [])
    except (ValueError, AttributeError):
        return []
    return [c[len("metrics.`"):-1] for c in columns if isinstance(c, str) and c.startswith("metrics.`")]


def metric_name(key: str) -> str:
    """MLflow allows alphanumerics and _ - . space : / in metric names ("5+" becomes "5plus")."""
    return re.sub(r"[^A-Za-z0-9_\-. :/]", "", key.replace("+", "plus"))


def _param(key: str, value: str):
    from mlflow.entities import Param

    return Param(key, value)
