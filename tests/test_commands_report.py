"""`ralph report`: one self-contained HTML page of a run, loaded in a real browser (headless
Chromium) and judged by what it draws."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from helpers.browser import browse, colour_runs, rgb, screenshot_rows
from helpers.jobs import mul_repo
from helpers.repos import git, make_repo
from helpers.running import ralph

from ralph.agents.scripted import Reply, ScriptedServer, Step, bash, finish, tool_call
from ralph.commands.report import COLOURS, DIFF_CAP, SESSION_COLOUR, TOKENS_COLOUR, _diff
from ralph.records.formats import LapStatus


def edit(**arguments: str) -> Reply:
    return tool_call("str_replace_based_edit_tool", arguments)


def judged_run(tmp_path: Path) -> Path:
    """Lap 1 breaks calc (red); lap 2 does the job, which the judge scores (green, done)."""
    agent: list[Step] = [
        edit(command="create", path="calc.py", file_text="def mul(a, b)\n"),
        finish("tried"),
        bash("echo working"),
        edit(command="create", path="calc.py", file_text="def mul(a, b):\n    return a * b\n"),
        edit(command="str_replace", path="TODO.md", old_str="- [ ] Implement mul", new_str="- [x] Implement mul"),
        finish("implemented mul <b>for real</b>"),
    ]
    verdict = tool_call(
        "verdict",
        {
            "scores": [
                {"dimension": "does what the item asks", "score": 0.9, "evidence": "return a * b", "reason": "ok"}
            ]
        },
    )
    with ScriptedServer(agent) as model, ScriptedServer([verdict]) as judge:
        judge_role = {"model": "judge-1", "base_url": judge.base_url, "api_key_env": "JUDGE_KEY"}
        goal = "Finish calc <script>alert(1)</script>"
        repo = mul_repo(tmp_path, model.base_url, goal=goal, roles={"judge": judge_role})
        result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    return repo


def test_the_report_draws_the_run_in_a_browser(tmp_path: Path):
    repo = judged_run(tmp_path)
    page = tmp_path / "report.html"
    assert ralph(repo, "report", "-o", str(page)).returncode == 0
    html = page.read_text()
    assert not re.search(r"""(src|href)\s*=|url\(|@import|<script""", html, re.IGNORECASE)  # nothing to fetch, no code
    assert "Finish calc &lt;script&gt;" in html and "&lt;b&gt;for real&lt;/b&gt;" in html

    dom = browse(page, tmp_path / "profile", "--dump-dom").stdout
    assert dom.count('<details class="lap"') == 2
    assert re.findall(r'<details class="lap" data-status="(\w+)"', dom) == ["red", "green"]
    assert 'data-status="red"' in dom and "judge</b> passed" in dom and "does what the item asks" in dom
    assert "tests passing" not in dom  # no pytest here: no counts invented
    assert '<span class="add">+    return a * b</span>' in dom

    rows = screenshot_rows(page, tmp_path / "profile", tmp_path / "report.png")
    width = len(rows[0])
    statuses = {str(status): COLOURS[status] for status in (LapStatus.GREEN, LapStatus.RED, LapStatus.ERROR)}
    status_pixels = {rgb(hex_) for hex_ in statuses.values()}

    def coloured(row: list[tuple[int, ...]]) -> int:
        return sum(pixel in status_pixels for pixel in row)

    # The timeline: the row most covered by status colours, a stretch per lap in lap order.
    timeline = max(rows, key=coloured)
    assert colour_runs(timeline, statuses) == ["red", "green"]
    assert coloured(timeline) > width * 0.7
    # The tokens chart: a bar a lap (the row they cover most crosses each) and the session line.
    bar = rgb(TOKENS_COLOUR)
    widest = max(rows, key=lambda row: row.count(bar))
    assert len(re.findall(r"1+", "".join("1" if pixel == bar else "0" for pixel in widest))) == 2
    assert any(colour_runs(row, {"line": SESSION_COLOUR}) for row in rows)


def test_report_to_stdout_and_its_errors(tmp_path: Path):
    agent = {"kind": "command", "command": "sed -i 's/\\[ \\]/[x]/' TODO.md && echo done > notes.txt"}
    config = {"goal": "g", "agent": agent, "checks": ["true"]}
    repo = make_repo(tmp_path / "repo", config=config, todo=["a"])
    assert ralph(repo, "report").stderr == "ralph: no ralph run in this repository yet — start one with `ralph run`\n"
    assert ralph(repo, "run", "--name", "s").returncode == 0
    shown = ralph(repo, "report", "-o", "-")
    assert shown.returncode == 0 and shown.stdout.startswith("<!DOCTYPE html>")
    assert 'id="tokens"' not in shown.stdout and "<b>unknown</b>" in shown.stdout  # a command agent tells none
    written = repo / ".git" / "ralph" / "s" / "report.html"
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's")
    written.symlink_to(victim)  # planted where the report goes: replaced, not followed
    default = ralph(repo, "report")
    assert victim.read_text() == "the user's" and not written.is_symlink()
    assert default.stdout.strip().endswith(str(written)) and written.read_text() == shown.stdout
    completion = dict(os.environ, COMP_WORDS="ralph report --run ", COMP_CWORD="3", _RALPH_COMPLETE="bash_complete")
    script = Path(sys.executable).parent / "ralph"  # the installed command, whose name click completes for
    completed = subprocess.run([script], cwd=repo, env=completion, capture_output=True, text=True)
    assert completed.stdout.split() == ["plain,s"]  # click's shell completion names the runs
    bad = ralph(repo, "report", "-o", str(tmp_path / "missing" / "r.html"))
    assert bad.returncode == 1 and bad.stderr.startswith("ralph: cannot write the report to ")


def test_a_huge_diff_is_read_and_shown_only_in_part(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    (repo / "big.txt").write_text("line of a huge file\n" * 300_000)  # 6 MB
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "big"], cwd=repo, check=True)
    shown = _diff(repo, "HEAD^", "HEAD")
    assert shown.count("+line of a huge file") <= DIFF_CAP // 20  # of 300,000 lines, the first 100k characters
    assert shown.endswith("[... the rest of the diff: git show HEAD]</pre></details>")


def test_the_todo_count_is_the_green_tips_not_a_red_laps(tmp_path: Path):
    """A lap that ticks the item and breaks the check is red: nothing of the TODO is done."""
    agent = {"kind": "command", "command": "sed -i 's/\\[ \\]/[x]/' TODO.md && echo broken > notes.txt"}
    config = {"goal": "g", "agent": agent, "checks": ["test ! -f notes.txt"]}
    repo = make_repo(tmp_path / "repo", config=config, todo=["a"])
    result = ralph(repo, "run", "--name", "r", "--max-laps", "1")
    assert result.returncode == 3, result.stdout + result.stderr
    shown = ralph(repo, "report", "-o", "-").stdout
    assert "laps</span><b>1: 0 green, 1 red" in shown
    assert "<span class=muted>TODO done</span><b>0/1</b>" in shown


def test_a_notes_parent_is_a_revision_to_git_never_an_option(tmp_path: Path):
    """Notes can be pushed to a remote by anyone: a parent of `--output=FILE` wrote the lap's diff
    over FILE when the report asked git for it."""
    agent = {"kind": "command", "command": "sed -i 's/\\[ \\]/[x]/' TODO.md && echo done > notes.txt"}
    repo = make_repo(tmp_path / "repo", config={"goal": "g", "agent": agent, "checks": ["true"]}, todo=["a"])
    assert ralph(repo, "run", "--name", "s").returncode == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's")
    note = json.loads(git(repo, "notes", "--ref=ralph", "show", "refs/ralph/s/laps/1"))
    note["parent"] = f"--output={victim}"
    git(repo, "notes", "--ref=ralph", "add", "-f", "-m", json.dumps(note), "refs/ralph/s/laps/1")
    shown = ralph(repo, "report", "-o", "-")
    assert shown.returncode == 0 and victim.read_text() == "the user's"
    assert "unreadable note: parent: String should match pattern" in shown.stdout  # an object id, or no commit
