"""Real git repositories in temp dirs, built the way each test needs them: one builder for all."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from ralph.isolation.sandbox import why_unavailable

PY = sys.executable

# Tests of the sandbox itself need bubblewrap (.ci/run installs it); elsewhere they are skipped
# and the rest of the suite runs laps with `sandbox: auto`, which then means unsandboxed.
needs_bwrap = pytest.mark.skipif(why_unavailable() is not None, reason=f"no sandbox here: {why_unavailable()}")
SANDBOX_MODES = ["off", pytest.param("auto", marks=needs_bwrap)]

# Commits made in tests have a known author and committer (conftest's isolated_home pins them).
IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def make_repo(
    path: Path,
    files: Mapping[str, str] | None = None,
    *,
    config: Mapping[str, object] | None = None,
    todo: Iterable[str] | None = None,
    progress: str | None = None,
) -> Path:
    """A repository with one commit holding `files` (dedented), plus what a ralph run reads when
    given: `config` as ralph.yaml (JSON is YAML), `todo` as TODO.md's open items, `progress` as
    PROGRESS.md. Files given by name win over those, so a test can write them verbatim."""
    ralph_files: dict[str, str] = {}
    if config is not None:
        ralph_files["ralph.yaml"] = json.dumps(config)
    if todo is not None:
        ralph_files["TODO.md"] = "".join(f"- [ ] {item}\n" for item in todo)
    if progress is not None:
        ralph_files["PROGRESS.md"] = progress
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    write(path, {**ralph_files, **(files or {})})
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))


def python_agent(script: Path, source: str) -> dict[str, str]:
    """ralph.yaml's `agent` section for a command agent that is the Python script `source`, saved
    at `script` (outside the repository, so the lap cannot see or change it)."""
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(source)
    return {"kind": "command", "command": f"{PY} {script}"}
