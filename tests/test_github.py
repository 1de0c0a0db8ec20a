"""Issues in, pull requests out: `ralph run --issue N` and `ralph land --pr`, against a stand-in
`gh` first on PATH (helpers/gh_stand_in.py) and a real bare repository as the remote."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.gh_stand_in import StandInGh
from helpers.repos import PY, git, make_repo, python_agent
from helpers.running import ralph, ralph_on_a_terminal, snapshot

# Each lap ticks the first open item and writes a file: a run of two items is done in two laps.
AGENT = r"""
import os, pathlib
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ] ", "- [x] ", 1))
pathlib.Path(f"lap-{os.environ['RALPH_LAP']}.txt").write_text("work\n")
"""
ISSUE_BODY = """\
Two notes, please. Not a command: `$(touch PWNED)`

- [x] Already done
- [ ] First note; $(touch PWNED) stays words
- [ ] Second note

```
- [ ] not an item: it is in a code block
```
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, StandInGh, Path]:
    """A repository whose checks pass, a bare repository as its `origin`, the stand-in gh on PATH."""
    gh = StandInGh.install(tmp_path / "gh")
    monkeypatch.setenv("PATH", f"{gh.bin}{os.pathsep}{os.environ['PATH']}")
    config = {
        "goal": "Write the two notes",
        "agent": python_agent(tmp_path / "agent.py", AGENT),
        "checks": [f"{PY} -c pass"],
    }
    repo = make_repo(tmp_path / "repo", config=config, todo=["First note", "Second note"], progress="")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    return repo, gh, remote


def remote_refs(remote: Path) -> dict[str, str]:
    listing = git(remote, "for-each-ref", "--format=%(refname) %(objectname)")
    return {sha: ref for ref, sha in (line.split(" ") for line in listing.splitlines())}


def test_land_pr_pushes_the_green_tip_and_opens_one_pull_request(project):
    repo, gh, remote = project
    assert ralph(repo, "run", "--name", "notes").returncode == 0
    assert remote_refs(remote) == {}  # nothing is pushed but by `ralph land --pr`

    landed = ralph(repo, "land", "--pr")
    assert landed.returncode == 0, landed.stderr
    assert "opened pull request: https://github.com/owner/repo/pull/1" in landed.stdout
    green = git(repo, "rev-parse", "ralph/notes")
    assert remote_refs(remote) == {green: "refs/heads/ralph/notes"}  # the green tip, by plain git push
    listed, created = gh.calls()
    assert listed["argv"] == [
        "pr",
        "list",
        "--head=ralph/notes",
        "--state=open",
        "--json=number,url,state,headRepositoryOwner",
    ]
    assert created["argv"] == [
        "pr",
        "create",
        "--base=main",
        "--head=ralph/notes",
        "--title=Write the two notes",
        "--body-file=-",
    ]  # a done run: no --draft
    body = created["stdin"]
    assert "`notes`: done" in body and "- TODO items: 2 of 2 done\n- laps: 2 green of 2\n" in body
    assert "- tests passing: not counted" in body and "- cost: unknown" in body
    assert "- tokens: unknown" in body  # an agent CLI that reports no usage: never 0
    laps = [line for line in body.splitlines() if line.startswith("lap ")]
    assert [line.split()[1:3] for line in laps] == [
        ["1", git(repo, "rev-parse", "ralph/notes~")[:10]],
        ["2", green[:10]],
    ]
    assert "First note" in laps[0] and "Closes" not in body and "Part of" not in body

    # Again: pushed, and the pull request open for the branch said, not a second one opened.
    again = ralph(repo, "land", "--pr")
    assert again.returncode == 0 and "already open" in again.stdout and "pull/1" in again.stdout
    assert [call["argv"][:2] for call in gh.calls()[2:]] == [["pr", "list"]] and len(gh.pulls()) == 1

    # A plain `ralph land` lands on the user's branch and pushes nothing.
    assert ralph(repo, "land").returncode == 0
    assert remote_refs(remote) == {green: "refs/heads/ralph/notes"}


def test_land_pr_to_a_fork_names_the_forks_owner_and_a_pull_request_of_anothers_fork_is_not_taken(project, tmp_path):
    repo, gh, remote = project
    fork = tmp_path / "fork.git"  # the user's fork on GitHub, as git reaches it here (url.insteadOf)
    git(tmp_path, "init", "-q", "--bare", str(fork))
    git(repo, "remote", "set-url", "origin", "https://github.com/owner/repo.git")
    git(repo, "remote", "add", "fork", "git@github.com:me/repo.git")
    git(repo, "config", f"url.{remote}.insteadOf", "https://github.com/owner/repo.git")
    git(repo, "config", f"url.{fork}.insteadOf", "git@github.com:me/repo.git")
    assert ralph(repo, "run", "--name", "notes").returncode == 0
    state = json.loads(gh.state.read_text())
    theirs = {"number": 1, "url": "https://github.com/owner/repo/pull/1", "state": "OPEN", "headRefName": "ralph/notes"}
    theirs |= {"baseRefName": "main", "headRepositoryOwner": {"id": "U_9", "login": "someone"}}
    gh.state.write_text(json.dumps(dict(state, pulls=[theirs])))  # another's fork, a branch of the same name

    landed = ralph(repo, "land", "--pr", "--remote", "fork")
    assert landed.returncode == 0, landed.stderr
    assert "opened pull request: https://github.com/owner/repo/pull/2" in landed.stdout
    viewed, listed, created = gh.calls()
    assert viewed["argv"] == ["repo", "view", "--json=owner"] and listed["argv"][:3] == [
        "pr",
        "list",
        "--head=ralph/notes",
    ]
    assert "--head=me:ralph/notes" in created["argv"]  # gh's owner:branch, for a fork's branch
    green = git(repo, "rev-parse", "ralph/notes")
    assert remote_refs(fork) == {green: "refs/heads/ralph/notes"} and remote_refs(remote) == {}
    again = ralph(repo, "land", "--pr", "--remote", "fork")
    assert again.returncode == 0 and "already open" in again.stdout and "pull/2" in again.stdout

    # Into the repository itself (origin's owner is gh's): a plain branch, someone's fork not taken for it.
    into_origin = ralph(repo, "land", "--pr")
    assert (
        into_origin.returncode == 0
        and "opened pull request: https://github.com/owner/repo/pull/3" in into_origin.stdout
    )
    assert "--head=ralph/notes" in gh.calls()[-1]["argv"] and remote_refs(remote) == {green: "refs/heads/ralph/notes"}


def test_land_pr_of_a_run_not_done_is_a_draft_and_gh_trouble_is_one_line(project, tmp_path, monkeypatch):
    repo, gh, remote = project
    assert ralph(repo, "run", "--name", "notes", "--max-laps", "1").returncode == 3  # one item of two
    refused = ralph(repo, "land", "--pr")
    assert refused.returncode == 1 and "run 'notes' is not done" in refused.stderr and "--draft" in refused.stderr

    state = json.loads(gh.state.read_text())
    gh.state.write_text(json.dumps(dict(state, logged_in=False)))
    logged_out = ralph(repo, "land", "--pr", "--draft")
    assert logged_out.returncode == 1 and len(logged_out.stderr.strip().splitlines()) == 1
    assert "`gh pr list` failed: gh is not logged in" in logged_out.stderr and "nothing was pushed" in logged_out.stderr
    gh.state.write_text(json.dumps(state))

    path, only_git = os.environ["PATH"], tmp_path / "only-git"  # a PATH with git and no gh
    only_git.mkdir()
    (only_git / "git").symlink_to(git(repo, "--exec-path") + "/git")
    monkeypatch.setenv("PATH", str(only_git))
    missing = ralph(repo, "land", "--pr", "--draft")
    assert missing.returncode == 1 and "`gh pr list` could not run" in missing.stderr
    assert "https://cli.github.com" in missing.stderr and "nothing was pushed" in missing.stderr
    assert remote_refs(remote) == {}
    monkeypatch.setenv("PATH", path)

    drafted = ralph(repo, "land", "--pr", "--draft")
    assert drafted.returncode == 0, drafted.stderr
    assert "opened a draft pull request" in drafted.stdout
    created = gh.calls()[-1]
    assert created["argv"][-1] == "--draft" and "not done, a draft" in created["stdin"]
    assert "- TODO items: 1 of 2 done" in created["stdin"]
    assert remote_refs(remote) == {git(repo, "rev-parse", "ralph/notes"): "refs/heads/ralph/notes"}


def test_run_of_an_issue_starts_from_a_commit_of_its_task_list_and_its_pull_request_closes_it(project):
    repo, gh, remote = project
    gh.add_issue(7, "Notes for issue seven", ISSUE_BODY)
    gh.add_issue(8, "A closed one", "- [ ] never", state="CLOSED")
    before, head = snapshot(repo), git(repo, "rev-parse", "HEAD")

    closed = ralph(repo, "run", "--issue", "8")
    assert closed.returncode == 1 and "issue #8 is closed" in closed.stderr
    state = json.loads(gh.state.read_text())
    state["issues"]["5"] = dict(state["issues"]["7"], number=99)  # gh answering for another issue
    gh.state.write_text(json.dumps(state))
    other = ralph(repo, "run", "--issue", "5")
    assert other.returncode == 1 and "`gh issue view 5` answered for another issue (#99" in other.stderr
    assert git(repo, "for-each-ref", "refs/ralph/") == ""

    ran = ralph(repo, "run", "--issue", "7")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    base = git(repo, "rev-parse", "refs/ralph/issue-7/base")
    assert git(repo, "rev-parse", f"{base}^") == head  # HEAD plus ralph's commit, on no branch of the user's
    assert git(repo, "show", f"{base}:TODO.md") == (
        "# TODO\n\nGoal: Notes for issue seven\nFrom issue #7: https://github.com/owner/repo/issues/7\n\n"
        "- [x] Already done\n- [ ] First note; $(touch PWNED) stays words\n- [ ] Second note"
    )
    assert "Ralph-Issue: https://github.com/owner/repo/issues/7" in git(repo, "log", "-1", "--format=%B", base)
    linked = git(repo, "log", "--format=%(trailers:key=Ralph-Issue,valueonly)", f"{base}..ralph/issue-7")
    assert linked.split() == ["https://github.com/owner/repo/issues/7"] * 2  # each lap's commit links it too
    assert snapshot(repo) == before and not list(repo.parent.rglob("PWNED"))
    status = json.loads(ralph(repo, "status", "--json").stdout)
    assert status["run"] == "issue-7" and status["done"] is True
    assert status["issue"] == {
        "number": 7,
        "title": "Notes for issue seven",
        "url": "https://github.com/owner/repo/issues/7",
    }
    assert "#7 Notes for issue seven" in ralph(repo, "status").stdout
    assert gh.calls()[-1]["argv"] == ["issue", "view", "7", "--json=number,title,body,url,state"]

    # The same command again: the run of issue 7, done; the issue is not read again.
    calls = len(gh.calls())
    assert ralph(repo, "run", "--issue", "7").returncode == 0 and len(gh.calls()) == calls
    other = ralph(repo, "run", "--name", "issue-7", "--issue", "9")  # not resumed as a run of issue 9
    assert other.returncode == 1 and "run 'issue-7' is a run of issue #7, not of issue #9" in other.stderr
    assert len(gh.calls()) == calls

    assert ralph(repo, "land", "--pr").returncode == 0
    created = gh.calls()[-1]
    assert "--title=Notes for issue seven" in created["argv"] and created["stdin"].endswith("\nCloses #7\n")


# The planner (lap 0) writes the items, and a file git ignores, which no check may ever see.
PLANS_THEN_TICKS = r"""
import os, pathlib
if os.environ["RALPH_LAP"] == "0":
    pathlib.Path("TODO.md").write_text("- [ ] First note\n")
    pathlib.Path("planted").write_text("left by the planner\n")
else:
    todo = pathlib.Path("TODO.md")
    todo.write_text(todo.read_text().replace("- [ ] ", "- [x] ", 1))
    pathlib.Path(f"lap-{os.environ['RALPH_LAP']}.txt").write_text("work\n")
"""


def test_an_issue_without_a_task_list_is_planned_in_a_workspace_no_check_runs_in(project, tmp_path):
    repo, gh, _ = project
    config = json.loads((repo / "ralph.yaml").read_text())
    config["agent"] = python_agent(tmp_path / "planner.py", PLANS_THEN_TICKS)
    config["checks"] = ["test ! -e planted"]
    (repo / "ralph.yaml").write_text(json.dumps(config))
    (repo / ".gitignore").write_text("planted\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the planner's config")
    gh.add_issue(3, "Notes, planned", "No task list here: plan it.")
    ran = ralph(repo, "run", "--issue", "3")
    assert ran.returncode == 0, ran.stdout + ran.stderr  # the baseline check passed: nothing planted reached it
    assert "issue #3 has no task list: planning it" in ran.stdout
    assert git(repo, "show", "refs/ralph/issue-3/base:TODO.md").endswith("\n- [ ] First note")


# Whoever can write the issue writes its task list: grants there open what the scope keeps shut.
GRANTING_ISSUE = """\
- [x] Already done (may change: .github/workflows/ci.yml)
- [ ] First note (may change: ralph.yaml, **)
- [ ] Second note
"""
BASE_TODO = "# TODO\n\nGoal: Notes\nFrom issue #7: https://github.com/owner/repo/issues/7\n\n"


def test_an_issues_grants_are_shown_and_none_is_taken_without_a_terminal(project):
    repo, gh, _ = project
    gh.add_issue(7, "Notes", GRANTING_ISSUE)
    ran = ralph(repo, "run", "--issue", "7")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "grants proposed by the task list of issue #7" in ran.stdout
    assert "  - First note (may change: ralph.yaml, **)" in ran.stdout
    assert "grants taken off the items (no terminal to ask on)" in ran.stdout
    assert git(repo, "show", "refs/ralph/issue-7/base:TODO.md") == (
        BASE_TODO + "- [x] Already done\n- [ ] First note\n- [ ] Second note"
    )


def test_an_issues_grants_are_the_users_only_when_kept_on_a_terminal(project):
    repo, gh, _ = project
    gh.add_issue(7, "Notes", GRANTING_ISSUE)
    gh.add_issue(8, "Notes", GRANTING_ISSUE.replace("#7", "#8"))
    refused = ralph_on_a_terminal(repo, "run", "--issue", "8", typed="n\n")
    assert refused.returncode == 0, refused.stdout + refused.stderr
    assert "keep these grants?" in refused.stdout and "grants taken off the items (not kept)" in refused.stdout
    assert "may change" not in git(repo, "show", "refs/ralph/issue-8/base:TODO.md")
    kept = ralph_on_a_terminal(repo, "run", "--issue", "7", typed="y\n")
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert git(repo, "show", "refs/ralph/issue-7/base:TODO.md") == BASE_TODO + GRANTING_ISSUE.rstrip("\n")
