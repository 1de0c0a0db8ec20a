"""The safety walk lists again only the folders that changed, and misses nothing a lap did.

ralph walks a lap's tree twice a lap before its own git meets it (ralph/workspace/safe_tree.py).
A folder whose device, inode and ctime are unchanged since a walk holds the same entries, so
the next walk takes its names from the last one. Each test here changes a tree after a walk
in a way a hostile lap would, and the next walk must see it as a first walk would.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from helpers.repos import git, make_repo
from helpers.running import lap_notes, ralph

from ralph.workspace.safe_tree import Walked, make_safe_for_git


def settled_tree(top: Path, folders: int) -> Path:
    """A tree of `folders` folders of a module each, a nested repository among them, old
    enough that a walk keeps what it lists."""
    tree = top / "tree"
    for n in range(folders):
        (tree / f"d{n}").mkdir(parents=True)
        (tree / f"d{n}" / "module.py").write_text(f"VALUE = {n}\n")
    subprocess.run(["git", "init", "-q", str(tree / "d0" / "nested")], check=True)
    subprocess.run(["git", "-C", str(tree / "d0" / "nested"), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    time.sleep(Walked.SETTLED_NS / 1e9 + 0.1)
    return tree


def test_a_walk_lists_again_only_what_changed_and_misses_no_plant(tmp_path: Path):
    tree = settled_tree(tmp_path, 30)
    walked = Walked(tree)
    first = make_safe_for_git(tree, tmp_path / "git", walked)
    assert first.ignores == [] and not first.attributes
    assert str(tree / "d5") in walked.folders  # kept: unchanged for over a second

    os.mkdir(tree / "d1" / ".git")  # no repository: what is in it git never sees
    (tree / "d1" / ".git" / "hidden.py").write_text("VALUE = 'hidden'\n")
    os.mkfifo(tree / "d2" / ".gitignore")  # git would wait on it for ever
    (tree / "d3" / ".gitignore").write_text("module.py\n")
    (tree / "d4" / ".gitattributes").write_text("* ident\n")
    (tree / "d6" / "made" / ".git").mkdir(parents=True)  # a new folder in a settled one is walked into
    nested = tree / "d0" / "nested" / ".git"
    (nested / "HEAD").unlink()
    os.mkfifo(nested / "HEAD")  # in a folder (d0/nested) whose entries did not change
    reads = make_safe_for_git(tree, tmp_path / "git", walked)

    assert not (tree / "d1" / ".git").exists() and not (tree / "d2" / ".gitignore").exists()
    assert not (tree / "d6" / "made" / ".git").exists()
    assert not nested.exists() and (tree / "d0" / "nested").is_dir()
    assert reads.ignores == ["d3/.gitignore"] and reads.attributes
    assert str(tree / "d6" / "made") not in walked.folders  # changed just now: listed again next time
    assert str(tree / "d5") in walked.folders and str(tree / "d1") not in walked.folders


def test_a_folder_replaced_by_another_with_the_same_names_is_listed_again(tmp_path: Path):
    """Same path, same names, another folder (inode): what is in it is looked at anew."""
    tree = settled_tree(tmp_path, 3)
    walked = Walked(tree)
    make_safe_for_git(tree, tmp_path / "git", walked)
    os.rename(tree / "d1", tmp_path / "old")
    (tree / "d1").mkdir()
    (tree / "d1" / "module.py").write_text("VALUE = 1\n")
    os.mkdir(tree / "d1" / ".git")
    make_safe_for_git(tree, tmp_path / "git", walked)
    assert not (tree / "d1" / ".git").exists()


def test_a_plant_in_a_folder_unchanged_for_seconds_never_reaches_the_checks(tmp_path: Path):
    """Lap 1 lets its folders settle (a second), so lap 2's walks take their names from lap 1's;
    lap 2 plants a `.git` folder in one: it is gone before the checks all the same."""
    agent = (
        'if [ "$RALPH_LAP" = 1 ]; then sleep 1.2; else mkdir pkg/.git && echo x > pkg/.git/mod.py; fi;'
        " echo $RALPH_LAP >> work.txt && sed -i '0,/\\[ \\]/s//[x]/' TODO.md"
    )
    config = {"goal": "g", "agent": {"kind": "command", "command": agent}, "checks": ["test ! -e pkg/.git"]}
    files = {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] a\n- [ ] b\n", "pkg/mod.py": "VALUE = 1\n"}
    repo = make_repo(tmp_path / "repo", files)
    result = ralph(repo, "run", "--name", "r", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    laps = lap_notes(repo, "r")
    assert [lap["status"] for lap in laps] == ["green", "green"], laps
    assert "pkg/.git/mod.py" not in git(repo, "ls-tree", "-r", "--name-only", laps[-1]["commit"])


def test_nothing_is_kept_on_a_file_system_not_known_to_keep_ctimes(tmp_path: Path):
    assert Walked(tmp_path).kept  # the tests' own: a local one
    assert not Walked(Path("/proc/self")).kept and not Walked(Path("/sys")).kept
