"""Attacks on the safety walk's memory (safe_tree.Walked) and on ralph's writes into the lap's git dir.

The walk keeps, per folder, what it found, and lists again only a folder whose (device, inode,
ctime) changed. Each test here settles a tree (its folders over a second old, so the memory
kicks in), walks it, changes it the way a hostile lap could, walks it again with the memory, and
then once from scratch: the walk from scratch must find nothing more to remove, and both must
report the same `.gitignore` and `.gitattributes` files. The last tests are real runs whose
phases plant links in git/, tree/ and their own /tmp and HOME: ralph must write nothing through
them outside its workspace.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.repos import git, make_repo, needs_bwrap
from helpers.running import lap_notes, ralph

from ralph.agents.scripted import ScriptedServer, Step, bash, finish
from ralph.workspace.safe_tree import Walked, make_safe_for_git

_LIBC = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD, _RENAME_EXCHANGE, _AT_SYMLINK_FOLLOW = -100, 2, 0x400
ROOT = os.geteuid() == 0


def exchange(one: Path, other: Path) -> None:
    """renameat2(RENAME_EXCHANGE): two names swapped in one step, neither ever missing."""
    if _LIBC.renameat2(_AT_FDCWD, bytes(one), _AT_FDCWD, bytes(other), _RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), f"renameat2 {one} {other}")


def tmpfile_linked(folder: Path, name: str, data: bytes) -> None:
    """A file made unnamed (O_TMPFILE), written, then given its name with linkat."""
    fd = os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o644)
    try:
        os.write(fd, data)
        if _LIBC.linkat(_AT_FDCWD, f"/proc/self/fd/{fd}".encode(), _AT_FDCWD, bytes(folder / name), _AT_SYMLINK_FOLLOW):
            raise OSError(ctypes.get_errno(), "linkat")
    finally:
        os.close(fd)


def settled_tree(tree: Path, folders: int) -> Path:
    """`folders` folders of a module each, and a nested repository, over a second old."""
    for n in range(folders):
        (tree / f"d{n}" / "sub").mkdir(parents=True)
        (tree / f"d{n}" / "module.py").write_text(f"VALUE = {n}\n")
        (tree / f"d{n}" / "sub" / "inner.py").write_text("\n")
    subprocess.run(["git", "init", "-q", str(tree / "nested")], check=True)
    subprocess.run(["git", "-C", str(tree / "nested"), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    time.sleep(Walked.SETTLED_NS / 1e9 + 0.1)
    return tree


def everything(tree: Path) -> list[tuple[str, int]]:
    """Every path under `tree` with its file type: what a walk removed shows here."""
    found = []
    for folder, folders, files in os.walk(tree):
        for name in (*folders, *files):
            path = os.path.join(folder, name)
            found.append((os.path.relpath(path, tree), os.lstat(path).st_mode >> 12))
    return sorted(found)


def walks_as_from_scratch(tree: Path, lap_git: Path, plant: Callable[[], None]) -> tuple[object, Walked]:
    """Walk `tree` (folders kept), `plant`, walk again with the memory, then from scratch: the
    walk from scratch must remove nothing more, and report what the walk with memory reported."""
    walked = Walked(tree)
    assert walked.kept, "the tree's file system keeps no memory: the test would prove nothing"
    make_safe_for_git(tree, lap_git, walked)
    assert str(tree / "d1") in walked.folders  # kept: the memory is used at the next walk
    plant()
    remembered = make_safe_for_git(tree, lap_git, walked)
    left = everything(tree)
    fresh = make_safe_for_git(tree, lap_git, Walked(tree))
    assert everything(tree) == left, "a walk from scratch removed what the walk with memory left"
    assert fresh == remembered
    return remembered, walked


def exotic_plants(tree: Path, outside: Path) -> Callable[[], None]:
    """One plant per settled folder, each by a way of changing a folder's entries other than a
    plain create: the walk must still find each."""
    outside.mkdir(exist_ok=True)

    def plant() -> None:
        # d1: a `.git` folder (no repository) swapped in for a file by RENAME_EXCHANGE, from a folder
        # made elsewhere (the swap is one step; no entry of d1 is ever missing).
        (outside / "fake" / ".git").mkdir(parents=True)
        (outside / "fake" / ".git" / "hidden.py").write_text("HIDDEN = 1\n")
        exchange(tree / "d1" / "module.py", outside / "fake" / ".git")
        # d2: its `.gitignore` swapped for a FIFO made outside the folder.
        os.mkfifo(outside / "fifo")
        (tree / "d2" / ".gitignore").write_text("module.py\n")
        time.sleep(0.01)
        exchange(tree / "d2" / ".gitignore", outside / "fifo")
        # d3: a hard link to a file elsewhere in the tree, as `.gitignore` (rules hiding module.py).
        (outside / "rules").write_text("module.py\n")
        os.link(outside / "rules", tree / "d3" / ".gitignore")
        # d4: O_TMPFILE, then linkat: the file has its name only once it is whole.
        tmpfile_linked(tree / "d4", ".gitattributes", b"* ident\n")
        # d5: a FIFO `.gitmodules` made with mknod.
        os.mknod(tree / "d5" / ".gitmodules", 0o644 | 0o010000)
        # d6: a `.git` link leading outside tree/ and git/, then the folder's times set back.
        before = os.lstat(tree / "d6")
        os.symlink(outside, tree / "d6" / ".git")
        os.utime(tree / "d6", ns=(before.st_atime_ns, before.st_mtime_ns))
        # d7: an xattr on the folder, then a `.git` planted in its unchanged subfolder.
        with contextlib.suppress(OSError):  # (a file system without user xattrs)
            os.setxattr(tree / "d7", "user.ralph", b"x")
        (tree / "d7" / "sub" / ".git").mkdir()
        # d8: its subfolder moved out, filled, and moved back: same inode, same names above it.
        try:
            os.rename(tree / "d8" / "sub", outside / "sub8")
        except OSError as error:  # an overlay without redirect_dir moves no lower folder
            assert error.errno == errno.EXDEV
            (tree / "d8" / "sub" / ".git").mkdir()
        else:
            (outside / "sub8" / ".git").mkdir()
            os.rename(outside / "sub8", tree / "d8" / "sub")
        # d9: chmod 000 on a folder then a `.gitignore` in it (ralph, as root or not, must see it).
        (tree / "d9" / "sub" / ".gitignore").write_text("inner.py\n")
        os.chmod(tree / "d9" / "sub", 0)
        # nested: the branch its HEAD names made a FIFO, the repository's folder untouched.
        git_dir = tree / "nested" / ".git"
        ref = git_dir / (git_dir / "HEAD").read_text().removeprefix("ref:").strip()
        ref.unlink()
        os.mkfifo(ref)

    return plant


def check_exotic(tree: Path, reads: object) -> None:
    assert not (tree / "d1" / ".git").exists()
    assert not os.path.lexists(tree / "d2" / ".gitignore")  # the FIFO
    assert not os.path.lexists(tree / "d5" / ".gitmodules")
    assert not os.path.lexists(tree / "d6" / ".git")
    assert not (tree / "d7" / "sub" / ".git").exists() and not (tree / "d8" / "sub" / ".git").exists()
    assert not os.path.lexists(tree / "nested" / ".git")
    assert {"d3/.gitignore", "d9/sub/.gitignore"} <= set(reads.ignores) and reads.attributes  # type: ignore[attr-defined]


def test_exchanges_links_tmpfiles_and_set_back_times_do_not_fool_the_memory_on_ext4(tmp_path: Path):
    """Held: every way of changing a folder's entries sets its ctime (renameat2 exchanges, link,
    O_TMPFILE + linkat, mknod, a link whose folder's times are set back, a subfolder moved out and
    back); the walk with memory removes and reports what a walk from scratch does."""
    tree = settled_tree(tmp_path / "tree", 10)
    reads, _ = walks_as_from_scratch(tree, tmp_path / "git", exotic_plants(tree, tmp_path / "outside"))
    check_exotic(tree, reads)


@contextlib.contextmanager
def on_tmpfs() -> Iterator[Path]:
    folder = Path("/dev/shm") / f"ralph-walk-{os.getpid()}-{time.time_ns()}"
    folder.mkdir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK), reason="no /dev/shm")
def test_the_same_on_tmpfs(tmp_path: Path):
    """Held: a tree on tmpfs (in the allow-list), the same plants."""
    with on_tmpfs() as top:
        tree = settled_tree(top / "tree", 10)
        reads, _ = walks_as_from_scratch(tree, top / "git", exotic_plants(tree, top / "outside"))
        check_exotic(tree, reads)


@contextlib.contextmanager
def overlay(tmp_path: Path) -> Iterator[Path]:
    for name in ("lower", "upper", "work", "merged"):
        (tmp_path / name).mkdir()
    lower = tmp_path / "lower"
    for n in range(10):  # the tree in the lower layer: folders not copied up until changed
        (lower / "tree" / f"d{n}" / "sub").mkdir(parents=True)
        (lower / "tree" / f"d{n}" / "module.py").write_text("\n")
        (lower / "tree" / f"d{n}" / "sub" / "inner.py").write_text("\n")
    subprocess.run(["git", "init", "-q", str(lower / "tree" / "nested")], check=True)
    subprocess.run(
        ["git", "-C", str(lower / "tree" / "nested"), "commit", "-q", "--allow-empty", "-m", "x"], check=True
    )
    options = f"lowerdir={lower},upperdir={tmp_path / 'upper'},workdir={tmp_path / 'work'}"
    mounted = subprocess.run(
        ["mount", "-t", "overlay", "overlay", "-o", options, str(tmp_path / "merged")], check=False
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount an overlay here")
    try:
        yield tmp_path / "merged"
    finally:
        subprocess.run(["umount", "-l", str(tmp_path / "merged")], check=False)


@pytest.mark.skipif(not ROOT, reason="mounting an overlay takes root")
def test_the_same_on_an_overlay_whose_folders_are_copied_up_by_the_plants(tmp_path: Path):
    """Held: on overlayfs, a folder still in the lower layer at the first walk is copied up by
    the plant: its ctime (the upper folder's) changes with it."""
    with overlay(tmp_path) as merged:
        tree = merged / "tree"
        time.sleep(Walked.SETTLED_NS / 1e9 + 0.1)
        reads, _ = walks_as_from_scratch(tree, merged / "git", exotic_plants(tree, merged / "outside"))
        check_exotic(tree, reads)


@pytest.mark.skipif(not ROOT, reason="bind mounts take root")
def test_a_bind_mount_over_a_settled_folder_is_seen(tmp_path: Path):
    """Held: a folder (holding a `.git` that is no repository) bound over a settled one (the
    unsandboxed root lap's host namespace): the path's device and inode change, it is listed."""
    tree = settled_tree(tmp_path / "tree", 3)
    (tmp_path / "other" / ".git").mkdir(parents=True)
    mounted: list[Path] = []

    def plant() -> None:
        subprocess.run(["mount", "--bind", str(tmp_path / "other"), str(tree / "d1" / "sub")], check=True)
        mounted.append(tree / "d1" / "sub")

    try:
        walks_as_from_scratch(tree, tmp_path / "git", plant)
        assert not (tree / "d1" / "sub" / ".git").exists()
    finally:
        for point in mounted:
            subprocess.run(["umount", str(point)], check=False)


@pytest.mark.skipif(not ROOT, reason="bind mounts take root")
@pytest.mark.xfail(
    strict=True,
    reason="a FIFO bound over a settled folder's .gitignore (unsandboxed lap as root): the walk with "
    "memory never looks at it (git then waits on it), the walk from scratch dies on EBUSY",
)
def test_a_fifo_bound_over_a_settled_gitignore_is_neither_missed_nor_fatal(tmp_path: Path):
    tree = settled_tree(tmp_path / "tree", 3)
    (tree / "d1" / ".gitignore").write_text("x\n")
    os.mkfifo(tmp_path / "fifo")
    time.sleep(Walked.SETTLED_NS / 1e9 + 0.1)
    walked = Walked(tree)
    make_safe_for_git(tree, tmp_path / "git", walked)
    target = tree / "d1" / ".gitignore"
    subprocess.run(["mount", "--bind", str(tmp_path / "fifo"), str(target)], check=True)
    try:
        remembered = make_safe_for_git(tree, tmp_path / "git", walked)
        fresh = make_safe_for_git(tree, tmp_path / "git", Walked(tree))  # raised OSError EBUSY
        assert remembered == fresh
        assert not os.path.exists(target) or os.path.isfile(target)  # no FIFO left for git to open
    finally:
        subprocess.run(["umount", str(target)], check=False)


def test_a_folder_deleted_and_made_again_at_once_keeps_no_memory(tmp_path: Path):
    """Held: a settled folder replaced in the same instant by a new one that may take its inode
    number (ext4 reuses them): the new ctime is less than a second old, so it is listed."""
    tree = settled_tree(tmp_path / "tree", 3)

    def plant() -> None:
        shutil.rmtree(tree / "d1" / "sub")
        (tree / "d1" / "sub").mkdir()
        (tree / "d1" / "sub" / ".git").mkdir()

    walks_as_from_scratch(tree, tmp_path / "git", plant)
    assert not (tree / "d1" / "sub" / ".git").exists()


def test_paths_of_odd_bytes_are_remembered_and_walked_the_same(tmp_path: Path):
    """Held: folder names with newlines, invalid UTF-8 and a name that is `.git` with a suffix."""
    tree = settled_tree(tmp_path / "tree", 2)
    odd = os.fsdecode(b"a\nb\xff\xfe")
    (tree / "d0" / odd / ".git.").mkdir(parents=True)
    time.sleep(Walked.SETTLED_NS / 1e9 + 0.1)

    def plant() -> None:
        (tree / "d0" / odd / ".git").mkdir()
        (tree / "d0" / odd / ".gitignore").write_text("*\n")

    reads, _ = walks_as_from_scratch(tree, tmp_path / "git", plant)
    assert not (tree / "d0" / odd / ".git").exists() and (tree / "d0" / odd / ".git.").exists()
    assert os.path.join("d0", odd, ".gitignore") in reads.ignores  # type: ignore[attr-defined]


# --- real runs ------------------------------------------------------------------------

EXCHANGE_PLANT = r"""
import ctypes, os, sys, time
lap = os.environ["RALPH_LAP"]
if lap == "1":
    time.sleep(1.3)  # the folders settle: lap 2's walks take their names from lap 1's
else:
    libc = ctypes.CDLL(None, use_errno=True)
    def exchange(a, b):
        assert libc.renameat2(-100, a.encode(), -100, b.encode(), 2) == 0, ctypes.get_errno()
    os.makedirs("stage/.git")
    open("stage/y.py", "w").write("\n")
    open("stage/.git/evil.py", "w").write("EVIL = 1\n")
    exchange("other", "stage")  # other/: another folder, with a `.git` that is no repository
    exchange("other/y.py", "stage/y.py")  # (the old folder's file back, in one more step)
    open("pkg/hidden.py", "w").write("HIDDEN = 1\n")
    fd = os.open("pkg", os.O_TMPFILE | os.O_WRONLY, 0o644)
    os.write(fd, b"hidden.py\n")
    assert libc.linkat(-100, f"/proc/self/fd/{fd}".encode(), -100, b"pkg/.gitignore", 0x400) == 0
    os.mknod("deep/er/.gitmodules", 0o644 | 0o010000)  # a FIFO
"""


@pytest.mark.parametrize("mode", [pytest.param("required", marks=needs_bwrap), "off"])
def test_a_lap_that_settles_then_plants_by_exchange_and_linkat_reaches_no_check(tmp_path: Path, mode: str):
    """Held: lap 1 lets its folders settle; lap 2 swaps a folder holding a `.git` folder for a
    settled one by RENAME_EXCHANGE, names a `.gitignore` (hiding a module it made) by O_TMPFILE +
    linkat and mknods a FIFO `.gitmodules`, each in a folder lap 1's walks kept. None of it
    reaches the checks."""
    agent = f"python3 {tmp_path / 'plant.py'} && echo $RALPH_LAP >> work.txt && sed -i '0,/\\[ \\]/s//[x]/' TODO.md"
    (tmp_path / "plant.py").write_text(EXCHANGE_PLANT)
    checks = ["test ! -e other/.git && test ! -e pkg/hidden.py && test ! -p deep/er/.gitmodules"]
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "checks": checks,
        "strict": False,
        "sandbox": {"mode": mode, "readable": [str(tmp_path / "plant.py")]},
    }
    files = {
        "ralph.yaml": json.dumps(config),
        "TODO.md": "- [ ] a\n- [ ] b (may change: pkg/.gitignore)\n",
        "pkg/mod.py": "VALUE = 1\n",
        "other/y.py": "\n",
        "deep/er/z.py": "\n",
    }
    repo = make_repo(tmp_path / "repo", files)
    result = ralph(repo, "run", "--name", "r", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    laps = lap_notes(repo, "r")
    assert [lap["status"] for lap in laps] == ["green", "green"], laps
    held = git(repo, "ls-tree", "-r", "--name-only", laps[-1]["commit"])
    assert "evil.py" not in held and "pkg/hidden.py" not in held


PHASE_PLANT = r"""
set -u
phase=$1; v={victims}
d="$(dirname "$PWD")/git"  # the workspace's git/, beside tree/ (a phase's cwd)
[ -d "$d" ] && [ "$(basename "$PWD")" = tree ] || exit 0
for name in HEAD config index packed-refs COMMIT_EDITMSG shallow ORIG_HEAD FETCH_HEAD description; do
  rm -rf "$d/$name"; ln -s "$v/file" "$d/$name"
done
for name in modules objects refs hooks logs; do rm -rf "$d/$name"; ln -s "$v/folder" "$d/$name"; done
rm -rf "$d/info"
case $phase in
  setup|checks) ln -s "$v/folder" "$d/info" ;;
  *) mkdir -p "$d/info" && ln -s "$v/file" "$d/info/exclude" ;;
esac
rm -f .git; ln -s "$v/file" .git
for name in ralph-agent-report ralph-task.yaml; do rm -rf "/tmp/$name"; ln -s "$v/file" "/tmp/$name"; done
rm -rf "$HOME/.codex" "$HOME/.claude"; ln -s "$v/folder" "$HOME/.codex"; ln -s "$v/folder" "$HOME/.claude"
echo "planted in $phase: $(find "$d" .git -maxdepth 2 -type l | wc -l) links"
exit 0
"""


@needs_bwrap
def test_links_every_phase_leaves_in_git_tree_and_its_scratch_lead_ralph_nowhere(tmp_path: Path):
    """Held: setup, the agent, the commit hooks and the checks each replace git/'s files and
    folders (HEAD, config, index, info/ or info/exclude, modules/, objects/, refs/, hooks/...),
    tree/.git, and their /tmp's and HOME's files ralph reads by name, by links to a file and a
    folder outside the sandbox. ralph writes nothing through them."""
    victims = tmp_path / "victims"
    (victims / "folder").mkdir(parents=True)
    (victims / "file").write_text("precious\n")
    plant = tmp_path / "plant.sh"
    plant.write_text(PHASE_PLANT.format(victims=victims))
    agent = f"sh {plant} agent; echo x >> work.txt && sed -i '0,/\\[ \\]/s//[x]/' TODO.md"
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "setup": [f"sh {plant} setup"],
        "checks": [f"sh {plant} checks"],
        "limits": {"max_laps": 2},
        "sandbox": {"mode": "required", "readable": [str(plant)]},
    }
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] a\n- [ ] b\n"})
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\nsh {plant} hook\n")
    hook.chmod(0o755)
    result = ralph(repo, "run", "--name", "r", timeout=120)
    assert (victims / "file").read_text() == "precious\n", result.stdout + result.stderr
    assert list((victims / "folder").iterdir()) == [], result.stdout + result.stderr
    assert lap_notes(repo, "r"), result.stdout + result.stderr  # the laps ran (the plants with them)
    logs = [path.read_text(errors="replace") for path in (repo / ".git" / "ralph").rglob("*.log")]
    planted = {line for log in logs for line in log.splitlines() if line.startswith("planted in ")}
    assert {f"planted in {phase}: 16 links" for phase in ("setup", "agent", "hook", "checks")} <= planted, planted


def test_a_fifo_planted_after_a_finish_that_changed_nothing_does_not_stall_ralphs_git(tmp_path: Path):
    """The built-in agent's finish asks ralph's own git whether the tree changed (`_check_now`:
    `git status`), which walks the tree first only when `unchecked`. The agent's jail is made
    once, so a first finish with no change (no checks run, nothing sets `unchecked` again) leaves
    the flag down: a FIFO `.gitignore` the agent's bash makes next is met unwalked by the second
    finish's `git status`, which waits on it (its timeout: 600 s)."""
    script: list[Step] = [finish("nothing to do"), bash("mkfifo .gitignore"), finish("planted"), finish("again")]
    with ScriptedServer(script) as server:
        config = {
            "goal": "g",
            "agent": {"kind": "openai", "model": "scripted-1", "base_url": server.base_url, "fix_attempts": 2},
            "checks": ["true"],
            "limits": {"max_laps": 1},
        }
        repo = make_repo(tmp_path / "repo", {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] x\n"})
        run = subprocess.Popen(
            [sys.executable, "-m", "ralph", "run", "--name", "o"], cwd=repo, stdout=subprocess.PIPE, text=True
        )
        try:
            run.wait(timeout=25)
            stalled = False
        except subprocess.TimeoutExpired:
            stalled = True
            workspaces = Path(os.environ["HOME"]) / ".cache" / "ralph" / "workspaces"
            for fifo in workspaces.glob("*/tree/.gitignore"):  # let the waiting git go on
                with contextlib.suppress(OSError):
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            try:
                run.wait(timeout=60)
            except subprocess.TimeoutExpired:
                run.kill()
                run.wait()
    assert not stalled, "ralph's own git waited on the lap's FIFO .gitignore"


@needs_bwrap
def test_a_nested_repositorys_ref_linked_to_proc_self_mem_neither_crashes_ralph_nor_its_resume(tmp_path: Path):
    """A sandboxed lap makes a repository whose branch is a link to /proc/self/mem (any path: the
    link is only a string inside the sandbox). The walk must drop that `.git` (it leads outside
    tree/ and git/), not read ralph's own memory through it."""
    agent = (
        "git init -q sub && ln -s /proc/self/mem \"sub/.git/$(sed 's/ref: //' sub/.git/HEAD)\";"
        " echo x >> work.txt; sed -i 's/\\[ \\]/[x]/' TODO.md"
    )
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": agent},
        "checks": ["true"],
        "limits": {"max_laps": 1},
        "sandbox": "required",
    }
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] x\n"})
    first = ralph(repo, "run", "--name", "r", env={})  # (a process of its own: the crash ends it)
    again = ralph(repo, "run", "--name", "r", env={})
    for result in (first, again):
        assert "internal error" not in result.stdout + result.stderr, result.stdout + result.stderr
