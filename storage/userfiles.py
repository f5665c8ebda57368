"""Files the user names (a config, a space, `.env`, a task or trajectory to verify), read with one-line errors;
without pydantic.

Every command loads `.env` at start-up (flows/cli_app.py), so this module imports only what that needs:
`evosyn query` starts without the run configuration's models (evosyn.config).

A user's file is refused, with one line naming it and the fix, when it is larger than ``EVOSYN_MAX_INPUT_MB``
megabytes (default 64: before a byte of it is read), not UTF-8, JSON nested more than ``MAX_JSON_DEPTH`` levels, an
integer longer than Python converts, NaN or Infinity, or a key written twice (JSON and YAML alike: the last one would
win silently).
"""
from __future__ import annotations

import json
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

MAX_INPUT_MB_ENV = "EVOSYN_MAX_INPUT_MB"
MAX_INPUT_MB = 64.0  # a config is a few KB, a task or a conversation under 1 MB; 64 MB still parses in seconds
MAX_JSON_DEPTH = 100  # a tau2 task or a conversation nests under 10 levels; json's own parser recurses
MAX_INT_DIGITS = 4300  # Python's own bound on converting text to int (sys.get_int_max_str_digits' default)


class ConfigError(ValueError):
    """A one-line, user-facing configuration error."""


def max_input_bytes() -> int:
    """The size limit of a file the user names: ``EVOSYN_MAX_INPUT_MB`` megabytes (10**6 bytes), default 64."""
    text = os.environ.get(MAX_INPUT_MB_ENV, "").strip()
    if not text:
        return int(MAX_INPUT_MB * 10**6)
    try:
        limit = float(text)
    except ValueError:
        limit = math.nan
    if not (math.isfinite(limit) and limit > 0):
        raise ConfigError(f"{MAX_INPUT_MB_ENV}={text}: not a number of megabytes (e.g. {MAX_INPUT_MB_ENV}=256)")
    return max(1, int(limit * 10**6))


def _size(n: int) -> str:
    return f"{n / 10**6:.1f} MB" if n >= 10**6 else f"{n / 10**3:.1f} KB" if n >= 10**3 else f"{n} bytes"


def _too_large(head: str, size: int, limit: int) -> ConfigError:
    return ConfigError(f"{head}: {_size(size)}, over the {limit / 10**6:g} MB limit of an input file (pass a smaller "
                       f"file, or raise the limit with {MAX_INPUT_MB_ENV}=MB)")


def read_text_file(path: str | os.PathLike[str], what: str = "config", prefix: str | None = None) -> str:
    """The UTF-8 text of a file the user named, or one ConfigError line naming the path and the fix.

    The line starts with ``prefix`` (default ``invalid <what> <path>``).
    """
    p = Path(path)
    head = prefix or f"invalid {what} {p}"
    if p.is_symlink() and not p.exists():
        raise ConfigError(f"{head}: a broken symlink (to {os.readlink(p)}); point it at a file or pass the file itself")
    if p.is_dir():
        raise ConfigError(f"{head}: a folder, not a file (pass the path of the file in it)")
    if not p.exists():
        raise ConfigError(f"{head}: no such file (check the path)")
    if not p.is_file():
        raise ConfigError(f"{head}: not a regular file (pass the path of a file)")
    limit = max_input_bytes()
    try:
        size = p.stat().st_size
        if size > limit:  # refused before it is read: a 224 MB file read whole took 2.5 GB and 79 s
            raise _too_large(head, size, limit)
        with p.open("rb") as f:
            raw = f.read(limit + 1)  # a file that grew since it was measured is still read only up to the limit
    except OSError as exc:
        raise ConfigError(f"{head}: cannot read it ({exc.strerror}; check its permissions)") from None
    if len(raw) > limit:
        raise _too_large(head, len(raw), limit)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{head}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                          "save it as UTF-8") from None


def load_dotenv_secrets(path: str | os.PathLike[str] = ".env") -> None:
    """Load API keys from a `.env` file into the environment (never overriding what is set)."""
    if Path(path).is_file():  # a bad .env is one ConfigError line (raised below), not a UnicodeDecodeError
        import io

        from dotenv import load_dotenv

        load_dotenv(stream=io.StringIO(read_text_file(path, ".env file")), override=False)


# ---------------------------------------------------------------- JSON
class _Refused(ValueError):
    """A JSON value the parser's hooks refuse, with the reason as the user reads it."""


def _no_constant(name: str):
    raise _Refused(f"{name} is not JSON (write a number or null)")


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {digits} digits (at most {MAX_INT_DIGITS}; write it as a string)")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"{text[:40]} is too large for a number")
    return value


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key[:80]!r} (keep one)")
        out[key] = value
    return out


def _deeper_than(data: Any, limit: int) -> bool:
    stack = [(data, 1)]  # by hand: walking 100 levels by recursion is what the limit is for
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def parse_json(text: str, head: str) -> Any:
    """JSON text from a user's file, or one ``ConfigError`` line starting with ``head`` (the option and path)."""
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_int=_int, parse_float=_float,
                          object_pairs_hook=_unique)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{head}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:  # json's parser recurses once a level: far past the limit
        raise ConfigError(f"{head}: nested more than {MAX_JSON_DEPTH} levels deep (flatten it)") from None
    except _Refused as exc:
        raise ConfigError(f"{head}: {exc}") from None
    if isinstance(data, (dict, list)) and text.count("[") + text.count("{") > MAX_JSON_DEPTH \
            and _deeper_than(data, MAX_JSON_DEPTH):
        raise ConfigError(f"{head}: nested more than {MAX_JSON_DEPTH} levels deep (flatten it)")
    return data


def read_json_file(path: str | os.PathLike[str], what: str = "JSON file", prefix: str | None = None) -> Any:
    """The JSON of a file the user named, or one ConfigError line (``read_text_file``'s, or ``parse_json``'s)."""
    head = prefix or f"invalid {what} {Path(path)}"
    return parse_json(read_text_file(path, what, prefix=head), head)


# ---------------------------------------------------------------- YAML
class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int):
        super().__init__(key, line)
        self.key, self.line = key, line


@lru_cache(maxsize=1)
def _unique_key_loader() -> type:
    import yaml  # here: most commands read no YAML file

    class UniqueKeyLoader(yaml.SafeLoader):
        """PyYAML's safe loader, refusing a key written twice in one mapping (it keeps the last one silently).
        A key a merge (``<<: *anchor``) brings in may be written again: that is what merging is for."""

        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: set = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=deep)
                    try:
                        if key in seen:
                            raise _DuplicateKey(key, key_node.start_mark.line + 1)
                        seen.add(key)
                    except TypeError:  # an unhashable key: the base constructor says so
                        break
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def read_yaml_file(path: str | os.PathLike[str], what: str = "config") -> Any:
    """The YAML of a file the user named (None for an empty one), or one ConfigError line: a syntax error with its
    line, a key written twice with its line, nesting too deep to parse."""
    import yaml

    p = Path(path)
    text = read_text_file(p, what)
    try:
        return yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader subclass: safe_load, duplicates refused
    except _DuplicateKey as exc:
        raise ConfigError(f"invalid {what} {p}: duplicate key {str(exc.key)[:80]!r} at line {exc.line} "
                          "(keep one)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"invalid {what} {p}: YAML syntax error{where}: {problem}") from None
    except RecursionError:
        raise ConfigError(f"invalid {what} {p}: nested too deeply to parse (flatten it)") from None
