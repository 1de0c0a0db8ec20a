"""The repository's own git hooks run on lap commits; refusals make red laps the next lap hears of."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.repos import PY, git, make_repo
from helpers.running import lap_notes, ralph

from ralph.agents.base import AgentResult
from ralph.verdict.commit_hooks import commit_message

# Lap 1 leaves a FIXME (the hook refuses it); lap 2 reads why and writes clean code.
AGENT = r"""
import os, pathlib, sys
lap = int(os.environ["RALPH_LAP"])
prompt = sys.stdin.read()
pathlib.Path(os.environ["PROMPTS"], f"lap-{lap}.md").write_text(prompt)
code = "value = 1  # FIXME\n" if lap == 1 else "value = 1   \n"
pathlib.Path("mod.py").write_text(code)
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]"))
"""

REFUSE_FIXME = """#!/bin/sh
if git diff --cached | grep -q FIXME; then echo "pre-commit: FIXME is not allowed in commits"; exit 1; fi
"""

# Like pre-commit's whitespace fixer: rewrites staged files and fails when it changed something.
STRIP_TRAILING = """#!/bin/sh
changed=0
for f in $(git diff --cached --name-only -- '*.py'); do
  if grep -q ' $' "$f"; then sed -i 's/ *$//' "$f"; changed=1; fi
done
[ -n "$HOOK_MARKER" ] && touch "$HOOK_MARKER"
exit $changed
"""


def setup(tmp_path: Path, hook: str, verify: bool = True) -> Path:
    (tmp_path / "prompts").mkdir()
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": f"{PY} {agent}"},
        "checks": ["true"],
        "commit": {"verify": verify},
        "limits": {"max_laps": 3},
        "env": {"pass": ["PROMPTS", "HOOK_MARKER"]},  # laps are given nothing else of the test's
        "sandbox": {"writable": [str(tmp_path / "prompts")]},
    }  # where the agent leaves its prompts
    repo = make_repo(tmp_path / "repo", config=config, todo=["write mod.py"])
    hook_path = repo / ".git" / "hooks" / "pre-commit"
    hook_path.write_text(hook)
    hook_path.chmod(0o755)
    return repo


def laps(repo: Path) -> list[dict]:
    return lap_notes(repo, "h")


def test_hook_rejection_is_a_red_lap_and_the_next_lap_hears_why(tmp_path: Path):
    repo = setup(tmp_path, REFUSE_FIXME)
    result = ralph(repo, "run", "--name", "h", env={"PROMPTS": str(tmp_path / "prompts")})
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = laps(repo)
    assert first["status"] == "red" and first["reason"] == "the repository's commit hooks rejected the lap"
    assert "FIXME is not allowed" in first["output_tail"]
    # The refused tree is kept for review under the lap ref, off the green line.
    assert "FIXME" in git(repo, "show", "refs/ralph/h/laps/1:mod.py")
    assert "FIXME" not in git(repo, "show", "ralph/h:mod.py")
    assert "FIXME is not allowed" in (tmp_path / "prompts" / "lap-2.md").read_text()
    assert second["status"] == "green"


def test_a_hook_that_fixes_files_gets_one_retry(tmp_path: Path):
    repo = setup(tmp_path, STRIP_TRAILING)
    (tmp_path / "prompts" / "lap-1.md").touch()
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT.replace("lap == 1", "False"))
    result = ralph(repo, "run", "--name", "h", env={"PROMPTS": str(tmp_path / "prompts")})
    assert result.returncode == 0, result.stdout + result.stderr
    assert [lap["status"] for lap in laps(repo)] == ["green"]
    assert git(repo, "show", "ralph/h:mod.py") == "value = 1"


def test_verify_false_skips_the_hooks(tmp_path: Path):
    repo = setup(tmp_path, STRIP_TRAILING, verify=False)
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT.replace("lap == 1", "False"))
    marker = tmp_path / "prompts" / "hook-ran"  # writable to the hook, were it run
    result = ralph(repo, "run", "--name", "h", env={"PROMPTS": str(tmp_path / "prompts"), "HOOK_MARKER": str(marker)})
    assert result.returncode == 0
    assert not marker.exists()
    raw = subprocess.run(["git", "show", "ralph/h:mod.py"], cwd=repo, capture_output=True, text=True).stdout
    assert raw == "value = 1   \n"  # the formatter hook did not run


def test_a_hanging_hook_is_killed(tmp_path: Path):
    repo = setup(tmp_path, "#!/bin/sh\nsleep 60\n")
    config = json.loads((repo / "ralph.yaml").read_text())
    config["limits"].update(check_timeout=1, max_laps=1)
    (repo / "ralph.yaml").write_text(json.dumps(config))
    git(repo, "commit", "-q", "-am", "short timeout", "--no-verify")
    result = ralph(repo, "run", "--name", "h", env={"PROMPTS": str(tmp_path / "prompts")}, timeout=60)
    assert result.returncode == 3
    assert laps(repo)[0]["status"] == "red"


def test_the_pre_commit_framework_judges_laps_with_a_cache_of_ralphs(tmp_path: Path):
    """A real pre-commit installation (a local hook, no network): it refuses lap 1's FIXME in the
    lap's sandbox, and keeps its environments in ralph's cache, not in the user's."""
    repo = setup(tmp_path, "#!/bin/sh\nexit 0\n")
    (repo / ".pre-commit-config.yaml").write_text(
        "repos:\n- repo: local\n  hooks:\n  - id: no-fixme\n    name: no FIXME\n    language: pygrep\n"
        "    entry: FIXME\n    types: [python]\n"
    )
    git(repo, "add", ".pre-commit-config.yaml")
    git(repo, "commit", "-qm", "pre-commit", "--no-verify")
    subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=repo, check=True, capture_output=True)
    users_cache = Path.home() / ".cache" / "pre-commit"
    before = sorted(path.name for path in users_cache.rglob("*"))
    result = ralph(repo, "run", "--name", "h", env={"PROMPTS": str(tmp_path / "prompts")})
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = laps(repo)
    assert first["status"] == "red" and "no FIXME" in first["output_tail"] and "Failed" in first["output_tail"]
    assert second["status"] == "green"
    assert any((Path.home() / ".cache" / "ralph" / "pre-commit").glob("*/db.db"))
    assert sorted(path.name for path in users_cache.rglob("*")) == before  # (matters unsandboxed)


def test_ralphs_hooks_install_the_way_pre_commit_users_install_hooks(tmp_path: Path):
    """`repo:` ralph's own repository (a local path, offline), `rev:` its commit, hooks by id,
    through the real pre-commit framework and real `git commit`s."""
    checkout = Path(__file__).resolve().parents[1]
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True)
    assert rev.returncode == 0, f"the tests run from a git checkout of ralph (pre-commit clones it): {rev.stderr}"
    repo = make_repo(tmp_path / "repo", {"TODO.md": "- [ ] One\n- [ ] Two\n", "PROGRESS.md": "start\n"})
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {checkout}\n  rev: {rev.stdout.strip()}\n"
        "  hooks: [{id: ralph-todo}, {id: ralph-progress}, {id: ralph-guard}]\n"
    )
    env = dict(
        os.environ,
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # where `ralph` is
    )
    subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=repo, env=env, check=True, capture_output=True)

    def commit(message: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "commit", "-qam", message], cwd=repo, env=env, capture_output=True, text=True)

    git(repo, "add", ".pre-commit-config.yaml")
    assert commit("hooks").returncode == 0
    (repo / "TODO.md").write_text("- [ ] One, reworded\n- [ ] Two\n")
    refused = commit("reword")
    assert refused.returncode != 0 and "TODO items deleted or reworded" in refused.stdout + refused.stderr
    (repo / "TODO.md").write_text("- [x] One\n- [ ] Two\n")
    (repo / "PROGRESS.md").write_text("x" * 9000)
    refused = commit("diary")
    assert refused.returncode != 0 and "over its budget of 8,000" in refused.stdout + refused.stderr
    (repo / "PROGRESS.md").write_text("one done\n")
    assert commit("tick one").returncode == 0
    git(repo, "checkout", "-q", "-b", "ralph/by-hand")
    (repo / "notes.txt").write_text("by hand\n")
    git(repo, "add", "notes.txt")
    refused = commit("on the green line")
    assert refused.returncode != 0 and "ralph/by-hand is a run's green line" in refused.stdout + refused.stderr


def test_a_lap_commit_message_links_no_issue_and_mentions_no_one():
    # Merged, `Fixes #13` in an agent's summary would close issue 13 on the forge (the red team's).
    summary = "Fixes #13, closes o/r#7 and GH-9, thanks @alice; see https://github.com/o/r/issues/13 (a@b.com)"
    agent = AgentResult(kind="command", outcome="ok", duration_s=1.0, summary=summary)
    message = commit_message("r", 2, ["Close #4 for @bob"], agent)
    for linked in ("#13", "#7", "GH-9", "@alice", "https://github.com", "#4", "@bob"):
        assert linked not in message, (linked, message)
    assert message.startswith("Close # 4 for @ bob\n\nFixes # 13, closes o/r# 7 and GH- 9, thanks @ alice")
    assert "github.com/o/r/issues/13 (a@b.com)" in message and "Ralph-Lap: 2" in message
