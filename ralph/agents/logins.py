"""An agent CLI's login, for a sandboxed lap: a copy of the tool's login file alone, made in the
phase's private HOME at the phase's start and thrown away with it.

Nothing of it goes back to the user's HOME: the lap's copy is the lap's. So a tool that refreshes
its token during a lap keeps the new one there, and the user's own file stays as it was. Where
the provider rotates refresh tokens (each is good for one use), a lap that refreshed with the
user's would leave the user's file holding a spent one — logged out. Those tools' copies are
made without their refresh token: the lap runs on the access token it has, and when that has
expired the lap fails saying so, and the tool's long-lived variable (presets.Preset.login) is
the way to go.

A settings file is never copied whole (it holds hooks and MCP servers that would run in the
lap): where a tool needs one of its settings to know how it logs in, only that setting is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 1 << 20  # a login file is small; a bigger one is no login of a tool's


@dataclass(frozen=True)
class LoginFile:
    path: str  # where the tool looks, relative to HOME
    moved: tuple[str, str] | None = None  # a variable that moves it, and its path under the variable's folder
    without: tuple[str, ...] = ()  # keys left out of the copy, at any depth: single-use refresh tokens
    only: tuple[str, ...] = ()  # dotted keys the copy keeps, and nothing else: a setting of a settings file

    def source(self, env: Mapping[str, str]) -> Path | None:
        """The user's file, where the tool would read it."""
        if self.moved and env.get(self.moved[0]):
            return Path(env[self.moved[0]]).expanduser() / self.moved[1]
        return Path(env["HOME"]) / self.path if env.get("HOME") else None

    def inside(self, home: Path) -> Path:
        """Where the copy goes in the phase's HOME (a moved folder's variable is not passed: HOME's default)."""
        return home / self.path


def present(files: tuple[LoginFile, ...], env: Mapping[str, str]) -> list[Path]:
    """The user's login files that are there."""
    return [path for file in files if (path := file.source(env)) is not None and path.is_file()]


def copy_into(home: Path, files: tuple[LoginFile, ...], env: Mapping[str, str]) -> list[Path]:
    """Copies of the user's login files in the phase's private `home`, readable by the lap's user
    alone; what was copied. A file that is not there, is too big, or (for a file read in part) is
    not JSON is not copied: the tool then says it is not logged in."""
    copied = []
    for file in files:
        source = file.source(env)
        try:
            if source is None or not source.is_file() or source.stat().st_size > MAX_BYTES:
                continue
            data = source.read_bytes()
        except OSError:
            continue
        if file.without or file.only:
            kept = _kept(data, file)
            if kept is None:
                continue
            data = kept
        target = file.inside(home)
        target.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "wb") as copy:
            copy.write(data)
        copied.append(target)
    return copied


def remove(copied: list[Path]) -> None:
    """The copies, once the phase is over: its HOME stays in the workspace, which the checks read."""
    for path in copied:
        path.unlink(missing_ok=True)


def _kept(data: bytes, file: LoginFile) -> bytes | None:
    try:
        found = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if file.only:
        found = _only(found, file.only)
    return json.dumps(_without(found, set(file.without)), indent=2).encode()


def _without(value: object, names: set[str]) -> object:
    if isinstance(value, dict):
        return {key: _without(item, names) for key, item in value.items() if key not in names}
    if isinstance(value, list):
        return [_without(item, names) for item in value]
    return value


def _only(found: object, dotted: tuple[str, ...]) -> dict:
    """Just the values at the dotted keys, in their places."""
    kept: dict = {}
    for path in dotted:
        *parents, last = path.split(".")
        value, target = found, kept
        for key in parents:
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, dict) or last not in value:
            continue
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value[last]
    return kept
