"""A fault in a domain pack's own code as one line: where in the pack it was raised, and what it says.

The registry, the pack check, the generator and the verifier report a pack author's bug (an import that fails,
a tool that raises, a policy rule that reads a missing field) by the file and line of the pack's code that
raised it, never by the core's frame that happened to call it; the traceback stays with ``evosyn --debug``.
"""
from __future__ import annotations

import json
import os
import re
import sysconfig
import traceback
from pathlib import Path
from types import TracebackType

# frames in these folders are a library's (the standard library, installed packages), never the pack's code
_LIBRARIES = tuple(str(Path(p).resolve()) + os.sep
                   for p in {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")} if p)


class ToolFault(RuntimeError):
    """A tool raised where it should have returned its refusal as an observation (``Episode.step`` never
    raises): one line naming the tool, the pack's file and line, and the error."""


def shown(path: str | os.PathLike[str]) -> str:
    """A path as a user would type it: relative to the working directory when below it."""
    text = str(path)
    try:
        rel = os.path.relpath(text)
    except ValueError:  # another drive
        return text
    return text if rel.startswith("..") else rel


def _frames(tb: TracebackType | None) -> list[TracebackType]:
    out = []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


def _is_library(filename: str) -> bool:
    return filename.startswith("<") or str(Path(filename).resolve()).startswith(_LIBRARIES)


def origin(exc: BaseException, folder: str | os.PathLike[str] | None = None) -> tuple[str, int, str] | None:
    """(file, line, function) of the code that raised ``exc``: its innermost frame below ``folder`` (a pack's
    folder), else its innermost frame outside the libraries; a ``SyntaxError``'s own file and line."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return exc.filename, exc.lineno, "<module>"
    frames = [(tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame.f_code.co_name)
              for tb in _frames(exc.__traceback__)]
    if folder is not None:
        root = str(Path(folder).resolve()) + os.sep
        mine = [f for f in frames if str(Path(f[0]).resolve()).startswith(root)]
        if mine:
            return mine[-1]
    own = [f for f in frames if not _is_library(f[0])]
    return (own or frames or [None])[-1]


def message(exc: BaseException) -> str:
    """The error's text in one line: a pydantic ``ValidationError`` as its first error's field and message, a
    ``JSONDecodeError`` with the file (when a frame read it), line and column, else the first line."""
    if isinstance(exc, json.JSONDecodeError):
        return _at(exc, exc.doc, exc.lineno, exc.colno, exc.msg)
    errors = getattr(exc, "errors", None)
    if type(exc).__name__ == "ValidationError" and callable(errors):  # pydantic's: its title line names no field
        try:
            found = errors()
        except Exception:  # not pydantic's after all
            found = []
        if found:
            first = found[0]
            text = str(first.get("msg", ""))
            spot = re.search(r" at line (\d+) column (\d+)", text)
            if first.get("type") == "json_invalid" and spot and isinstance(first.get("input"), str):
                return _at(exc, first["input"], int(spot[1]), int(spot[2]), text.replace(spot[0], ""))
            where = ".".join(map(str, first.get("loc", ()))) or "value"
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            return f"{getattr(exc, 'title', '')}: {where}: {text}{more}".lstrip(": ")
    if isinstance(exc, SystemExit):
        return f"the pack called sys.exit({exc.code!r})"
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _at(exc: BaseException, doc: str, line: int, column: int, text: str) -> str:
    """``file:line:col: text`` for JSON that does not parse, the file found by its text; ``line L column C``
    when no file holds it (JSON built in memory)."""
    file = _json_file(exc, doc)
    return f"{shown(file)}:{line}:{column}: {text}" if file else f"line {line} column {column}: {text}"


def _json_file(exc: BaseException, doc: str) -> str | None:
    """The ``.json`` file whose text is ``doc``: a file a frame of ``exc`` held (``json.load``'s open file, a
    path), else one beside the code that raised it (a pack reading its ``db.json``)."""
    frames = _frames(exc.__traceback__)
    candidates: list[Path] = []
    for tb in reversed(frames):
        for value in tb.tb_frame.f_locals.values():
            name = getattr(value, "name", None) if hasattr(value, "read") else value
            if isinstance(name, (str, Path)) and str(name).endswith(".json"):
                candidates.append(Path(name))
    for tb in reversed(frames):
        code = tb.tb_frame.f_code.co_filename
        if not _is_library(code):
            candidates += sorted(Path(code).parent.glob("*.json"))[:50]
    for path in candidates:
        try:
            if path.is_file() and path.stat().st_size == len(doc.encode()) and path.read_text() == doc:
                return str(path)
        except (OSError, UnicodeDecodeError):
            continue
    return None


def _is_episode(obj: object) -> bool:
    """An ``envs.base.Episode`` (by its class's lineage: this module is below the registry that base imports)."""
    return any(c.__name__ == "Episode" and c.__module__ == "evosyn.envs.base" for c in type(obj).__mro__)


def tool_of(exc: BaseException) -> str | None:
    """The tool an ``Episode.step`` frame of ``exc``'s traceback was running (its ``name`` argument)."""
    for tb in _frames(exc.__traceback__):
        frame = tb.tb_frame
        if frame.f_code.co_name == "step" and _is_episode(frame.f_locals.get("self")):
            name = frame.f_locals.get("name")
            if isinstance(name, str):
                return name
    return None


def fault_line(exc: BaseException, folder: str | os.PathLike[str] | None = None) -> str:
    """``TypeError at domains/gym/environment.py:110 (in get_class_details): ...``, naming the tool it ran in
    (``tool 'x' raised ...``) when an episode's step raised it."""
    if isinstance(exc, ToolFault):
        return str(exc)
    where = origin(exc, folder)
    at = f" at {shown(where[0])}:{where[1]}" + (f" (in {where[2]})" if where[2] != "<module>" else "") \
        if where else ""
    text = message(exc)
    tool = tool_of(exc)
    return (f"tool {tool!r} raised " if tool else "") + f"{type(exc).__name__}{at}" + (f": {text}" if text else "")


def rule_fault(exc: BaseException) -> str:
    """A policy rule that raised: ``AttributeError: 'Member' object has no attribute 'tier', in rule check_write
    at domains/gym/policy.py:20`` (the message first: it is what a reader of a cut reason needs)."""
    where = origin(exc)
    text = message(exc)
    return f"{type(exc).__name__}" + (f": {text}" if text else "") + \
        (f", in rule {where[2]} at {shown(where[0])}:{where[1]}" if where else "")


def setting_line(cls: type, setting: str) -> str:
    """Where a class (a pack's) sets ``setting``: ``file:line`` (its module when the source cannot be read)."""
    import inspect

    owner = next((c for c in cls.__mro__ if setting in vars(c)), cls)
    try:
        lines, start = inspect.getsourcelines(owner)
        file = inspect.getsourcefile(owner) or owner.__module__
    except (OSError, TypeError):  # a class defined in a string, a frozen module
        return owner.__module__
    line = next((start + i for i, text in enumerate(lines) if text.strip().startswith(setting)), start)
    return f"{shown(file)}:{line}"


def traceback_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)).rstrip()


def run_tool(episode, name: str, arguments: dict, requestor: str = "assistant"):
    """``episode.step``, with a tool that raises (a pack's bug: a step returns a refusal as an error observation
    and never raises) as a ``ToolFault`` line naming the tool, the file and line, and the error."""
    try:
        return episode.step(name, arguments, requestor)
    except Exception as exc:
        raise ToolFault(f"{fault_line(exc)} (a tool returns a refusal as an error observation and never raises: "
                        "fix the tool)") from exc
