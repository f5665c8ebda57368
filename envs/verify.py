"""The verifier's checks as pure functions over (domain, task, messages), for every environment family.

Checks, each with a reason when it fails:
  executable   every tool exists (for its requestor) and its arguments validate
  replay       re-executing every call from a fresh state reproduces every observation
  state        final DB equals the DB after the gold actions (hash compare), plus env assertions
  actions      every gold action appears with matching compared arguments (tau2's rule)
  communicate  every required piece of information was told to the user (tau2's rule)
  policy       machine-checkable domain rules on the state before each write
  factors      requested values of measurable factors equal the observed ones

The reward is the domain's (``Domain.reward``): by default the task's rule over the
components its reward basis names (DB / ENV_ASSERTION / ACTION / COMMUNICATE), for a
tau2 task exactly as tau2's evaluator computes it; a family whose benchmark scores by
its own replay (CAR-bench) computes its reward there. A trajectory whose recorded
observations do not replay gets reward 0 (tau2's evaluator raises on it).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from evosyn.envs.base import Domain, EnvTask
from evosyn.envs.factors import GATED, observe
from evosyn.envs.pack_errors import rule_fault
from evosyn.envs.policies import rule_code
from evosyn.envs.replay import gold_replay, replay, stored_gold_digest, task_key
from evosyn.storage.records import CheckResult, Message

STOP_REASONS = {"agent_stop", "user_stop"}
CHECKS = ("executable", "replay", "state", "actions", "communicate", "policy", "factors")


@dataclass
class Outcome:
    reward: float
    checks: list[CheckResult]
    observed: dict[str, list[str]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.reward == 1.0 and all(c.passed or c.skipped for c in self.checks)


def _check(name: str, problems: list[str], skipped: str = "") -> CheckResult:
    if skipped:
        return CheckResult(name=name, passed=True, skipped=True, reason=skipped)
    return CheckResult(name=name, passed=not problems, reason="; ".join(problems[:5]))


def _told(messages: list[Message]) -> list[str]:
    """What the assistant said, as ``communicated`` searches it (lower case, commas dropped)."""
    return [m.content.lower().replace(",", "") for m in messages if m.role == "assistant" and m.content]


def communicated(info: str, messages: list[Message], told: list[str] | None = None) -> bool:
    needle = info.lower()
    return any(needle in text for text in (told if told is not None else _told(messages)))


def _official_waivers(domain: Domain, task: EnvTask) -> dict[str, str]:
    waivers = domain.pack.official_waivers.get(task.id)
    if not waivers:
        return {}
    official = domain.official_task(task.id)
    # only the unmodified official task earns its waiver, never a synthesized look-alike
    return waivers if official is not None and (official is task or task_key(official) == task_key(task)) else {}


def run_checks(domain: Domain, task: EnvTask, messages: list[Message], termination: str = "agent_stop",
               requested: dict[str, list[str]] | None = None, gold_digest: str = "") -> Outcome:
    """``gold_digest``: the task's stored ``evosyn.envs.replay.gold_digest``; without one (or of another digest
    form) the gold actions are replayed (cached per task)."""
    calls = [c for m in messages for c in m.tool_calls]

    exec_problems = [p for c in calls if (p := domain.validate_arguments(c.name, c.arguments, c.requestor))]

    rules = domain.pack.policy_rules()
    violations: list[str] = []

    def before_call(episode, call, history):
        if rules is not None and domain.tool_kind(call.name, call.requestor) == "write":
            try:
                with episode.reading():  # the rules only read the state: nothing they look up is copied
                    violations.extend(rules(episode, call, history))
            except Exception as exc:  # arguments too malformed for the rule to read them, or a rule's own bug
                violations.append(f"[unverifiable] {call.name}: arguments cannot be checked against the policy "
                                  f"({rule_fault(exc)})")

    rep = replay(domain, task.initial_state, messages, before_call=before_call)
    waived = _official_waivers(domain, task)
    notes = [f"waived {rule_code(v)} for official task {task.id}: {waived[rule_code(v)]}"
             for v in violations if rule_code(v) in waived]
    violations = [v for v in violations if rule_code(v) not in waived]
    replay_problems = rep.structure_errors + rep.mismatches

    state_problems: list[str] = []
    db_ok, assertions_ok = True, True
    if task.state_checked:
        target = stored_gold_digest(domain, gold_digest) if gold_digest else None
        db_ok = rep.digest == (target if target is not None else gold_replay(domain, task)[0])
        if not db_ok:
            state_problems.append("final state differs from the state after the gold actions")
        failed_assertions = task.failed_assertions(rep.episode)
        assertions_ok = not failed_assertions
        state_problems.extend(f"env assertion failed: {name}" for name in failed_assertions)

    missing = [a.name for a in task.gold_actions if not any(a.matches(c.name, c.arguments) for c in calls)]
    action_problems = [f"gold action not performed: {name}" for name in missing]

    infos = task.communicate_info
    told = _told(messages) if infos else []
    comm_problems = [f"not told to the user: {info!r}" for info in infos if not communicated(info, messages, told)]

    observed = observe(domain.pack, rep, messages)
    factor_problems = []
    for key, values in (requested or {}).items():
        if key in GATED and values:
            if sorted(values) != sorted(observed.get(key, [])):
                factor_problems.append(f"{key}: requested {values}, observed {observed.get(key)}")

    checks = [
        _check("executable", exec_problems),
        _check("replay", replay_problems),
        _check("state", state_problems),
        _check("actions", action_problems),
        _check("communicate", comm_problems),
        _check("policy", violations, skipped="" if rules else f"no machine-checkable rules for {domain.name}"),
        _check("factors", factor_problems, skipped="" if requested else "no requested factor values"),
    ]

    if notes and not violations:
        checks[5] = CheckResult(name="policy", passed=True, reason="; ".join(sorted(set(notes))))

    reward = 1.0
    if termination not in STOP_REASONS:
        reward = 0.0
    elif task.evaluated:
        if replay_problems:
            reward = 0.0  # tau2 refuses to score a trajectory whose tool messages do not replay
        else:
            reward = domain.reward(task, messages, {"DB": db_ok, "ENV_ASSERTION": assertions_ok,
                                                    "ACTION": not action_problems, "COMMUNICATE": not comm_problems})
    return Outcome(reward=reward, checks=checks, observed=observed)
