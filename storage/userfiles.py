"""Files the user names (a config, a space, `.env`), read with one-line errors; without pydantic.

Every command loads `.env` at start-up (flows/cli_app.py), so this module imports only what that needs:
`evosyn query` starts without the run configuration's models (evosyn.config).
"""
from __future__ import annotations

import os
from pathlib import Path


class ConfigError(ValueError):
    """A one-line, user-facing configuration error."""


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
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{head}: cannot read it ({exc.strerror}; check its permissions)") from None
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
