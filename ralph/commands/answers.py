"""`ralph status`, `log` and `show` answered from what the same command printed last, when nothing it
printed from could have changed since (issue 41: 0.2 s, of which Python and click take half, and
pydantic or GitPython more than the rest).

One reader of the records: an answer is the text the command itself printed, never a second reading
of the records. It is kept under a key (sha256) of the text and of everything it is a function of:

- ralph's code: its version, its sources' sizes and times (an editable install changes without a new
  version), Python's version, the names of the installed packages (their versions: rich draws it);
- the question: the command, its arguments and flags, as click parsed them;
- where it is printed: a terminal or not, its size, stdout's encoding, the variables rich reads and
  the locale's (git's diffstat speaks its language);
- the state as the command reads it: the repository's common git dir, one `git for-each-ref` of the
  refs ralph reads (every run's, their green lines, the notes, refs/replace/), git's configuration as
  git lists it (a diffstat follows diff.* settings), and the files a command reads beside git
  (ralph/show/read_beside.py: a lap's transcript and output log).

Never kept, never used: a run under way (a claim, a started lap or a worker in the listing: what
status says then is of the moment, "beat 3s ago"), `--remote`, a variable that points git at another
repository (`git rev-parse --local-env-vars`: a hook's GIT_DIR, which the command sets apart),
anything written to stderr, an exit other than 0. Any doubt (no file, bad JSON, another key) is the
command itself, silently.

The answers are files in <git-common-dir>/ralph/.answers/ (layout.answers_dir), out of every lap's
reach: laps see the repository's git dir read-only (ralph/isolation/jail.py; run/loop.py refuses a
`sandbox.writable` inside it). The command that read the records writes its answer (the key's state
read before and after it: a lap that lands meanwhile leaves none), and `ralph run` does at its end
(`after_run`, status only), so the first `ralph status` after a run is answered at once too.

The standard library only, git by subprocess (a few reads, no input): ralph's door to git and to
processes (ralph/git, isolation/proc.py) costs as much to import as a whole answer.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO

import ralph
from ralph.show.read_beside import Noted, noting, stat


def _alone(path: str) -> ModuleType:
    """ralph's module at `path` run by itself, not as part of its package: ralph/git/layout.py (names
    only) imported as ralph.git.layout would first run ralph/git/__init__.py, the door to git and to
    processes, which takes 0.1 s to import: an answer's whole time."""
    spec = importlib.util.spec_from_file_location(
        f"ralph.commands.answers.{Path(path).stem}", Path(ralph.__file__).parent / path
    )
    assert spec is not None and spec.loader is not None
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:
    from ralph.git import layout
else:
    layout = _alone("git/layout.py")

FORMAT = 1  # of an answer's file; a key of another format never matches
READ_REFS = (layout.RUNS, layout.BRANCHES, layout.NOTES, "refs/replace/")  # the refs status, log and show read
KEPT = 64  # answers kept (questions × terminals); the oldest go first
# What rich's Console reads of the environment (rich/console.py; a test holds the list to it), and the
# locale's variables, which git's messages follow.
PRINTING = ("TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES")
PRINTING_TOO = ("JUPYTER_COLUMNS", "JUPYTER_LINES", "LANG", "LANGUAGE")
Question = list[str | int | bool | None]


def status(cwd: Path, run: str | None, *, as_json: bool, remote: str | None = None) -> int:
    def ask() -> int:
        from ralph.commands.status import status as asked

        return asked(cwd, run, as_json=as_json, remote=remote)

    return ask() if remote is not None else answer(cwd, ["status", run, as_json], ask)


def log(cwd: Path, run: str | None, *, as_json: bool) -> int:
    def ask() -> int:
        from ralph.commands.log import log as asked

        return asked(cwd, run, as_json=as_json)

    return answer(cwd, ["log", run, as_json], ask)


def show(cwd: Path, lap: int, run: str | None, *, as_json: bool) -> int:
    def ask() -> int:
        from ralph.commands.show import show as asked

        return asked(cwd, lap, run, as_json=as_json)

    return answer(cwd, ["show", lap, run, as_json], ask)


def answer(cwd: Path, question: Question, ask: Callable[[], int]) -> int:
    """The kept answer to `question` when its key still holds; else `ask()`, its answer kept."""
    place = _place(cwd, question)
    if place is not None and (text := place.kept()) is not None:
        sys.stdout.write(text)
        return 0
    return ask() if place is None else _asked(place, ask, show=True)


def after_run(cwd: Path) -> None:
    """`ralph status` of the latest run, as text, kept for this terminal at a run's end (50 ms;
    after every lap it would be a lap's own time again). Printed nowhere; any failure is only no
    answer kept. Not `ralph log`: the run has just printed its table, and rendering it again took
    longer than all the rest of the run's end (80 ms of a parallel run's last 150)."""
    from ralph.commands.status import status as asked_status
    from ralph.show import ui

    place = _place(cwd, ["status", None, False])
    if place is None or place.kept() is not None:
        return
    with ui.using(ui.new_console(), ui.new_console(stderr=True)):  # as a new process's, not the run's --plain
        try:
            _asked(place, lambda: asked_status(cwd, None, as_json=False), show=False)
        except Exception:  # no answer kept is all that is lost: `ralph status` will say what it is
            return


def _asked(place: _Place, ask: Callable[[], int], *, show: bool) -> int:
    """The command itself, what it printed kept at `place` when it may be (`show`: printed too)."""
    with _recording(show=show) as said, noting() as watched:
        code = ask()
    place.keep(said, watched, code)
    return code


# --- what it printed ----------------------------------------------------------------------------------


class _Tee:
    """sys.stdout or sys.stderr, with what is written kept too (`show`: and written on, else not):
    isatty, encoding, fileno are the stream's, so rich prints here as it would there."""

    def __init__(self, stream: TextIO, *, show: bool):
        self.stream, self.show, self.parts = stream, show, list[str]()

    def write(self, text: str) -> int:
        self.parts.append(text)
        return self.stream.write(text) if self.show else len(text)

    def flush(self) -> None:
        if self.show:
            self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class _Said:
    """What a command printed on stdout and on stderr."""

    def __init__(self, *, show: bool):
        self.out, self.err = _Tee(sys.stdout, show=show), _Tee(sys.stderr, show=show)

    @property
    def text(self) -> str:
        return "".join(self.out.parts)


@contextmanager
def _recording(*, show: bool) -> Iterator[_Said]:
    before = sys.stdout, sys.stderr
    said = _Said(show=show)
    sys.stdout, sys.stderr = said.out, said.err
    try:
        yield said
    finally:
        sys.stdout, sys.stderr = before


# --- where an answer is kept, and its key -------------------------------------------------------------


class _Place:
    """Where the answer to a question is kept, and the state it is read from: `read` (the refs and the
    config), and with them what the key holds besides the files watched."""

    def __init__(self, cwd: Path, file: Path, state: list[Any], read: list[str | None]):
        self.cwd, self.file, self.read = cwd, file, read
        self.state = [*state, *read]

    def kept(self) -> str | None:
        """The answer kept here, when its key is this state's; None at any doubt."""
        try:
            stored = json.loads(_regular_text(self.file))
            watched = [(str(path), stat(str(path))) for path in stored["watched"]]
            if isinstance(stored["text"], str) and stored["key"] == _key(self.state, watched, stored["text"]):
                return stored["text"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def keep(self, said: _Said, watched: Noted, code: int) -> None:
        """What the command printed, kept when it ended well, said nothing on stderr, and read a
        state that did not move while it read (the same refs, config and files after as before)."""
        if code != 0 or said.err.parts or any(stat(path) != then for path, then in watched):
            return
        try:
            if _read(self.cwd) != self.read:
                return
            key = _key(self.state, watched, said.text)
            _write(self.file, json.dumps({"key": key, "watched": [path for path, _ in watched], "text": said.text}))
        except (OSError, subprocess.SubprocessError, UnicodeDecodeError):  # a repository ralph may not write
            pass


def _place(cwd: Path, question: Question) -> _Place | None:
    """Where the answer to `question` is kept, and the state it must have been read from; None when
    no answer may be kept or used: not what find_repo calls a repository, a variable that points git
    elsewhere (the command sets those apart: a hook's GIT_DIR), a run under way."""
    asked = ["--is-bare-repository", "--show-toplevel", "--git-common-dir", "HEAD", "--symbolic-full-name", "HEAD"]
    try:
        said = _git(cwd, "rev-parse", *asked, "--local-env-vars")
        lines = said.decode().splitlines() if said is not None else []
        if len(lines) < 5 or lines[0] != "false" or any(name in os.environ for name in lines[5:]):
            return None
        common, read = str(Path(cwd, lines[2]).resolve()), _read(cwd)
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        return None
    if read is None:
        return None
    printing = _printing()
    name = hashlib.sha256(json.dumps([question, printing]).encode()).hexdigest()[:32]
    file = layout.answers_dir(Path(common)) / f"{name}.json"
    return _Place(cwd, file, [FORMAT, _code(), question, printing, common], read)


def _read(cwd: Path) -> list[str | None] | None:
    """[the listing of the refs ralph reads, git's config hashed], as git says them; None for a run
    under way (or a listing git could not give)."""
    listing = _git(cwd, "for-each-ref", "--format=%(refname) %(objectname)", *READ_REFS)
    if listing is None or any(_live(line) for line in listing.decode().splitlines()):
        return None
    config = _git(cwd, "config", "--list", "--show-origin", "-z")  # none at all: git says nothing, exit 1
    return [listing.decode(), hashlib.sha256(config).hexdigest() if config is not None else None]


def _live(line: str) -> bool:
    """A ref of a run at work: its claims, its started laps, its workers."""
    ref = line.split(" ", 1)[0]
    names = layout.RunRefs(ref.removeprefix(layout.RUNS).split("/", 1)[0])
    return ref.startswith(layout.RUNS) and ref.startswith((names.claims, names.started, names.workers))


def _git(cwd: Path, *args: str) -> bytes | None:
    """git's standard output, None when it fails."""
    env = os.environ | {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, env=env, timeout=30, check=False)
    return done.stdout if done.returncode == 0 else None


def _printing() -> list[Any]:
    """Where the answer goes, as rich and git see it."""
    out = sys.stdout
    size = None
    for descriptor in (0, 1, 2):  # rich asks in this order
        try:
            size = list(os.get_terminal_size(descriptor))
            break
        except (OSError, ValueError):
            continue
    try:
        terminal = out.isatty()
    except ValueError:
        terminal = False
    names = (*PRINTING, *PRINTING_TOO)
    env = sorted((name, value) for name, value in os.environ.items() if name in names or name.startswith("LC_"))
    return [terminal, getattr(out, "encoding", None), getattr(out, "errors", None), size, env]


def _code() -> list[Any]:
    """ralph as it is installed and Python and the packages beside it."""
    package = Path(ralph.__file__).parent
    sources = []
    for folder, folders, names in os.walk(package):
        folders[:] = sorted(name for name in folders if name != "__pycache__")
        sources += [(os.path.join(folder, name), stat(os.path.join(folder, name))) for name in sorted(names)]
    installed = [
        sorted(os.listdir(entry))
        for entry in sys.path
        if entry.endswith(("site-packages", "dist-packages")) and os.path.isdir(entry)
    ]
    return [ralph.__version__, sys.version, sources, installed]


def _key(state: list[Any], watched: Noted, text: str) -> str:
    """The state read, and the text printed from it: a text cut or changed in the file is no answer."""
    return hashlib.sha256(json.dumps([state, watched, text]).encode()).hexdigest()


def _regular_text(file: Path) -> str:
    """The file's text when it is a regular file itself: not a link (to anywhere), not a FIFO whose
    read would wait for ever (an unsandboxed lap can write the git dir); else OSError."""
    descriptor = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as opened:
        if not S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{file} is no regular file")
        return opened.read().decode("utf-8")


def _write(file: Path, text: str) -> None:
    """Written whole or not at all (a file beside it, renamed over it); the oldest beyond KEPT go.
    Only in a folder of its own: a link in its place (to a folder of the user's, where the oldest
    files would go) keeps no answer (OSError)."""
    import tempfile  # only when an answer is written

    file.parent.mkdir(parents=True, exist_ok=True)
    if not S_ISDIR(os.lstat(file.parent).st_mode):
        raise OSError(f"{file.parent} is no folder of ralph's")
    handle, temporary = tempfile.mkstemp(dir=file.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as written:
            written.write(text)
        os.replace(temporary, file)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    answers = sorted(file.parent.glob("*.json"), key=lambda path: (stat(str(path)) or [0, 0, 0])[2])
    for old in answers[:-KEPT]:
        old.unlink(missing_ok=True)
