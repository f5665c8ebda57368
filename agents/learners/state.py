"""The embedded learner's decision state: the tokens its next-move models read (the request being served, the
moves so far, the words of the user's first and last messages, the facts in focus). Nothing here names a domain."""
from __future__ import annotations

from evosyn.agents.learners.features import WORD, Scene
from evosyn.storage.records import Message


def state_tokens(history: list[Message], scene: Scene, labels: list[str]) -> str:
    """The decision state as space-separated tokens; ``labels`` are the agent's earlier moves."""
    dlg = scene.dlg
    cur, nxt = dlg.current, dlg.next
    prev = labels[-1] if labels else "none"
    ident = f"id={bool(dlg.identity)}"
    id_used = f"idu={any(str(m.value) in scene.used for m in dlg.identity)}"
    left = sum(1 for c in dlg.clauses[dlg.pointer:] if c.keys - scene.used)  # requests with values not used yet
    toks = [ident, id_used, f"{ident}|{id_used}|prev_{prev}", f"left_{min(left, 3)}", f"left_{min(left, 3)}|prev_{prev}"]
    if cur is None:
        toks += ["cur_none", f"cur_none|prev_{prev}", f"cur_none|{len(dlg.clauses) > 0}"]
    else:
        status = f"open{min(dlg.calls, 3)}" + ("w" if dlg.wrote else "")
        toks += [f"cur_{status}", f"cur_first_{dlg.pointer == 0}", f"has_next_{nxt is not None}",
                 f"{status}|prev_{prev}", f"{status}|{id_used}"]
        for w in cur.words:
            toks += [f"cw_{w}", f"cw_{w}|{status}", f"cw_{w}|prev_{prev}", f"cw_{w}|{id_used}",
                     f"cw_{w}|{status}|{id_used}"]
        toks += [f"nw_{w}" for w in nxt.words] if nxt is not None else ["nw_none"]
        if scene.open != dlg.pointer:
            opened = dlg.clauses[scene.open] if scene.open < len(dlg.clauses) else None
            toks += [f"ow_{w}" for w in opened.words] if opened else ["ow_none"]
            toks += [f"ow_{w}|{status}" for w in opened.words] if opened else ["ow_none|" + status]
        pending = [m for m in cur.mentions if str(m.value) not in scene.used and not m.is_name]
        toks += [f"pend_{m.kind}" for m in pending[:3]] or ["pend_none"]
        toks += [f"pend_{m.kind}|{status}" for m in pending[:1]]
    users = [m for m in history if m.role == "user" and m.content]
    if users:
        toks += [f"f_{w}" for w in WORD.findall(users[0].content.lower())]
        toks += [f"u_{w}" for w in WORD.findall(users[-1].content.lower())]
    last = history[-1] if history else None
    if last is not None:
        toks.append(f"last_role_{last.role}")
        if last.role == "tool":
            toks.append("last_error" if last.error else "last_ok")
    toks += [f"did_{lab}" for lab in labels]
    if labels:
        toks.append(f"prev2_{'|'.join(labels[-2:])}")
    toks.append(f"steps_{min(len(labels), 30) // 3}")
    toks += [f"ctx_{f}" for f in scene.facts]
    return " ".join(toks)
