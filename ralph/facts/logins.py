"""An agent CLI's login, for a sandboxed lap: a copy of the tool's login alone, made in the
phase's private HOME at the phase's start and removed at its end (the HOME stays in the
workspace, which the later phases read).

Nothing of it goes back to the user's HOME: the lap's copy is the lap's. So a tool that refreshes
its token during a lap keeps the new one there, and the user's own file stays as it was. Where
the provider rotates refresh tokens (each is good for one use), a lap that refreshed with the
user's would leave the user's file holding a spent one — logged out. Those tools' copies hold an
empty refresh token: the lap runs on the access token it has, and when that has expired the lap
fails saying so, and the tool's long-lived variable (presets.Preset.login) is the way to go.

Of a file that holds more than the login (claude's holds its MCP servers' tokens and plugins'
secrets; aider's config, the commands it runs), only the login's keys are copied: a settings
file is never copied whole.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 1 << 20  # a login file is small; a bigger one is no login of a tool's


@dataclass(frozen=True)
class LoginFile:
    path: str  # where the tool looks, relative to HOME
    moved: tuple[str, str] | None = None  # a variable that moves it, and its path under the variable's folder
    blank: tuple[str, ...] = ()  # keys whose values the copy holds empty, at any depth: single-use refresh tokens
    only: tuple[str, ...] = ()  # the top-level keys the copy keeps, and nothing else
    logs_in: bool = True  # False: a setting the login needs, not a login by itself (gemini's auth type)

    def source(self, env: Mapping[str, str]) -> Path | None:
        """The user's file, where the tool would read it."""
        if self.moved and env.get(self.moved[0]):
            return Path(env[self.moved[0]]).expanduser() / self.moved[1]
        return Path(env["HOME"]) / self.path if env.get("HOME") else None


def present(files: tuple[LoginFile, ...], env: Mapping[str, str]) -> list[Path]:
    """The user's login files that are there."""
    found = (file.source(env) for file in files if file.logs_in)
    return [path for path in found if path is not None and path.is_file()]


def copy_into(home: Path, files: tuple[LoginFile, ...], env: Mapping[str, str]) -> list[str]:
    """Copies of the user's login files in the phase's fresh private `home`, readable by the
    lap's user alone; the paths copied, relative to `home`. A file that is not there, is too big,
    or (for a file read in part) does not parse is not copied: the tool then says it is not
    logged in."""
    copied = []
    for file in files:
        source = file.source(env)
        try:
            if source is None or not source.is_file() or source.stat().st_size > MAX_BYTES:
                continue
            data = source.read_bytes()
        except OSError:
            continue
        if file.blank or file.only:
            kept = _kept(data, file)
            if kept is None:
                continue
            data = kept
        target = home / file.path
        target.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "wb") as copy:
            copy.write(data)
        copied.append(file.path)
    return copied


def remove(home: Path, copied: list[str]) -> None:
    """The copies, once the phase is over, whatever the lap made of them. Reached folder by folder
    without following a link: a lap that put a link to the user's own folder where the copy's was
    must not have ralph delete the user's login."""
    for relative in copied:
        *folders, name = Path(relative).parts
        try:
            at = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            for folder in folders:
                inner = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=at)
                os.close(at)
                at = inner
            os.unlink(name, dir_fd=at)  # a file or a link; a folder put there is no copy
        except OSError:
            pass
        finally:
            os.close(at)


def _kept(data: bytes, file: LoginFile) -> bytes | None:
    found = _parsed(data, yaml_file=file.path.endswith((".yml", ".yaml")))
    if not isinstance(found, dict):
        return None
    if file.only:
        found = {key: value for key, value in found.items() if key in file.only}
    return json.dumps(_blanked(found, set(file.blank)), indent=2).encode()  # JSON is YAML too


def _parsed(data: bytes, *, yaml_file: bool) -> object:
    import yaml  # here, not at the top: every ralph command imports this module (presets), few read a login

    text = data.decode("utf-8", "replace")
    try:
        return yaml.safe_load(text) if yaml_file else json.loads(_without_comments(text))
    except (ValueError, yaml.YAMLError, RecursionError):
        return None


# A JSON string, or a comment (// to the line's end, /* to */) outside one.
_JSON_PIECE = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)


def _without_comments(text: str) -> str:
    """JSON as tools read their settings (Gemini CLI strips comments first)."""
    return _JSON_PIECE.sub(lambda piece: piece.group() if piece.group().startswith('"') else "", text)


def _blanked(value: object, names: set[str]) -> object:
    if isinstance(value, dict):
        return {key: "" if key in names else _blanked(item, names) for key, item in value.items()}
    if isinstance(value, list):
        return [_blanked(item, names) for item in value]
    return value
