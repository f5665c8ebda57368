"""Scores our CAR-bench trajectories with CAR-bench's own reward code, to rebuild ``agreement.jsonl``.

Run it in a scratch environment OUTSIDE the project (CAR-bench is not a dependency of EvoSyn)::

    mkdir -p /tmp/carbench-scratch/src && cd /tmp/carbench-scratch
    git -C <a checkout or mirror of CAR-bench/car-bench or a fork> archive HEAD car_bench | tar x -C src
    python3 -m venv venv && venv/bin/pip install pydantic litellm numpy
    # ours.jsonl and calls.jsonl come from build_agreement.py (trajectories, calls)
    venv/bin/python <this file> <repo>/envs/car_bench/fixture ours.jsonl theirs.jsonl
    venv/bin/python <this file> <repo>/envs/car_bench/fixture --tools calls.jsonl tools_theirs.jsonl
    venv/bin/python <this file> <repo>/envs/car_bench/fixture --tools plans.jsonl plans_theirs.jsonl

It runs CAR-bench's ``Env`` (tools, state hashes, ``calculate_reward``, AUT policy
evaluator) unmodified on the fixture's mock data, with the official scoring
switches on (policy, tool execution errors and policy errors scored). Only
what needs an LLM is replaced: the user simulator is never called (the
trajectory's user turns are given) and the LLM policy judge answers
"followed". ``agreement.jsonl`` keeps our messages and, of CAR-bench's
answer, the reward, its components and the codes of the rules and tool errors
it reported (not its wording).
"""
import asyncio
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, "src")  # the CAR-bench checkout

from car_bench.envs.base import Env
from car_bench.envs.car_voice_assistant import mock_data
from car_bench.envs.car_voice_assistant.context.dynamic_context_state import (
    ContextState,
    context_state,
)
from car_bench.envs.car_voice_assistant.context.fixed_context import (
    FixedContext,
    fixed_context,
)
from car_bench.envs.car_voice_assistant.mock_data import DataManager, load_data
from car_bench.envs.car_voice_assistant.tasks.task_config import TaskConfig, task_config
from car_bench.envs.car_voice_assistant.tools import ALL_TOOLS
from car_bench.envs.car_voice_assistant.tools.cross_domain.planning import PlanningTool
from car_bench.envs.car_voice_assistant.wiki import WIKI
from car_bench.envs.policy_evaluator import (
    LLMPolicyEvaluatorEnv,
    policy_errors_during_runtime,
)
from car_bench.envs.tool_execution_error_evaluator import (
    tool_execution_errors_during_runtime,
)
from car_bench.envs.tool_manipulation import check_hallucinated_removed_part
from car_bench.envs.user.user_end_conversation import (
    check_end_conversation,
    end_conversation_failure,
)
from car_bench.types import Action, Task

FIXTURE = sys.argv[1]
mock_data.car_va_data_manager._instance = DataManager(base_data_path=f"{FIXTURE}/mock_data", preload=True)
LLMPolicyEvaluatorEnv.evaluate_llm = lambda self, policy, trajectory: json.dumps(
    {"reasoning": "LLM-POL not machine-checked", "policy_followed": True})


def parse_task(row):
    row = dict(row)
    row["context_init_config"] = json.loads(row["context_init_config"])
    row["actions"] = [Action(**a) for a in json.loads(row["actions"])]
    if row.get("removed_part") is not None:
        row["removed_part"] = json.loads(row["removed_part"])
    return Task(**row)


def score(task, messages):
    env = Env(data_load_func=load_data, tools=ALL_TOOLS, tasks=[task], wiki=WIKI, user_strategy="human",
              user_model="none", task_index=0, policy_evaluator_strategy="llm", policy_evaluator_model="none",
              policy_evaluator_provider="none", evaluate_policy=True, score_tool_execution_errors=True,
              score_policy_errors=True)
    env.terminate_tools = ["call_phone_by_number"]  # as MockCarVoiceAssistantDomainEnv sets it
    tokens = [task_config.set(TaskConfig()), context_state.set(ContextState()), fixed_context.set(FixedContext()),
              policy_errors_during_runtime.set([]), tool_execution_errors_during_runtime.set([]),
              end_conversation_failure.set([])]
    task_config.get().update_state(calendar_id=task.calendar_id)
    fixed_context.get().update_state(**task.context_init_config)
    context_state.get().update_state(**task.context_init_config)
    env.actions = []  # Env.reset without the user simulator's first turn
    env.state_hashes = [env.get_context_state_hash(context_state.get())]
    history = [{"role": "system", "content": env.wiki}]
    observed = []
    result = None
    for m in messages:
        if m["role"] == "user":
            text = m["content"]
            if text in ("HALLUCINATION_ERROR", "DISAMBIGUATION_ERROR", "OUT_OF_SCOPE"):
                text = check_end_conversation(text, text)  # what the simulator's control keyword does
            history.append({"role": "user", "content": text})
        elif m["role"] == "assistant" and m["tool_calls"]:
            calls = [{"id": c["id"], "type": "function",
                      "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                     for c in m["tool_calls"]]
            msg = {"role": "assistant", "content": m["content"], "tool_calls": calls}
            history.append(msg)
            if task.removed_part:
                check_hallucinated_removed_part(task.removed_part, calls, task.task_type)
            actions = [Action(name=c["name"], kwargs=c["arguments"]) for c in m["tool_calls"]]
            loop = asyncio.new_event_loop()
            response = loop.run_until_complete(env.steps(actions, history))
            loop.close()
            observed.extend(response.observation)
            if response.done:
                result = response.info.reward_info
                break
            for c, obs in zip(calls, response.observation):
                history.append({"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"],
                                "content": obs})
        elif m["role"] == "assistant":
            # a reply to the user: Env.steps records the state hash, then asks the user simulator (skipped here)
            env.actions.append(Action(name="respond", kwargs={"content": m["content"]}))
            env._record_state_hash_if_needed()
            history.append({"role": "assistant", "content": m["content"]})
    if result is None:
        result = env.calculate_reward(history)
    for var, token in zip((task_config, context_state, fixed_context, policy_errors_during_runtime,
                           tool_execution_errors_during_runtime, end_conversation_failure), tokens):
        var.reset(token)
    info = result.info
    return {"reward": result.reward, "r_actions_final": info.r_actions_final,
            "r_actions_intermediate": info.r_actions_intermediate, "r_tool_subset": info.r_tool_subset,
            "r_tool_execution": info.r_tool_execution, "r_policy": info.r_policy,
            "r_user_end_conversation": info.r_user_end_conversation,
            "policy_aut_errors": info.policy_aut_errors or [], "tool_execution_errors": info.tool_execution_errors or [], "observations": observed}


def answer_kind(text):
    """SUCCESS / FAILURE for the envelope, Error / Unknown for the plain-text failures, text for other answers."""
    try:
        parsed = json.loads(text)
    except (TypeError, ValueError):
        parsed = None
    if isinstance(parsed, dict) and parsed.get("status") in ("SUCCESS", "FAILURE"):
        return parsed["status"]
    if isinstance(parsed, dict) and "errors" in parsed:  # a few refusals of CAR-bench's tools omit the status
        return "FAILURE"
    text = str(text)
    return "Error" if text.startswith("Error") else "Unknown" if text.startswith("Unknown action") else "text"


def reset_planner():
    """An empty plan store per sequence, as CAR-bench gives each task (newer releases: ``PlanningTool.reset``;
    older ones keep the plans on the class)."""
    if hasattr(PlanningTool, "reset"):
        PlanningTool.reset()
    else:
        PlanningTool._plans, PlanningTool._current_plan_id = {}, None


def planner_result(text):
    """The SHA-256 of a successful planner answer's result as canonical JSON (None for any other answer)."""
    parsed = json.loads(text) if answer_kind(text) == "SUCCESS" else None
    return hashlib.sha256(json.dumps(parsed["result"], sort_keys=True).encode()).hexdigest() if parsed else None


def run_calls(task, calls):
    """Each call through CAR-bench's own tool, as its Env runs it; the answer's kind and the state after it
    (and the planner's result digest)."""
    reset_planner()
    tokens = [task_config.set(TaskConfig()), context_state.set(ContextState()), fixed_context.set(FixedContext()),
              policy_errors_during_runtime.set([]), tool_execution_errors_during_runtime.set([])]
    task_config.get().update_state(calendar_id=task.calendar_id)
    fixed_context.get().update_state(**task.context_init_config)
    context_state.get().update_state(**task.context_init_config)
    tools = {tool.get_info()["function"]["name"]: tool for tool in ALL_TOOLS}
    steps = []
    for c in calls:
        try:
            text = tools[c["name"]].invoke(data={}, **c["arguments"])
        except Exception as exc:  # noqa: BLE001 - what Env._run_action answers
            text = f"Error: {exc}"
        steps.append({"kind": answer_kind(text), "state": context_state.get().model_dump(mode="json"),
                      "policy_errors": len(policy_errors_during_runtime.get()),
                      "tool_errors": len(tool_execution_errors_during_runtime.get()),
                      **({"result": planner_result(text)} if c["name"] == "planning_tool" else {})})
    for var, token in zip((task_config, context_state, fixed_context, policy_errors_during_runtime,
                           tool_execution_errors_during_runtime), tokens):
        var.reset(token)
    return steps


if __name__ == "__main__" and sys.argv[2] == "--tools":
    # python carbench_score.py FIXTURE --tools calls.jsonl out.jsonl
    tasks = {}
    for name in Path(sys.argv[1], "tasks").glob("*.jsonl"):
        for line in name.read_text().splitlines():
            row = json.loads(line)
            tasks[row["task_id"]] = parse_task(row)
    with Path(sys.argv[4]).open("w") as f:
        for line in Path(sys.argv[3]).read_text().splitlines():
            row = json.loads(line)
            f.write(json.dumps({**row, "carbench": run_calls(tasks[row["task_id"]], row["calls"])}) + "\n")
elif __name__ == "__main__":
    out = []
    for line in Path(sys.argv[2]).read_text().splitlines():
        row = json.loads(line)
        theirs = score(parse_task(row["task"]), row["messages"])
        out.append({**row, "carbench": theirs})
        print(row["task_id"], row["kind"], theirs["reward"], file=sys.stderr)
    with open(sys.argv[3], "w") as f:
        for row in out:
            f.write(json.dumps(row) + "\n")
