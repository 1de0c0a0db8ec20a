"""The built-in agent's tools on real git repositories: edits, the shell, and the walls around them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers.repos import git, make_repo

from ralph.agents.tools import BASH_OUTPUT_CAP, VIEW_MAX_LINES, Tools
from ralph.isolation import proc

CALC = """\
def add(a, b):
    return a + b


def mul(a, b):
    raise NotImplementedError
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"calc.py": CALC, "docs/guide.md": "# Guide\n", "docs/deep/er/x.md": "x\n"})


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir()
    return folder


def tools_for(workspace: Path, logs: Path, seconds_left: float = 60) -> Tools:
    return Tools(workspace, logs, proc.clean_env(), deadline=time.monotonic() + seconds_left)


@pytest.fixture
def tools(repo: Path, logs: Path) -> Tools:
    return tools_for(repo, logs)


def edit(tools: Tools, **arguments: object) -> str:
    return tools.run("str_replace_based_edit_tool", arguments)


def bash(tools: Tools, command: str, **arguments: object) -> str:
    return tools.run("bash", dict(arguments, command=command))


def test_view_numbers_lines_and_honours_view_range(tools: Tools) -> None:
    assert edit(tools, command="view", path="calc.py").splitlines()[:2] == [
        "     1\tdef add(a, b):",
        "     2\t    return a + b",
    ]
    assert edit(tools, command="view", path="calc.py", view_range=[5, -1]) == (
        "     5\tdef mul(a, b):\n     6\t    raise NotImplementedError"
    )
    assert "does not fit a file of 6 lines" in edit(tools, command="view", path="calc.py", view_range=[9, 12])


def test_view_lists_a_directory_two_levels_deep_without_git(tools: Tools) -> None:
    listing = edit(tools, command="view", path=".").splitlines()
    assert listing == ["calc.py", "docs/", "docs/deep/", "docs/guide.md"]


def test_view_cuts_a_long_file_and_says_how_to_see_the_rest(tools: Tools, repo: Path) -> None:
    (repo / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 1001)))
    shown = edit(tools, command="view", path="long.txt").splitlines()
    assert len(shown) == VIEW_MAX_LINES + 1
    assert shown[-1] == "[... cut at line 400 of 1000; use view_range [401, 800] or grep -n to see the rest]"


def test_view_refuses_a_binary_file(tools: Tools, repo: Path) -> None:
    (repo / "blob.bin").write_bytes(b"\x89PNG\0\0\x01")
    assert edit(tools, command="view", path="blob.bin") == "error: blob.bin: a binary file; use bash to inspect it"


def test_create_makes_folders_and_overwrites(tools: Tools, repo: Path) -> None:
    created = edit(tools, command="create", path="pkg/sub/new.py", file_text="a = 1\n")
    assert created == "created pkg/sub/new.py (1 lines)"
    assert edit(tools, command="create", path="pkg/sub/new.py", file_text="a = 2\nb = 3\n") == (
        "overwrote pkg/sub/new.py (2 lines)"
    )
    assert (repo / "pkg/sub/new.py").read_text() == "a = 2\nb = 3\n"


def test_str_replace_edits_the_one_match_and_shows_it(tools: Tools, repo: Path) -> None:
    result = edit(
        tools,
        command="str_replace",
        path="calc.py",
        old_str="    raise NotImplementedError",
        new_str="    return a * b",
    )
    assert result.splitlines()[0] == "edited calc.py:"
    assert "     6\t    return a * b" in result.splitlines()
    assert (repo / "calc.py").read_text() == CALC.replace("raise NotImplementedError", "return a * b")


@pytest.mark.parametrize(
    ("old", "new", "refusal"),
    [
        (
            "return a - b",
            "x",
            "error: old_str not found in calc.py; view the file and copy the text exactly, "
            "whitespace and indentation included",
        ),
        (
            "(a, b):",
            "(a, b, c):",
            "error: old_str occurs 2 times in calc.py (lines 1, 5); include more of the "
            "surrounding lines so that it occurs once",
        ),
        ("a + b", "a + b", "error: old_str and new_str are the same; nothing would change"),
    ],
)
def test_str_replace_refuses_unless_exactly_one_match(
    tools: Tools, repo: Path, old: str, new: str, refusal: str
) -> None:
    assert edit(tools, command="str_replace", path="calc.py", old_str=old, new_str=new) == refusal
    assert (repo / "calc.py").read_text() == CALC


def test_str_replace_keeps_windows_line_endings(tools: Tools, repo: Path) -> None:
    (repo / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    edit(tools, command="str_replace", path="dos.txt", old_str="two", new_str="2")
    assert (repo / "dos.txt").read_bytes() == b"one\r\n2\r\n"


def test_insert_after_a_line_and_at_the_top(tools: Tools, repo: Path) -> None:
    result = edit(tools, command="insert", path="calc.py", insert_line=2, new_str="\n# multiplication")
    assert "     4\t# multiplication" in result.splitlines()
    edit(tools, command="insert", path="calc.py", insert_line=0, new_str='"""Arithmetic."""\n')
    assert (repo / "calc.py").read_text().splitlines()[:5] == [
        '"""Arithmetic."""',
        "def add(a, b):",
        "    return a + b",
        "",
        "# multiplication",
    ]
    assert edit(tools, command="insert", path="calc.py", insert_line=99, new_str="x") == (
        "error: insert_line must be between 0 (the top) and 9 (the end of calc.py)"
    )


def test_bad_arguments_come_back_as_text(tools: Tools) -> None:
    assert edit(tools, path="calc.py") == "error: `command` is required and must be a non-empty string"
    assert edit(tools, command="delete", path="calc.py") == (
        "error: unknown command 'delete'; use view, create, str_replace or insert"
    )
    assert bash(tools, "true", timeout="soon") == "error: `timeout` must be a positive number of seconds"
    assert edit(tools, command="view", path="missing.py") == (
        "error: missing.py: no such file (create it with command create)"
    )


@pytest.mark.parametrize(
    "path",
    [
        "../outside.txt",
        "{outside}",
        "link/evil.txt",
        ".git/config",
        "docs/../.git/hooks/pre-commit",
        "sub/.git/x",
        "git-link",
    ],
)
def test_paths_that_leave_the_worktree_or_enter_git_are_refused(tools: Tools, repo: Path, path: str) -> None:
    outside = repo.parent / "outside"
    outside.mkdir()
    (repo / "link").symlink_to(outside)
    (repo / "git-link").symlink_to(repo / ".git" / "description")
    path = path.format(outside=outside / "abs.txt")
    for arguments in (dict(command="create", file_text="pwned"), dict(command="view")):
        assert edit(tools, path=path, **arguments).startswith(f"error: {path}: ")
    assert list(outside.iterdir()) == [] and not (repo.parent / "outside.txt").exists()
    assert "pwned" not in (repo / ".git" / "config").read_text()


def test_an_absolute_path_inside_the_worktree_is_fine(tools: Tools, repo: Path) -> None:
    assert edit(tools, command="view", path=str(repo / "docs" / "guide.md")) == "     1\t# Guide"


def test_a_lap_worktree_under_the_main_git_dir_works_but_its_git_file_is_refused(repo: Path, logs: Path) -> None:
    # ralph puts lap worktrees under <common git dir>/ralph/…, so ".git" is in their absolute path
    worktree = repo / ".git" / "ralph" / "run" / "worktrees" / "lap-1"
    git(repo, "worktree", "add", "-q", "--detach", str(worktree))
    tools = tools_for(worktree, logs)
    assert edit(tools, command="create", path="notes.md", file_text="hi\n") == "created notes.md (1 lines)"
    assert edit(tools, command="view", path=".git").startswith("error: .git: inside .git")
    assert edit(tools, command="view", path=".").splitlines() == [
        "calc.py",
        "docs/",
        "docs/deep/",
        "docs/guide.md",
        "notes.md",
    ]


def test_bash_reports_output_and_exit_code(tools: Tools) -> None:
    assert bash(tools, "echo out; echo err >&2; exit 3") == "out\nerr\n[exit code 3]"
    assert bash(tools, "true") == "(no output) [exit code 0]"
    assert bash(tools, "[[ -f calc.py ]] && echo bash") == "bash\n[exit code 0]"


def test_bash_gets_no_pager_and_no_stdin(tools: Tools) -> None:
    assert bash(tools, 'cat; echo "$PAGER $GIT_PAGER"') == "cat cat\n[exit code 0]"


def test_bash_reports_the_exit_code_of_a_command_that_closed_its_output_first(tools: Tools) -> None:
    assert bash(tools, "exec >&- 2>&-; sleep 0.3") == "(no output) [exit code 0]"


def test_bash_timeout_kills_the_whole_tree(tools: Tools) -> None:
    started = time.monotonic()
    result = bash(tools, "sleep 999.25 & setsid sleep 999.25 & wait", timeout=1)
    assert time.monotonic() - started < 6
    assert result.startswith("(no output) [timed out after 1s; the command and its children were killed")
    assert not _processes_running("999.25")


def test_bash_timeout_is_capped_by_the_lap_deadline(repo: Path, logs: Path) -> None:
    started = time.monotonic()
    result = bash(tools_for(repo, logs, seconds_left=2), "sleep 30", timeout=100)
    assert time.monotonic() - started < 5
    assert "[timed out after" in result
    assert bash(tools_for(repo, logs, seconds_left=0.5), "true") == "error: the lap's time is up; call finish now"


def test_bash_output_is_capped_and_the_rest_spilled(tools: Tools, logs: Path) -> None:
    result = bash(tools, "seq 1 100000; echo end")
    assert len(result.encode()) < BASH_OUTPUT_CAP + 300
    assert result.startswith("1\n2\n") and result.endswith("99999\n100000\nend\n[exit code 0]")
    spill = logs / "bash-1.out"
    assert f"bytes cut; the full output is in {spill}" in result
    assert spill.read_text().splitlines()[50000] == "50001"


def _processes_running(marker: str) -> bool:
    """Whether a live process has `marker` in its command line, allowing a moment for KILL to land."""
    for _ in range(20):
        processes = (entry for entry in Path("/proc").iterdir() if entry.name.isdigit())
        if not any(marker.encode() in _cmdline(process) for process in processes):
            return False
        time.sleep(0.1)
    return True


def _cmdline(process: Path) -> bytes:
    try:
        return (process / "cmdline").read_bytes()
    except OSError:
        return b""  # it exited while we looked
