"""What a phase leaves is caught where the file system keeps times to the second: ext4 with
128-byte inodes (old file systems, some images) gives a file written, or a folder made again,
within the second ralph made it the same ctime. ralph keeps a file or folder from one phase to
the next only when all the next phase could tell apart is as made (ralph/isolation/as_made.py)
and its content is: never on the ctime alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.repos import make_repo

from ralph.isolation import sandbox
from ralph.workspace import lap_git_dir


@pytest.fixture
def coarse(tmp_path: Path) -> Iterator[Path]:
    """A folder on an ext4 file system whose times have a resolution of one second."""
    image, folder = tmp_path / "coarse.img", tmp_path / "coarse"
    folder.mkdir()
    with open(image, "wb") as file:
        file.truncate(32 << 20)
    made = shutil.which("mkfs.ext4") and subprocess.run(
        ["mkfs.ext4", "-q", "-F", "-I", "128", str(image)], capture_output=True
    )
    if not made or made.returncode != 0:
        pytest.skip("no mkfs.ext4 here")
    if subprocess.run(["mount", "-o", "loop", str(image), str(folder)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a loop device here (not root, or no loop devices)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def _within_one_second(make, tamper, path: Path) -> bool:
    """`make()` then `tamper()` until both fell in one second (the same ctime on this file
    system); whether they did."""
    for _ in range(20):
        while time.time() % 1 > 0.5:  # early in a second: both fit in it
            time.sleep(0.05)
        make()
        before = os.lstat(path).st_ctime_ns
        tamper()
        if os.lstat(path).st_ctime_ns == before:
            return True
    return False


def test_a_git_dir_file_the_agent_rewrote_within_the_second_is_written_anew(coarse: Path, tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    lap_git, tree = coarse / "git", coarse / "tree"
    lap_git.mkdir()
    tree.mkdir()
    config = "[core]\n\tbare = false\n"

    def make() -> None:
        lap_git_dir.make(
            lap_git,
            tree,
            "0" * 40,
            common_dir=repo / ".git",
            tags="",
            config=config,
            index=coarse / "none",
            keep_modules=False,
        )

    def tamper() -> None:
        (lap_git / "config").write_text('[core]\n\tfsmonitor = "touch PWNED"\n')
        (tree / ".git").write_text("gitdir: /elsewhere\n")

    assert _within_one_second(make, tamper, lap_git / "config"), "never within one second"
    make()
    assert (lap_git / "config").read_text() == config
    assert (tree / ".git").read_text() == f"gitdir: {lap_git}\n"


def test_an_attribute_left_on_tmp_within_the_second_is_not_in_the_next_phase(coarse: Path):
    scratch = coarse / "scratch"

    def tamper() -> None:
        os.setxattr(scratch / "tmp", "user.verdict", b"pass")

    assert _within_one_second(lambda: sandbox.phase_jail(scratch, coarse), tamper, scratch / "tmp")
    sandbox.phase_jail(scratch, coarse)
    assert os.listxattr(scratch / "tmp") == []
