"""Asking a role's LLM for a validated answer (shared by every LLM-backed role).

A role's call is split in three: a pure prompt builder (inputs -> chat
messages), the model call, and a pure parser/validator (schema instance ->
domain object, raising ``Invalid`` with a one-line reason). ``ask`` re-asks
with the reason shown to the model, at most ``retries`` times, then raises
``RoleRejected``; a transport failure (``LLMUnavailable``) becomes a
``RoleRejected`` at once, so one bad item is a recorded rejection, never a
crashed round.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:  # the client is imported lazily: agents.llm pulls in the provider SDKs
    from evosyn.agents.llm import LLMClient

T = TypeVar("T")
log = logging.getLogger("evosyn.roles")
ECHO_LIMIT = 4000  # characters of an invalid reply shown back to the model


class Invalid(ValueError):
    """The reply parsed but breaks a rule beyond its schema (space, constraints, tools)."""


class RoleRejected(ValueError):
    """No usable answer within the bound: the item is rejected with this one-line reason."""

    def __init__(self, reason: str, raw: str = ""):
        super().__init__(reason)
        self.raw = raw


class StageUnavailable(RuntimeError):
    """Every call one role made in a stage failed on transport: the run cannot go on (a one-line message)."""

    def __init__(self, role: str, endpoint: str, error: str):
        super().__init__(role, endpoint, error)  # the args rebuild it: pickling (Prefect results) keeps it
        self.role, self.endpoint, self.error = role, endpoint, error

    def __str__(self) -> str:
        return f"{self.role}: the LLM at {self.endpoint} cannot be used: {self.error}"


class RoleInvalid(StageUnavailable):
    """A configured LLM role's replies stayed invalid and its ``on_invalid`` is ``fail``: the run stops (one line)."""

    def __str__(self) -> str:
        return (f"{self.role}: the LLM at {self.endpoint} gave no usable reply ({self.error}); the run stops "
                f"(roles.{self.role}.on_invalid: fail). Set roles.{self.role}.on_invalid: fallback to go on "
                "without it, with a warning")


def fallback_note(role: str, what: str) -> str:
    """The warning a stage's line, the report and MLflow show for a fallback."""
    return f"warning: {role} fell back ({what})"


@dataclass
class Answer(Generic[T]):
    value: T  # the validated domain object
    parsed: Any  # the schema instance it came from
    raw: str  # the model's raw text, kept beside the parsed value
    attempts: int


def template(name: str) -> Template:
    return Template(resources.files("evosyn.agents.prompts").joinpath(name).read_text())


def render(name: str, **values: Any) -> str:
    """Fill a template; dicts and lists are rendered as indented JSON."""
    text = {k: v if isinstance(v, str) else json.dumps(v, indent=1, sort_keys=True, default=str)
            for k, v in values.items()}
    return template(name).substitute(text)


def one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def reask(problem: str) -> str:
    return ("Your previous reply could not be used: " + problem + "\nReply again with the complete answer, "
            "fixing this problem, as strict JSON matching the required schema and nothing else.")


def ask(client: "LLMClient", messages: list[dict], *, schema: type[BaseModel], validate: Callable[[Any], T],
        role: str, retries: int) -> Answer[T]:
    """The validated answer, or ``RoleRejected`` after ``retries`` re-asks (or when the model is unavailable)."""
    from evosyn.agents.llm import LLMOutputError, LLMUnavailable

    convo, raw, problem = list(messages), "", "no attempt"
    for attempt in range(retries + 1):
        try:
            res = client.chat_sync(convo, schema=schema, role=role, attempt=attempt)
        except LLMOutputError as exc:
            raw, problem = exc.raw or "", one_line(str(exc))
        except LLMUnavailable as exc:
            raise RoleRejected(f"{role}: LLM unavailable: {one_line(str(exc))}") from None
        else:
            raw = res.text
            try:
                if res.parsed is None:  # e.g. a tool call where the answer should have been
                    raise Invalid(f"expected a JSON {schema.__name__} object as the reply's text, got "
                                  f"{'a tool call' if res.tool_calls else 'no answer'}")
                return Answer(validate(res.parsed), res.parsed, raw, attempt + 1)
            except (Invalid, ValidationError) as exc:  # whatever the output broke
                problem = one_line(str(exc))
            except Exception as exc:  # a value no rule foresaw (a role bug, or a reply too odd): re-asked, logged
                log.warning("%s: validating a reply raised %s: %s", role, type(exc).__name__, one_line(str(exc)))
                problem = one_line(f"{type(exc).__name__}: {exc}")
            # the call's row says so: ``rejected`` (of its schema, refused by the role), or ``invalid`` (no answer)
            calls = getattr(client, "log", None)
            if calls is not None and res.call_id:
                calls.reject(res.call_id, problem, "invalid" if res.parsed is None else "rejected")
        # only the latest failure is echoed, so a re-ask stays as short as the first question
        convo = [*messages, {"role": "assistant", "content": raw[:ECHO_LIMIT] or "(empty reply)"},
                 {"role": "user", "content": reask(problem)}]
    raise RoleRejected(f"{role}: invalid output after {retries + 1} attempts: {problem}", raw=raw)


def tools_summary(domain: Any, requestor: str = "assistant") -> list[dict]:
    """Tool names, kinds, descriptions and argument names: enough to plan with, shorter than the schemas."""
    out = []
    for spec in domain.tools(requestor):
        props = spec.parameters.get("properties", {})
        out.append({"name": spec.name, "kind": spec.kind, "arguments": sorted(props),
                    "description": one_line(spec.description, 200)})
    return out


def space_values(space: Any) -> dict[str, dict]:
    """The active factors as key -> values, cardinality, status and guidance."""
    return {f.key: {"values": f.values, "choose": f"{f.cardinality.min}..{f.cardinality.max}", "status": f.status,
                    "guidance": f.guidance} for f in space.active}
