"""`ralph show LAP` of a run, as a user reads it: where the lap's transcript (or a command agent's
output) is, the built-in agent's tool calls in order, and its tokens, the cached ones and the
endpoint check's included."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from helpers.jobs import mul_repo
from helpers.repos import PY, git, make_repo
from helpers.running import lap_notes, ralph

from ralph.agents.scripted import ScriptedServer, Step, bash, finish, text, tool_call

IMPLEMENT = tool_call(
    "str_replace_based_edit_tool",
    {"command": "str_replace", "path": "calc.py", "old_str": "raise NotImplementedError", "new_str": "return a * b"},
)
TICK = tool_call(
    "str_replace_based_edit_tool",
    {"command": "str_replace", "path": "TODO.md", "old_str": "- [ ] Implement mul", "new_str": "- [x] Implement mul"},
)


def lap_folder(repo: Path, run: str, lap: int = 1) -> Path:
    return repo / ".git" / "ralph" / run / f"lap-{lap}"


def test_show_lists_the_tool_calls_in_order_and_says_where_the_transcript_is(tmp_path: Path) -> None:
    script: list[Step] = [
        tool_call("str_replace_based_edit_tool", {"command": "view", "path": "calc.py"}),
        dataclasses.replace(IMPLEMENT, cached_tokens=100),
        dataclasses.replace(bash(f"{PY} -c 'import calc\nprint(calc.mul(6, 7))'"), cached_tokens=150),
        TICK,
        finish("implemented mul"),
    ]
    with ScriptedServer(script) as server:
        repo = mul_repo(tmp_path, server.base_url)
        assert ralph(repo, "run", "--name", "s").returncode == 0
    shown = ralph(repo, "show", "1").stdout
    transcript = lap_folder(repo, "s") / "transcript.jsonl"
    assert f"transcript {transcript}\n" in shown and transcript.is_file()
    listed = shown[shown.index("tool calls") :].splitlines()[:6]
    assert listed == [
        "tool calls 5",
        "   1. str_replace_based_edit_tool  view calc.py",
        "   2. str_replace_based_edit_tool  str_replace calc.py",
        f"   3. bash  {PY} -c 'import calc print(calc.mul(6, 7))'",  # one line
        "   4. str_replace_based_edit_tool  str_replace TODO.md",
        "   5. finish  done: implemented mul",
    ]
    (lap,) = lap_notes(repo, "s")
    usage = lap["agent"]["usage"]
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    (check,) = [record["usage"] for record in records if record["event"] == "endpoint_check"]
    checked = check["prompt_tokens"] + check["completion_tokens"]
    reported = [record for record in records if record["event"] == "response"]
    assert usage["requests"] == 5 and usage["cached_tokens"] == 250
    assert usage["prompt_tokens"] == sum(record["prompt_tokens"] for record in reported) + check["prompt_tokens"]
    assert (
        f"tokens  5 requests, {usage['prompt_tokens']:,} prompt (of which 250 cached) + "
        f"{usage['completion_tokens']:,} completion; the endpoint check's {checked:,} included" in shown
    )
    status = json.loads(ralph(repo, "status", "--json").stdout)
    assert status["tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]  # the run's total has them too


def test_show_caps_a_long_list_of_calls_and_marks_calls_written_as_text(tmp_path: Path) -> None:
    written = json.dumps({"name": "bash", "arguments": {"command": "echo from text"}})

    def script(body: dict, index: int) -> Step:
        if index == 0:
            return text(f"```json\n{written}\n```")
        return bash(f"echo {index}") if index < 28 else finish("many")

    with ScriptedServer(script) as server:
        repo = mul_repo(tmp_path, server.base_url, limits={"max_laps": 1})
        config = json.loads((repo / "ralph.yaml").read_text())
        config["agent"]["compat"] = {"text_tool_calls": True}
        (repo / "ralph.yaml").write_text(json.dumps(config))
        git(repo, "commit", "-qam", "text tool calls")
        ralph(repo, "run", "--name", "c")
    shown = ralph(repo, "show", "1").stdout
    assert "tool calls 29\n" in shown
    assert "   1. bash  echo from text (written as text)\n" in shown
    assert "  25. bash  echo 24\n  … and 4 more\n" in shown
    as_json = json.loads(ralph(repo, "show", "1", "--json").stdout)
    assert as_json["transcript"] == str(lap_folder(repo, "c") / "transcript.jsonl")
    assert len(as_json["tool_calls"]) == 29 and as_json["tool_calls"][0] == {
        "name": "bash",
        "arguments": {"command": "echo from text"},
        "from_text": True,
    }

    shutil.rmtree(lap_folder(repo, "c"))  # a lap run on another machine, or a run's folder cleaned
    gone = ralph(repo, "show", "1").stdout
    assert "transcript " in gone and " — not here (cleaned, or the lap ran on another machine)" in gone
    assert "tool calls" not in gone


def test_show_says_where_a_command_agents_output_is(tmp_path: Path) -> None:
    config = {"goal": "g", "agent": {"kind": "command", "command": "echo working; echo x > x.txt"}, "checks": ["true"]}
    repo = make_repo(tmp_path / "repo", {"TODO.md": "- [ ] a\n"}, config=config)
    ran = ralph(repo, "run", "--name", "k", "--max-laps", "1")
    assert ran.returncode == 3, ran.stdout + ran.stderr  # a green lap, its TODO item left open: max_laps
    log = lap_folder(repo, "k") / "agent.log"
    shown = ralph(repo, "show", "1").stdout
    assert f"output  {log}\n" in shown and log.read_text() == "working\n"
    assert "tool calls" not in shown and "transcript" not in shown
    assert json.loads(ralph(repo, "show", "1", "--json").stdout)["output_log"] == str(log)


def test_show_of_a_transcript_it_cannot_read_says_so_and_shows_the_rest(tmp_path: Path) -> None:
    with ScriptedServer([IMPLEMENT, TICK, finish("implemented mul")]) as server:
        repo = mul_repo(tmp_path, server.base_url)
        assert ralph(repo, "run", "--name", "s").returncode == 0
    transcript = lap_folder(repo, "s") / "transcript.jsonl"
    kept = transcript.read_text()
    for planted in ("[1, 2]\n", "5\n", "[" * 100_000 + "]" * 100_000 + "\n", "\0not json\n"):
        transcript.write_text(kept + planted)
        shown = ralph(repo, "show", "1")
        assert shown.returncode == 0 and "internal error" not in shown.stderr, planted[:10]
        assert "unreadable" in shown.stdout and "check pass" in shown.stdout, planted[:10]
    transcript.write_text(kept.replace('"prompt_tokens": ', '"prompt_tokens": "x", "was": ', 1))
    assert ralph(repo, "show", "1").returncode == 0  # an odd count is no number, never a crash


def test_status_log_and_show_read_the_same_from_a_subfolder_and_a_linked_worktree(tmp_path: Path) -> None:
    """The repository is found by `git rev-parse`, the runs' records read by one `git cat-file
    --batch`: what the commands say does not depend on where in the repository they are asked, and
    a record ref that is no blob is still said, in git's words, without hiding the other runs."""
    config = {"goal": "g", "agent": {"kind": "command", "command": "echo x >> x.txt"}, "checks": ["true"]}
    repo = make_repo(tmp_path / "répo with space", {"TODO.md": "- [ ] a\n", "sub/f.txt": "f\n"}, config=config)
    for name in ("one", "two"):
        assert ralph(repo, "run", "--name", name, "--max-laps", "1").returncode == 3
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"))
    commands = (["status"], ["status", "--run", "one", "--json"], ["log"], ["log", "--json"], ["show", "1"])
    said = {tuple(args): ralph(repo, *args) for args in commands}
    assert all(result.returncode == 0 for result in said.values()), said
    assert said[("status",)].stdout.startswith("run two: not done")
    for where in (repo / "sub", tmp_path / "linked"):
        for args in commands:
            again = ralph(where, *args)
            assert (again.returncode, again.stdout, again.stderr) == (0, said[tuple(args)].stdout, ""), (where, args)
    git(repo, "update-ref", "refs/ralph/zz/run", git(repo, "rev-parse", "HEAD^{tree}"))
    odd = ralph(repo, "status")
    assert odd.returncode == 0 and odd.stdout == said[("status",)].stdout
    assert "refs/ralph/zz/run: the record of run 'zz' is not a blob: fatal: " in odd.stderr


def test_no_repository_a_bare_one_and_one_without_commits_are_said_as_before(tmp_path: Path) -> None:
    (tmp_path / "none").mkdir()
    git(tmp_path, "init", "-q", "--bare", "bare.git")
    git(tmp_path, "init", "-q", "empty")
    for folder, said in (
        ("none", "not a git repository"),
        ("bare.git", "is a bare repository"),
        ("empty", "no commits yet"),
    ):
        for command in ("status", "log", "show"):
            result = ralph(tmp_path / folder, command, *(["1"] if command == "show" else []))
            assert result.returncode == 1 and said in result.stderr, (folder, command, result.stderr)
