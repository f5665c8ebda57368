"""What a domain pack lacks, before any work: errors that stop a command and warnings about recorded facts.

``problems(pack, purpose)`` loads the pack's environment and returns
``Finding``s, each one line naming the setting and the fix:

- errors stop ``synth`` / ``run`` before any work (``evosyn`` prints the first as ``error: …`` and exits 2;
  ``evosyn envs check`` lists them all and exits 1): a pack that failed to import, no ``ontology.json`` (or an
  invalid one), an environment that fails to load, a tool of an unknown kind, a ``policy.py`` without
  ``check_write``, no generator for the embedded backend, and for ``run`` (and ``envs check``) an empty
  ``controllable`` (the uniform test set draws on it);
- warnings name each optional setting left at a default that changes what is recorded (task families,
  tool-use patterns, policy gating, the user's wording, identity words), refusals the planner may plan that
  the generator cannot build, and how many official tasks the official-matched test set can match
  (``evosyn envs check`` prints them all; none stops a command).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from evosyn.envs.base import TOOL_KINDS
from evosyn.envs.ontology import SpaceError, load_initial_space
from evosyn.envs.pack_errors import fault_line, message, shown
from evosyn.envs.packs import DomainPack, PackError, UserPhrasing, environment_of

Purpose = Literal["check", "synth", "run"]
FEW_OFFICIAL = 10  # fewer official tasks with gold actions than this: the official-matched set repeats few cells


@dataclass(frozen=True)
class Finding:
    level: Literal["error", "warning"]
    setting: str  # the pack setting or file concerned
    message: str  # what is wrong and the fix

    def line(self) -> str:
        return f"{self.setting}: {self.message}"


def _error(setting: str, message: str) -> Finding:
    return Finding("error", setting, message)


def _warn(setting: str, message: str) -> Finding:
    return Finding("warning", setting, message)


def problems(pack: DomainPack, purpose: Purpose = "check", embedded: bool = True) -> list[Finding]:
    """The pack's findings, errors first (``pack``: the one the caller resolved, ``evosyn.flows.compile``).
    ``embedded``: the command synthesizes with the embedded generator."""
    name = pack.name
    out = _space(pack)
    has_space = not out  # the checks below that read the space need one
    try:
        domain = environment_of(pack)
    except Exception as exc:  # the pack's own code: one line naming where, the traceback is --debug's
        return out + [_error("environment()", f"the {name} environment failed to load: {fault_line(exc)}")]
    try:
        tools = domain.tools()
    except Exception as exc:  # an environment whose tool table cannot be read (a kind tau2 does not know, ...)
        return out + [_error("tools", f"the {name} tools cannot be listed: {type(exc).__name__}: {_first(exc)}")]
    for spec in tools:
        if spec.kind not in TOOL_KINDS:
            out.append(_error("tools", f"tool {spec.name!r} has kind {spec.kind!r}; use one of "
                                       f"{', '.join(TOOL_KINDS)} (a write changes the state, a read only looks)"))
    out += _policy(pack)
    if embedded and not pack.has_generator:
        out.append(_error("task_builder", f"domain {name!r} has no embedded generator; define "
                                          "task_builder(domain, prior) in its pack (docs: Adding a domain)"))
    if not pack.controllable:
        finding = _warn if purpose == "synth" else _error  # `envs check` checks what a run needs
        out.append(finding("controllable", "empty: `evosyn run` needs the properties the generator realizes "
                                           "exactly (its uniform test set draws on them); set e.g. controllable = "
                                           "properties.controllable(\"num_write\", \"num_read\")"))
    if purpose == "check":
        writes = sorted({s.name for s in tools if s.kind == "write"})
        out += _facts(pack, writes) + (_names(pack, writes) + _planner(pack) if has_space else []) + _official(domain)
    return sorted(out, key=lambda f: f.level != "error")


def first_error(pack: DomainPack, purpose: Purpose, embedded: bool = True) -> str | None:
    """The first error line (what a command stops on before any work), or None."""
    return next((f.line() for f in problems(pack, purpose, embedded) if f.level == "error"), None)


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _space(pack: DomainPack) -> list[Finding]:
    """The initial space's errors, each naming the file (``path:line:col`` for JSON that does not parse), the
    field and the fix."""
    try:
        load_initial_space(pack)
    except PackError as exc:  # no ontology.json: the message names the file and the fix
        return [_error("ontology.json", str(exc).removeprefix("ontology.json: "))]
    except json.JSONDecodeError as exc:
        return [_error(f"{_ontology(pack)}:{exc.lineno}:{exc.colno}", f"not valid JSON ({exc.msg})")]
    except (SpaceError, ValueError, TypeError, KeyError) as exc:  # a factor missing a field, a bad cardinality
        return [_error(_ontology(pack), f"not a valid initial space: {message(exc)}")]
    return []


def _ontology(pack: DomainPack) -> str:
    """Where the pack's ``ontology.json`` is, as a user would type it."""
    from importlib import resources

    try:
        return shown(str(resources.files(pack.package).joinpath("ontology.json")))
    except (ModuleNotFoundError, TypeError):  # a pack class with no package of its own
        return "ontology.json"


def _policy(pack: DomainPack) -> list[Finding]:
    try:
        rules = pack.policy_rules()
    except Exception as exc:  # PackError (no check_write), or the policy module's own import error
        return [_error("policy.py", f"{_first(exc).removeprefix('policy.py: ')}")]
    if rules is None:
        return [_warn("policy.py", "none: no rule is checked before a write (the verifier's policy check says "
                                   "'not checked'); add policy.py with check_write(episode, call, history)")]
    return []


def _facts(pack: DomainPack, writes: list[str]) -> list[Finding]:
    """Optional settings whose defaults change recorded facts."""
    out = []
    unmapped = [w for w in writes if w not in pack.family_by_tool]
    if unmapped and pack.default_family == "unknown":
        out.append(_warn("family_by_tool", f"write tools {unmapped} map to no task family: their tasks record "
                                           "task_family 'unknown' (set family_by_tool or default_family)"))
    if not pack.focus_by_tool:
        out.append(_warn("focus_by_tool", "empty: no task records the policy focus it exercised"))
    if not pack.shape_values:
        out.append(_warn("shape_values", "empty: no task records a tool_use_pattern (map the generic shapes to "
                                         "your ontology's values)"))
    if not pack.gated_prefixes:
        out.append(_warn("gated_prefixes", "empty: policy_gated is 0 for every task (name the writes a policy "
                                           "check must precede)"))
    if not pack.identify_reads:
        out.append(_warn("identify_reads", "empty: no read counts as identifying the customer"))
    default = UserPhrasing()
    if pack.phrasing == default:
        out.append(_warn("phrasing", f"the default wording: the user is asked for and gives a '"
                                     f"{default.identity_words[0]}' (set phrasing = UserPhrasing(...))"))
    elif pack.phrasing.identity_words == default.identity_words:
        out.append(_warn("phrasing.identity_words", f"the default {default.identity_words}: an agent asking for "
                                                    "your domain's identifier is not recognised"))
    return out


def _names(pack: DomainPack, writes: list[str]) -> list[Finding]:
    """Maps that name a tool the environment lacks or a value the space lacks: what they record never matches."""
    space = {f["key"]: set(f["values"]) for f in pack.initial_space()["factors"]}
    checks = [("family_by_tool", set(pack.family_by_tool) - set(writes), "write tools"),
              ("focus_by_tool", set(pack.focus_by_tool) - set(writes), "write tools"),
              ("family_by_tool", set(pack.family_by_tool.values()) - space.get("task_family", set()),
               "task_family values"),
              ("focus_by_tool", set(pack.focus_by_tool.values()) - space.get("policy_or_constraint_focus", set()),
               "policy_or_constraint_focus values"),
              ("shape_values", set(pack.shape_values.values()) - space.get("tool_use_pattern", set()),
               "tool_use_pattern values")]
    return [_warn(setting, f"names {sorted(bad)}, which are not {what} of this domain (ontology.json, the "
                           "environment's tools): what it records never matches")
            for setting, bad, what in checks if bad]


def _planner(pack: DomainPack) -> list[Finding]:
    """Refusals the planner may plan and the generator cannot build. The planner refuses only families that
    ``planner_rules.violable`` gives a rule to break (agents/planner.py), so what is left is a pack naming none,
    or naming rules and families its space does not have."""
    factors = {f["key"]: f["values"] for f in pack.initial_space()["factors"]}
    if "refuse" not in factors.get("expected_outcome", []):
        return []
    violable = pack.planner_rules.violable
    if not violable:
        return [_warn("planner_rules.violable", "empty: the planner may plan a refusal of any family, and the "
                                                "generator can build none without a rule it breaks (name each "
                                                "family's rules: PlannerRules(violable={family: [focus, ...]}))")]
    out = []
    families = set(factors.get("task_family", []))
    if families and (unknown := sorted(set(violable) - families)):
        out.append(_warn("planner_rules.violable", f"names families {unknown} that ontology.json's task_family "
                                                   "lacks: their rules are never planned"))
    foci = set(factors.get("policy_or_constraint_focus", []))
    if foci and (unknown := sorted({f for rules in violable.values() for f in rules} - foci)):
        out.append(_warn("planner_rules.violable", f"names rules {unknown} that ontology.json's "
                                                   "policy_or_constraint_focus lacks: refusals planned on them "
                                                   "fail the space's check"))
    return out


def _official(domain) -> list[Finding]:
    tasks = domain.tasks(None)
    gold = [t for t in tasks if t.gold_actions]
    if not gold:
        return [_warn("official tasks", f"{'none' if not tasks else 'none with gold actions'}: `evosyn run` "
                                        "skips the official-matched test set and tests on the uniform set")]
    if len(gold) < FEW_OFFICIAL:
        return [_warn("official tasks", f"only {len(gold)} with gold actions: the official-matched test set "
                                        f"repeats their few cells")]
    return []

