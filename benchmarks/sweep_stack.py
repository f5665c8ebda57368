"""A Prefect server and several process workers on one store root, for `evosyn bench sweep` and its tests.

`evosyn up` starts one worker per pool (and an MLflow UI); a sweep over workers wants two or more on the
`cpu` pool, and nothing else. This starts, on 127.0.0.1, a Prefect server with its own database under the
root (``<root>/prefect``, as `evosyn up` keeps it), registers the deployments with `evosyn deploy`, and
starts ``workers`` `prefect worker` processes, each taking one flow run at a time (``--limit 1``), so the
cells spread over them. Every process is started and stopped through ``evosyn.agents.servers`` (its own session),
and ``stop`` returns the PIDs that survived: none when clean.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from evosyn.agents import servers
from evosyn.flows.prefect_api import server_command
from evosyn.flows.services import Service, family, http_ok, service_env, stop, worker_command, worker_registered

POOL = "cpu"  # the pool of the evosyn-run deployment (deployments/prefect.yaml)


class StackError(RuntimeError):
    """A server or worker did not start (the log it names says why)."""


@dataclass
class WorkerStack:
    root: Path
    project_dir: Path
    workers: int = 2
    timeout: float = 300.0
    api: str = ""
    server: Service | None = None
    worker_services: list[Service] = field(default_factory=list)
    killed: list[Service] = field(default_factory=list)  # by kill_worker_running; still checked gone at stop

    def env(self) -> dict[str, str]:
        env = service_env(self.root, self.api, self.project_dir)
        # the workers import this checkout's flows, and look for new flow runs every 2 s (Prefect's default: 10)
        env["PYTHONPATH"] = os.pathsep.join([str(self.project_dir), *filter(None, [os.environ.get("PYTHONPATH")])])
        env["PREFECT_WORKER_QUERY_SECONDS"] = "2"
        env.pop("MLFLOW_TRACKING_URI", None)
        return env

    def start(self) -> "WorkerStack":
        self.root = Path(self.root).resolve()
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        port = servers.free_port()
        self.api = f"http://{servers.HOST}:{port}/api"
        try:
            self._start_server(port)
            self._deploy()
            for i in range(1, self.workers + 1):
                self._start_worker(f"sweep-worker-{i}")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, svc: Service, ready) -> None:
        try:
            servers.wait_ready(svc.pid, ready, self.timeout)
        except (servers.ServerExited, servers.ServerNotReady) as exc:
            raise StackError(f"{svc.name} did not start ({exc}); log {svc.log}: "
                             f"{servers.log_tail(svc.log, limit=2000)}") from None

    def _start_server(self, port: int) -> None:
        log = self.root / "logs" / "prefect.log"
        proc = servers.start(server_command(port), log, env=self.env(), cwd=self.root)
        self.server = Service("prefect", proc.pid, self.api.removesuffix("/api"), str(log))
        self._wait(self.server, lambda: http_ok(f"{self.api}/health"))

    def _deploy(self) -> None:
        done = subprocess.run([sys.executable, "-m", "evosyn.flows.cli", "--home", str(self.root), "deploy",
                               "--project-dir", str(self.project_dir)], env=self.env(), cwd=self.project_dir,
                              capture_output=True, text=True, timeout=self.timeout, check=False)
        if done.returncode != 0:
            raise StackError(f"evosyn deploy failed: {(done.stdout + done.stderr)[-2000:]}")

    def _start_worker(self, name: str) -> None:
        log = self.root / "logs" / f"{name}.log"
        proc = servers.start([*worker_command(POOL, name), "--limit", "1"], log, env=self.env(), cwd=self.root)
        svc = Service(f"worker-{name}", proc.pid, name, str(log))
        self.worker_services.append(svc)
        self._wait(svc, lambda: worker_registered(self.api, POOL, name))

    def kill_worker_running(self, flow_run_id) -> Service:
        """SIGKILL the worker whose flow-run process runs ``flow_run_id``, with every process of its session
        (the flow run's included): a machine lost mid-run. Returns that worker."""
        from prefect.client.orchestration import SyncPrefectClient

        with SyncPrefectClient(self.api) as client:
            pid = int(client.read_flow_run(flow_run_id).infrastructure_pid or 0)
        for svc in self.worker_services:
            procs = family({svc.pid})
            if pid in procs:
                for p in procs:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                servers.wait_gone(procs, 10.0)
                self.worker_services.remove(svc)
                self.killed.append(svc)
                return svc
        raise StackError(f"flow run {flow_run_id}: no worker of this stack runs its process (pid {pid})")

    def stop(self) -> set[int]:
        """Stop the workers, then the server; the PIDs still alive afterwards (none when clean)."""
        left: set[int] = set()
        for svc in self.worker_services:
            left |= stop(svc)
        if self.server is not None:
            left |= stop(self.server)
        everything = {s.pid for s in [*self.worker_services, *self.killed]} | \
            ({self.server.pid} if self.server else set())
        return left | family(everything)

    def __enter__(self) -> "WorkerStack":
        return self.start()

    def __exit__(self, *exc) -> None:
        left = self.stop()
        if left and exc[0] is None:
            raise StackError(f"processes still running after stop: {sorted(left)}")
