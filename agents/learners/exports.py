"""Training-data exports: LLaMA-Factory ShareGPT (with tools), OpenAI chat JSONL, tau2 task JSON.

Train and serve see one conversation. ``agent_turns`` is the task agent's view of
a trajectory, used by the exports and by the served agent's requests
(``openai_agent.to_openai``): the system prompt is the domain policy exactly as
``harness.run_episode`` hands it to the agent; parallel tool calls stay one
assistant turn and their results one observation turn; two texts in a row from
one side are one turn; the user's own device actions and their results
are part of the user's turn, as text. LLaMA-Factory's rules follow: the
conversation starts on the user side, user-side turns (``human``,
``observation``) and assistant-side turns (``gpt``, ``function_call``) alternate,
and a training conversation ends on the assistant side. A trajectory that cannot
be put in that shape raises ``ExportError`` (its reason is counted by
``export_rows``), never silently mangled.

LLaMA-Factory (0.9.5) details the rows follow: a ``function_call`` value is one
``{"name", "arguments"}`` object or a list of them (parallel calls), arguments as
JSON objects; text the assistant wrote beside its calls goes before them with the
calls inside ``<tool_call>...</tool_call>`` (the qwen templates' tool-call words,
which its FunctionFormatter splits off); several results in one observation are
joined by ``\\n</tool_response>\\n<tool_response>\\n``, as its own OpenAI-format
converter joins them, so a qwen template renders them as Qwen's chat template does.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from evosyn.storage import atomic
from evosyn.storage.records import Message, SFTExample, SynthTask, ToolCall

DATASET_NAME = "evosyn"
RESULTS_JOIN = "\n</tool_response>\n<tool_response>\n"
USER_SIDE, ASSISTANT_SIDE = ("human", "observation"), ("gpt", "function_call")


class ExportError(ValueError):
    pass


@dataclass
class Turn:
    kind: str  # human | gpt | function_call | observation
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    results: list[Message] = field(default_factory=list)  # observation: the tool messages, as the calls came

    @property
    def side(self) -> str:
        return "user" if self.kind in USER_SIDE else "assistant"


def _join(a: str, b: str) -> str:
    return f"{a}\n{b}" if a and b else a or b


def agent_turns(messages: list[Message], example_id: str = "", complete: bool = True) -> list[Turn]:
    """The conversation as the task agent sees it, in alternating turns (see the module docstring).

    ``complete``: a training conversation (must end on the assistant side: trailing user-side turns, e.g.
    the user's goodbye, carry no target and are left out); False for a conversation still being answered.
    """
    turns: list[Turn] = []
    device_calls: dict[str, str] = {}  # the user's device calls: id -> tool name
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool" and m.requestor == "user":  # a device result: the user's turn reports it
            turn = Turn("human", f"[{device_calls.get(m.tool_call_id or '', 'device')} on my device] {m.content or ''}")
        elif m.role == "tool":
            turn = Turn("observation", results=[m])
        elif m.role == "user":
            device_calls.update({c.id: c.name for c in m.tool_calls})
            turn = Turn("human", m.content or "")
        elif m.tool_calls:
            turn = Turn("function_call", m.content or "", calls=list(m.tool_calls))
        else:
            turn = Turn("gpt", m.content or "")
        last = turns[-1] if turns else None
        if turn.kind == "observation" and (last is None or last.kind not in ("function_call", "observation")):
            raise ExportError(f"{example_id}: a tool result without its call")
        if last is None or last.side != turn.side:
            if turn.kind != "observation" and last is not None and last.kind == "function_call":
                raise ExportError(f"{example_id}: function_call followed by {turn.kind} (a call without its result)")
            turns.append(turn)
        elif turn.kind == last.kind == "human" or turn.kind == last.kind == "gpt":
            last.text = _join(last.text, turn.text)  # two texts in a row from one side: one turn
        elif last.kind == "gpt" and turn.kind == "function_call":
            turns[-1] = Turn("function_call", _join(last.text, turn.text), calls=turn.calls)  # text, then calls
        elif last.kind == turn.kind == "observation":
            last.results += turn.results  # the results of parallel calls: one observation
        else:
            raise ExportError(f"{example_id}: {last.kind} followed by {turn.kind}")
    for prev, turn in zip(turns, turns[1:]):
        if turn.kind == "observation" and len(turn.results) != len(prev.calls):
            raise ExportError(f"{example_id}: {len(prev.calls)} tool calls but {len(turn.results)} results")
    if complete:  # a last call (e.g. a transfer) stays a target; its result, like a goodbye, is not one
        while turns and turns[-1].side == "user":
            turns.pop()
    if not turns or turns[0].kind != "human":
        raise ExportError(f"{example_id}: must start with a user message")
    return turns


def _call_json(calls: list[ToolCall]) -> str:
    objs = [{"name": c.name, "arguments": c.arguments} for c in calls]
    return json.dumps(objs[0] if len(objs) == 1 else objs, ensure_ascii=False)


def sharegpt(example: SFTExample, system: str = "") -> dict[str, Any]:
    rows = []
    for t in agent_turns(example.messages, example.example_id):
        if t.kind == "function_call":
            value = f"{t.text}<tool_call>{_call_json(t.calls)}</tool_call>" if t.text else _call_json(t.calls)
        elif t.kind == "observation":
            value = RESULTS_JOIN.join(r.content or "" for r in t.results)
        else:
            value = t.text
        rows.append({"from": t.kind, "value": value})
    return {"conversations": rows, "system": system, "tools": json.dumps(example.tools, ensure_ascii=False)}


def openai_calls(calls: list[ToolCall]) -> list[dict[str, Any]]:
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in calls]


def chat_message(m: Message) -> dict[str, Any]:
    """One message in OpenAI's chat format, the one converter every view builds on (the exports below, the
    served agent's requests, the LLM teacher's prompt): a tool result with its call's id, calls as function
    calls with their arguments as JSON text, any other message as its text. The content beside calls is the
    message's own (our producers store None when the calls come alone, as OpenAI writes it), so the HF
    export's rows stay a record of the stored messages."""
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content or ""}
    if m.tool_calls:  # its own role: a user may call tools of its own (dual control)
        return {"role": m.role, "content": m.content, "tool_calls": openai_calls(m.tool_calls)}
    return {"role": m.role, "content": m.content or ""}


def openai_turns(turns: list[Turn], system: str, merge_results: bool = False) -> list[dict[str, Any]]:
    """Chat messages; ``merge_results``: one tool message per observation (what a strictly alternating
    server, ``llamafactory-cli api``, takes), else one per result (the OpenAI fine-tuning format)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for t in turns:
        if t.kind == "function_call":
            out.append(chat_message(Message(role="assistant", content=t.text or None, tool_calls=t.calls)))
        elif t.kind == "observation" and merge_results:
            out.append(chat_message(Message(role="tool", tool_call_id=t.results[0].tool_call_id or "",
                                            content=RESULTS_JOIN.join(r.content or "" for r in t.results))))
        elif t.kind == "observation":  # a turn's result without an id keeps an empty one (the format needs one)
            out += [chat_message(Message(role="tool", tool_call_id=r.tool_call_id or "", content=r.content))
                    for r in t.results]
        else:
            out.append(chat_message(Message(role="user" if t.kind == "human" else "assistant", content=t.text)))
    return out


def openai_messages(example: SFTExample, system: str = "") -> dict[str, Any]:
    return {"messages": openai_turns(agent_turns(example.messages, example.example_id), system),
            "tools": example.tools}


def trajectory_messages(example: SFTExample, system: str = "") -> dict[str, Any]:
    """The stored messages one for one as OpenAI chat messages (the HF dataset's rows: a record of the
    trajectory, not a training conversation)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    return {"messages": out + [chat_message(m) for m in example.messages], "tools": example.tools}


@dataclass
class Exported:
    rows: list[dict[str, Any]]
    dropped: Counter  # reason -> examples left out

    def line(self, held_out: int | None = None) -> str:
        """``exported 40, dropped 1 (2 tool calls but 1 results: 1)[; held out 9 diagnostic]``"""
        why = ", ".join(f"{r}: {k}" for r, k in self.dropped.most_common())
        held = "" if held_out is None else f"; held out {held_out} diagnostic (evaluation only, never trained on)"
        return f"exported {len(self.rows)}, dropped {sum(self.dropped.values())}" + (f" ({why})" if why else "") + held


System = str | Callable[[SFTExample], str]  # one system prompt, or each example's (its task's policy)


def export_rows(examples: Iterable[SFTExample], render: Callable[..., dict[str, Any]], system: System) -> Exported:
    """Every example ``render`` (``sharegpt`` or ``openai_messages``) can hold; the rest counted by reason."""
    rows, dropped = [], Counter()
    for e in examples:
        try:
            rows.append(render(e, system if isinstance(system, str) else system(e)))
        except ExportError as exc:
            dropped[str(exc).split(": ", 1)[-1]] += 1
    return Exported(rows, dropped)


OPENAI_FILE, OPENAI_LF_FILE = "train.jsonl", "llamafactory.jsonl"


def write_openai(examples: Iterable[SFTExample], out: Path, system: System = "") -> Exported:
    """``train.jsonl`` in OpenAI's chat fine-tuning format (tools as objects), and the same rows for
    LLaMA-Factory in ``llamafactory.jsonl`` with ``dataset_info.json``: there ``tools`` is a JSON string,
    because a JSON loader (Hugging Face ``datasets``, which LLaMA-Factory uses) merges a list of tool schemas
    into one Arrow struct, giving every tool every other tool's parameters as nulls."""
    exported = export_rows(examples, openai_messages, system)
    atomic.write_text(out / OPENAI_FILE, "".join(json.dumps(r) + "\n" for r in exported.rows))
    atomic.write_text(out / OPENAI_LF_FILE, "".join(json.dumps({**r, "tools": json.dumps(r["tools"])}) + "\n"
                                                    for r in exported.rows))
    atomic.write_json(out / "dataset_info.json", dataset_info(OPENAI_LF_FILE, formatting="openai"), indent=2)
    return exported


_OPENAI_TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
                "observation_tag": "tool", "function_tag": "function_call", "system_tag": "system"}


def dataset_info(file_name: str, name: str = DATASET_NAME, formatting: str = "sharegpt") -> dict[str, Any]:
    """LLaMA-Factory's ``dataset_info.json`` entry for a ShareGPT (``evosyn.json``) or OpenAI
    (``llamafactory.jsonl``) export: the policy is the ``system`` column (ShareGPT) or the first message."""
    if formatting == "openai":
        return {name: {"file_name": file_name, "formatting": "openai",
                       "columns": {"messages": "messages", "tools": "tools"}, "tags": _OPENAI_TAGS}}
    return {name: {"file_name": file_name, "formatting": "sharegpt",
                   "columns": {"messages": "conversations", "system": "system", "tools": "tools"},
                   "tags": {"role_tag": "from", "content_tag": "value", "user_tag": "human",
                            "assistant_tag": "gpt", "observation_tag": "observation",
                            "function_tag": "function_call", "system_tag": "system"}}}


def task_definitions(tasks: list[SynthTask]) -> list[dict[str, Any]]:
    """Each task in its environment family's own JSON (tau2 task JSON for a tau2 domain)."""
    return [t.definition for t in tasks]
