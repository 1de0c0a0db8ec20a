import sys
from pathlib import Path

import pytest
from helpers.repos import SANDBOX_MODES, git, make_repo
from helpers.running import lap_notes, ralph

PY = sys.executable


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_the_checks_see_the_files_a_new_gitattributes_would_check_out(tmp_path: Path, sandbox: str):
    """A lap that only adds `data.txt text eol=crlf` leaves data.txt's blob as it was: git's
    checkout would rewrite no file, and the checks would read the LF bytes no checkout of the
    commit holds. A clone of the lap's commit has CRLF, which the check refuses: so must the
    checks' tree. (The agent sleeps: git rereads a file no older than its index, and a real lap
    takes longer than a second.)"""
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": "sleep 2; printf 'data.txt text eol=crlf\\n' > .gitattributes && sed -i 's/\\[ \\]/[x]/' TODO.md"},
        "sandbox": sandbox,
        "checks": [f"{PY} -c \"import sys; sys.exit(b'\\\\r' in open('data.txt', 'rb').read())\""],
        "limits": {"max_laps": 1},
        "protect": [],
    }  # this test is about the checks, not the guard of .gitattributes
    repo = make_repo(tmp_path / "repo", {"data.txt": "a\nb\n"}, config=config, todo=["x"])
    ralph(repo, "run", "--name", "r")
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "red" and "check regressed" in lap["reason"], lap["reason"]
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-checkout", str(repo), str(clone))
    git(clone, "fetch", "-q", "origin", "refs/ralph/r/laps/1")
    git(clone, "checkout", "-q", "FETCH_HEAD")
    assert b"\r\n" in (clone / "data.txt").read_bytes()  # what the checks had to see
