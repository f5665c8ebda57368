"""CAR-bench as an EvoSyn environment family: our own implementation of its tools, state, policies and reward.

Public API (nothing here imports tau2):

* ``domain.CarBenchDomain(data_root=None)``: the ``evosyn.envs.base.Domain``: ``tools()`` (57
  ``ToolSpec``, kinds read / write / generic), ``tools_for(task)`` (what a hallucination
  task leaves), ``validate_arguments``, ``episode(task | CarInitialState | config | None)``,
  ``tasks(split)`` / ``splits()`` / ``official_task(id)``, ``task_policy(task)``, ``summary()``.
* ``episode.CarBenchEpisode``: ``step(name, arguments) -> Observation`` in CAR-bench's
  ``{"status", "result" | "errors"}`` form, ``state_digest()``, ``state`` / ``fixed``, and what
  the reward reads: ``tool_errors``, ``policy_errors``, ``hallucinated``.
* ``tasks.CarBenchTask``: one row of ``tasks/<family>_<split>.jsonl`` (``task_id`` is ``id``,
  ``initial_state``, ``tool_actions``, ``is_hallucination``, ``to_row()``).
* ``reward.reward(domain, task, messages, end_keyword=None, judge=None) -> CarBenchReward``:
  CAR-bench's reward by our replay; ``gold_trajectory(task, domain)``; ``pass_hat_k`` /
  ``pass_at_k``.
* ``policy``: ``AUT_POLICIES`` (machine-checked), ``LLM_POLICIES`` (not), ``check_write`` (the
  pack's per-write rule), ``trajectory_violations``.
* ``perturb.perturb`` / ``perturb.trajectories``: gold and perturbed trajectories (the agreement set).
* ``data``: where the data comes from (``EVOSYN_CARBENCH_DATA``, the bundled ``fixture/``).
"""
