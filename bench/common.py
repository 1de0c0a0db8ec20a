"""What every benchmark shares: an isolated HOME and git identity, throw-away repositories, medians.

Importing this module isolates the process: HOME becomes a temp dir with a minimal
.gitconfig, the system git config is ignored, and the git identity is pinned, so
neither ralph nor the bare-git baselines read or write the user's configuration.
It also makes the ralph measured run as a user's does: from its bytecode (`as_installed`).
"""

from __future__ import annotations

import atexit
import compileall
import importlib.util
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "Bench Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Bench Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
}
# The agent that does the least a lap must do to be green: edit a file and tick one item.
TICK_ONE = "sed -i '0,/- \\[ \\]/s//- [x]/' TODO.md && echo $RALPH_LAP >> work.txt"


def isolate() -> Path:
    """A fresh HOME and a pinned identity for this process and everything it starts."""
    home = Path(tempfile.mkdtemp(prefix="ralph-bench-home-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[user]\n\tname = Bench\n\temail = bench@example.com\n"
    )
    os.environ.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", **IDENTITY)
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(name, None)
    return home


def as_installed(checkout: Path) -> None:
    """The ralph package in `checkout` run from its bytecode, as a user's is: pip compiles a
    wheel's at install, and an editable install writes it at its first import. Some machines set
    PYTHONDONTWRITEBYTECODE (this VM does); every ralph process then compiled its 140 modules
    from source again, about 0.2 s, and whole-process figures measured that."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    compileall.compile_dir(checkout / "ralph", quiet=1)


def measured_checkout() -> Path:
    """The checkout whose ralph this process imports: the first on PYTHONPATH (bench/paired.py puts
    each side's there), else this one's."""
    spec = importlib.util.find_spec("ralph")
    assert spec is not None and spec.origin is not None, "no ralph package to measure"
    return Path(spec.origin).resolve().parents[1]


isolate()
as_installed(measured_checkout())


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def make_repo(path: Path, config: str, items: int, files: dict[str, str] | None = None, filler: int = 0) -> Path:
    """A repository with ralph.yaml, a TODO of `items` open items, `files`, and `filler` small files."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "ralph.yaml").write_text(config)
    (path / "TODO.md").write_text("".join(f"- [ ] Item {n:04d}\n" for n in range(1, items + 1)))
    (path / "PROGRESS.md").write_text("")
    for name, text in (files or {}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    for n in range(filler):  # 100 files a folder, as real trees are spread out
        folder = path / "src" / f"d{n // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n:05d}.py").write_text(f"VALUE_{n} = {n}\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "start")
    return path


def ralph_yaml(agent: str, max_laps: int = 1000) -> str:
    """A ralph.yaml with the check `true` and stagnation out of the way; `agent` is a YAML mapping."""
    return (
        f'goal: "Benchmark: tick one item a lap"\nagent: {agent}\nchecks: ["true"]\n'
        f"limits: {{max_laps: {max_laps}, stagnation: 1000}}\n"
    )


def command_agent(command: str = TICK_ONE) -> str:
    quoted = command.replace("\\", "\\\\").replace('"', '\\"')
    return f'{{kind: command, command: "{quoted}"}}'


def openai_agent(base_url: str) -> str:
    return f'{{kind: openai, model: scripted, base_url: "{base_url}"}}'


def timed(function, *args, **kwargs) -> tuple[float, object]:
    started = time.perf_counter()
    result = function(*args, **kwargs)
    return time.perf_counter() - started, result


def median(values) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def table(columns: list[str], rows: list[list]) -> str:
    """A GitHub-markdown table, numbers to three significant figures."""

    def cell(value) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)
