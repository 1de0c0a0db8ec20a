"""The built-in agent's tools: a shell, a file viewer/editor confined to the workspace, and `finish`.

Every problem becomes the tool's result text for the model (`Tools.run` never raises):
a model learns from "old_str occurs 2 times (lines 3, 9)", not from a dead lap.
`finish` is only declared here; ending the lap is the agent loop's business.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from ralph.isolation import proc
from ralph.isolation.jail import Jail

BASH_TIMEOUT = 120  # seconds, when the model names none
BASH_OUTPUT_CAP = 16 * 1024  # bytes of output the model sees: head and tail, the middle cut
VIEW_MAX_LINES = 400
VIEW_MAX_BYTES = 20 * 1024
LINE_MAX_CHARS = 2000  # one minified line must not fill the whole view
BINARY_SNIFF = 8192  # bytes searched for a NUL, as git does
FILE_MAX_BYTES = 10 * 1024 * 1024  # bigger files are read with bash (head, sed -n, grep)
SNIPPET_CONTEXT = 4  # lines shown around an edit
# The tool is called bash and models write bash; plain sh (dash) would reject `[[`, `pipefail`, …
BASH = shutil.which("bash")


def function_schema(name: str, description: str, properties: dict, required: list[str]) -> dict:
    """A tool as the chat completions API declares one."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


TOOL_SCHEMAS = [
    function_schema(
        "bash",
        "Run a bash command in the worktree (your current directory). You get its output "
        "(stdout and stderr, the middle cut beyond 16 KiB) and exit code. Non-interactive: stdin is "
        "empty and there is no pager.",
        {
            "command": {"type": "string"},
            "timeout": {"type": "integer", "description": f"Seconds, default {BASH_TIMEOUT}."},
        },
        ["command"],
    ),
    function_schema(
        "str_replace_based_edit_tool",
        "View, create and edit files; paths are relative to the "
        "worktree. view: a file with line numbers (view_range [start, end], end -1 for the end of the "
        "file) or a directory listing. create: write file_text (overwrites). str_replace: replace "
        "old_str, which must occur exactly once, with new_str. insert: insert new_str after line "
        "insert_line (0 for the top).",
        {
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"]},
            "path": {"type": "string"},
            "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
            "file_text": {"type": "string"},
            "old_str": {"type": "string"},
            "new_str": {"type": "string"},
            "insert_line": {"type": "integer"},
        },
        ["command", "path"],
    ),
    function_schema(
        "finish",
        "End your lap. summary: what you did and what is left, for the next lap. status: "
        "done, or blocked when you could not make progress.",
        {"summary": {"type": "string"}, "status": {"type": "string", "enum": ["done", "blocked"]}},
        ["summary", "status"],
    ),
]
TOOL_NAMES = tuple(schema["function"]["name"] for schema in TOOL_SCHEMAS)


class ToolError(Exception):
    """A refusal or failure, shown to the model as the tool's result."""


class Tools:
    """The tools of one lap, bound to its workspace, logs, environment and deadline."""

    def __init__(self, workspace: Path, log_dir: Path, env: dict[str, str], deadline: float, jail: Jail | None = None):
        self.workspace = workspace
        self.jail = jail  # the sandbox bash runs in, when laps are sandboxed
        self.root = workspace.resolve()
        self.log_dir = log_dir
        # stdin is /dev/null, so anything that opens a pager or an editor must not wait for a human
        self.env = dict(env, PAGER="cat", GIT_PAGER="cat", GIT_EDITOR="true")
        self.deadline = deadline  # time.monotonic() at which the lap's time is up
        self.bash_calls = 0

    def run(self, name: str, arguments: dict) -> str:
        try:
            if name == "bash":
                return self.bash(arguments)
            if name == "str_replace_based_edit_tool":
                return self.edit(arguments)
            raise ToolError(f"no tool named {name!r}")
        except ToolError as exc:
            return f"error: {exc}"
        except Exception as exc:  # an unreadable file or a full disk must not end the lap
            return f"error: {type(exc).__name__}: {exc}"

    def bash(self, arguments: dict) -> str:
        command = _string(arguments, "command")
        requested = _number(arguments.get("timeout", BASH_TIMEOUT), "timeout")
        remaining = self.deadline - time.monotonic()
        if remaining < 1:
            raise ToolError("the lap's time is up; call finish now")
        limit = min(requested, remaining)
        self.bash_calls += 1
        spill = self.log_dir / f"bash-{self.bash_calls}.out"
        done = proc.run(
            [BASH, "-c", command] if BASH else command,
            self.workspace,
            env=self.env,
            timeout=limit,
            cap=BASH_OUTPUT_CAP,
            spill=spill,
            jail=self.jail,
        )
        if not done.cut_bytes:
            spill.unlink(missing_ok=True)  # the whole output is in the transcript already
        status = f"[exit code {done.exit_code}]"
        if done.timed_out:
            status = (
                f"[timed out after {limit:g}s; the command and its children were killed; exit code {done.exit_code}]"
            )
        output = done.output.rstrip("\n")
        return f"{output}\n{status}" if output.strip() else f"(no output) {status}"

    def edit(self, arguments: dict) -> str:
        command, path_text = _string(arguments, "command"), _string(arguments, "path")
        path = self.resolve(path_text)
        if command == "view":
            return self.view(path, arguments.get("view_range"))
        if command == "create":
            return self.create(path, _string(arguments, "file_text", allow_empty=True))
        if command == "str_replace":
            return self.str_replace(
                path, _string(arguments, "old_str"), _string(arguments, "new_str", allow_empty=True, default="")
            )
        if command == "insert":
            return self.insert(path, arguments.get("insert_line"), _string(arguments, "new_str", allow_empty=True))
        raise ToolError(f"unknown command {command!r}; use view, create, str_replace or insert")

    def resolve(self, path_text: str) -> Path:
        """The real path (symlinks followed), refused unless it is in the workspace and not in .git."""
        given = Path(path_text)
        try:
            resolved = (given if given.is_absolute() else self.root / given).resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop
            raise ToolError(f"{path_text}: cannot resolve it ({exc})") from None
        if resolved != self.root and self.root not in resolved.parents:
            raise ToolError(f"{path_text}: outside the worktree {self.root}; use a path inside it")
        # Only the part below the workspace: whatever lies above it is not the lap's business.
        if any(part.lower() == ".git" for part in resolved.relative_to(self.root).parts):
            raise ToolError(f"{path_text}: inside .git; ralph manages git, so edit the project's files only")
        return resolved

    def shown(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path != self.root else "."

    def view(self, path: Path, view_range: object) -> str:
        if path.is_dir():
            return self.listing(path)
        lines = _read_text(path, self.shown(path), strict=False).splitlines()
        if not lines:
            return f"{self.shown(path)}: empty file"
        start, end = view_bounds(view_range, len(lines))
        return numbered(lines, start, end)

    def listing(self, folder: Path) -> str:
        entries = self._entries(folder, depth=2)
        if len(entries) > VIEW_MAX_LINES:
            more = len(entries) - VIEW_MAX_LINES
            entries = entries[:VIEW_MAX_LINES] + [f"[... {more} more entries; use bash (find, ls) to look deeper]"]
        return "\n".join(entries) or f"{self.shown(folder)}: empty directory"

    def _entries(self, folder: Path, depth: int) -> list[str]:
        entries = []
        for child in sorted(folder.iterdir()):
            if child.name == ".git":
                continue
            is_folder = child.is_dir() and not child.is_symlink()
            entries.append(str(child.relative_to(self.root)) + ("/" if is_folder else ""))
            if is_folder and depth > 1:
                entries += self._entries(child, depth - 1)
        return entries

    def create(self, path: Path, file_text: str) -> str:
        if path.is_dir():
            raise ToolError(f"{self.shown(path)}: is a directory")
        existed = path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(file_text.encode("utf-8"))  # bytes: no newline translation
        verb = "overwrote" if existed else "created"
        return f"{verb} {self.shown(path)} ({len(file_text.splitlines())} lines)"

    def str_replace(self, path: Path, old: str, new: str) -> str:
        shown = self.shown(path)
        if old == new:
            raise ToolError("old_str and new_str are the same; nothing would change")
        text = _read_text(path, shown)
        found = _match_lines(text, old)
        if not found:
            raise ToolError(
                f"old_str not found in {shown}; view the file and copy the text exactly, "
                "whitespace and indentation included"
            )
        if len(found) > 1:
            raise ToolError(
                f"old_str occurs {len(found)} times in {shown} (lines {', '.join(map(str, found))}); "
                "include more of the surrounding lines so that it occurs once"
            )
        text = text.replace(old, new, 1)
        path.write_bytes(text.encode("utf-8"))
        first = found[0]
        return f"edited {shown}:\n" + _snippet(text, first, first + new.count("\n"))

    def insert(self, path: Path, insert_line: object, new: str) -> str:
        shown = self.shown(path)
        lines = _read_text(path, shown).splitlines(keepends=True)
        after = _integer(insert_line, "insert_line")
        if not 0 <= after <= len(lines):
            raise ToolError(f"insert_line must be between 0 (the top) and {len(lines)} (the end of {shown})")
        if after and not lines[after - 1].endswith("\n"):
            lines[after - 1] += "\n"
        block = new if new.endswith("\n") else new + "\n"
        lines.insert(after, block)
        text = "".join(lines)
        path.write_bytes(text.encode("utf-8"))
        return f"inserted into {shown}:\n" + _snippet(text, after + 1, after + block.count("\n"))


def _string(arguments: dict, name: str, *, allow_empty: bool = False, default: str | None = None) -> str:
    value = arguments.get(name, default)
    if not isinstance(value, str) or not (value or allow_empty):
        raise ToolError(f"`{name}` is required and must be a {'' if allow_empty else 'non-empty '}string")
    return value


def _integer(value: object, name: str) -> int:
    """An integer, also when a model sends it as a string ("12")."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise ToolError(f"`{name}` must be an integer")


def _number(value: object, name: str) -> float:
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = 0.0
    if isinstance(value, bool) or not seconds > 0:
        raise ToolError(f"`{name}` must be a positive number of seconds")
    return seconds


def _read_text(path: Path, shown: str, *, strict: bool = True) -> str:
    if path.is_dir():
        raise ToolError(f"{shown}: is a directory")
    if not path.is_file():
        raise ToolError(f"{shown}: no such file (create it with command create)")
    if path.stat().st_size > FILE_MAX_BYTES:
        raise ToolError(f"{shown}: over {FILE_MAX_BYTES // 2**20} MiB; use bash (head, sed -n, grep) on it")
    data = path.read_bytes()  # bytes, so CRLF files keep their line endings when edited
    if b"\0" in data[:BINARY_SNIFF]:
        raise ToolError(f"{shown}: a binary file; use bash to inspect it")
    try:
        return data.decode("utf-8", "strict" if strict else "replace")
    except UnicodeDecodeError:
        raise ToolError(f"{shown}: not UTF-8 text; edit it with bash") from None


def view_bounds(view_range: object, line_count: int) -> tuple[int, int]:
    if view_range is None:
        return 1, line_count
    if not (isinstance(view_range, list) and len(view_range) == 2):
        raise ToolError("view_range must be [start, end] (end -1 for the end of the file)")
    start, end = (_integer(bound, "view_range") for bound in view_range)
    end = line_count if end == -1 else min(end, line_count)
    if not 1 <= start <= end:
        raise ToolError(f"view_range {view_range} does not fit a file of {line_count} lines")
    return start, end


def numbered(lines: list[str], start: int, end: int) -> str:
    """cat -n style lines start..end (1-based), cut to VIEW_MAX_LINES / VIEW_MAX_BYTES with a hint."""
    shown: list[str] = []
    size = 0
    for number in range(start, end + 1):
        line = lines[number - 1]
        if len(line) > LINE_MAX_CHARS:
            line = line[:LINE_MAX_CHARS] + f" [... {len(line) - LINE_MAX_CHARS} more characters]"
        entry = f"{number:6}\t{line}"
        if len(shown) == VIEW_MAX_LINES or size + len(entry) > VIEW_MAX_BYTES:
            shown.append(
                f"[... cut at line {number - 1} of {len(lines)}; use view_range "
                f"[{number}, {min(end, number + VIEW_MAX_LINES - 1)}] or grep -n to see the rest]"
            )
            break
        shown.append(entry)
        size += len(entry) + 1
    return "\n".join(shown)


def _snippet(text: str, first: int, last: int) -> str:
    """The changed lines first..last with a few lines of context, numbered."""
    lines = text.splitlines() or [""]
    return numbered(lines, max(1, first - SNIPPET_CONTEXT), min(len(lines), max(first, last) + SNIPPET_CONTEXT))


def _match_lines(text: str, old: str) -> list[int]:
    """The line number where each non-overlapping occurrence of `old` starts."""
    lines, at = [], text.find(old)
    while at != -1:
        lines.append(text.count("\n", 0, at) + 1)
        at = text.find(old, at + len(old))
    return lines
