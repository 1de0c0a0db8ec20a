"""How ralph writes names for git and reads git's back: config values quoted, exclude patterns
escaped so each names one path, and paths git printed C-quoted (core.quotePath) made file names
again, byte for byte."""

from __future__ import annotations

import os


def quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def patterns(paths: tuple[str, ...]) -> list[str]:
    """Exclude patterns for exactly these paths: anchored, every pattern character escaped."""
    return ["/" + "".join("\\" + char if char in "*?[]\\!# " else char for char in path) for path in paths]


def excluded(paths: tuple[str, ...]) -> list[str]:
    """`git clean` options that spare these paths."""
    return [option for pattern in patterns(paths) for option in ("-e", pattern)]


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquoted(name: str) -> str:
    """A path as git prints it with core.quotePath (C-quoted, bytes as octal escapes), as the
    file system's name (undecodable bytes kept as Python keeps them: surrogate escapes)."""
    if not (len(name) > 1 and name.startswith('"') and name.endswith('"')):
        return name
    body, raw, index = name[1:-1], bytearray(), 0
    while index < len(body):
        if body[index] == "\\" and index + 1 < len(body):
            if body[index + 1] in "01234567":
                raw.append(int(body[index + 1 : index + 4], 8))
                index += 4
            else:
                raw.append(_ESCAPES.get(body[index + 1], ord(body[index + 1])))
                index += 2
        else:
            raw += body[index].encode()
            index += 1
    return os.fsdecode(bytes(raw))
