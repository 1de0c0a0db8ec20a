"""Files at commits read through one long-lived `git cat-file --batch`: the same texts as git
shows, none where there is no file, and a reader that died or cannot carry a name replaced by
the one-process way without the caller seeing a difference."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from helpers.repos import git, make_repo

from ralph import git as ralph_git
from ralph.git import blobs


def test_texts_at_new_commits_are_git_s_and_no_file_reads_as_none(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "one\n", "dir/b.txt": "two\n", "odd name\u00e9.txt": "three\n"})
    first = git(repo, "rev-parse", "HEAD")
    assert ralph_git.show_file(repo, first, "a.txt") == "one\n"
    (repo / "a.txt").write_text("changed\n")
    git(repo, "commit", "-qam", "next")
    second = git(repo, "rev-parse", "HEAD")  # an object made after the reader started

    assert ralph_git.show_file(repo, second, "a.txt") == "changed\n"
    assert ralph_git.show_file(repo, second, "odd name\u00e9.txt") == "three\n"
    assert ralph_git.show_file(repo, second, "dir") is None  # a folder is no file
    assert ralph_git.show_file(repo, second, "none.txt") is None
    assert ralph_git.show_file(repo, second, "a.txt\nb") is None  # a name the batch format cannot carry


def test_a_reader_that_died_is_replaced(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "one\n"})
    head = git(repo, "rev-parse", "HEAD")
    assert ralph_git.show_file(repo, head, "a.txt") == "one\n"
    os.kill(blobs._READERS[repo].child.pid, signal.SIGKILL)  # noqa: SLF001  (the boundary: git's process)
    (repo / "a.txt").write_text("two\n")
    (repo / "b.txt").write_text("three\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "next")
    head = git(repo, "rev-parse", "HEAD")

    assert ralph_git.show_file(repo, head, "a.txt") == "two\n"  # (read by one process: the reader was dead)
    assert ralph_git.show_file(repo, head, "b.txt") == "three\n"  # by a new reader
    assert blobs._READERS[repo].child.poll() is None  # noqa: SLF001
