"""Repositories as people have them: odd paths, odd bytes, big files, submodules, LFS."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.repos import PY, git, make_repo
from helpers.running import ralph, snapshot

TICK = (
    f"{PY} -c \"import pathlib; t = pathlib.Path('TODO.md'); "
    "t.write_text(t.read_text().replace('- [ ]', '- [x]', 1)); pathlib.Path('work.txt').write_text('w')\""
)


def config(agent: str = TICK, checks=("true",)) -> str:
    return json.dumps({"goal": "g", "agent": {"kind": "command", "command": agent}, "checks": list(checks)})


def test_a_path_with_spaces_and_non_ascii_characters(tmp_path: Path):
    agent = (
        f"{PY} -c \"import pathlib; t = pathlib.Path('TODO.md'); t.write_text(t.read_text().replace('- [ ]', "
        "'- [x]')); pathlib.Path('naïve file ü.txt').write_text('ü')\""
    )
    repo = make_repo(tmp_path / "my répo ü", {"ralph.yaml": config(agent), "TODO.md": "- [ ] écrire ü\n"})
    before = snapshot(repo)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(repo, "show", "ralph/r:naïve file ü.txt") == "ü"
    assert git(repo, "log", "-1", "--format=%s", "ralph/r") == "écrire ü"
    assert snapshot(repo) == before


def test_a_file_named_head_an_assume_unchanged_non_ascii_file_and_a_nul_in_the_todo(tmp_path: Path):
    """Honest repositories that once crashed ralph: git names a ref HEAD, quotes non-ASCII paths
    in listings unless asked not to, and a NUL cannot go into a commit message."""
    agent = (
        f"{PY} -c \"import pathlib; t = pathlib.Path('TODO.md'); t.write_text(t.read_text().replace('- [ ]', "
        "'- [x]', 1)); pathlib.Path('HEAD').write_text('edited'); pathlib.Path('\u00fcber.txt').write_text('2')\""
    )
    repo = make_repo(
        tmp_path / "repo",
        {"ralph.yaml": config(agent), "TODO.md": "- [ ] fix \0 it\n", "HEAD": "a file", "\u00fcber.txt": "1"},
    )
    git(repo, "update-index", "--assume-unchanged", "\u00fcber.txt")
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(repo, "show", "ralph/r:HEAD") == "edited" and git(repo, "show", "ralph/r:\u00fcber.txt") == "2"


def test_bytecode_the_repository_commits_is_kept(tmp_path: Path):
    """ralph deletes bytecode before the checks (a lap could plant it), but not the files the
    commit holds: a lap would otherwise commit their deletion."""
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": config(), "TODO.md": "- [ ] x\n", "fixtures/sample.pyc": "pyc"})
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(repo, "show", "ralph/r:fixtures/sample.pyc") == "pyc"


def test_files_and_output_that_are_not_utf8(tmp_path: Path):
    agent = (
        f"{PY} -c \"import pathlib, sys; pathlib.Path('latin1.txt').write_bytes(b'caf\\xe9\\xff'); "
        "t = pathlib.Path('TODO.md'); t.write_text(t.read_text().replace('- [ ]', '- [x]')); "
        "sys.stdout.buffer.write(b'bytes \\xff\\xfe out')\""
    )
    check = f"{PY} -c \"import sys; sys.stdout.buffer.write(b'check \\xe9\\xff'); sys.exit(0)\""
    repo = make_repo(
        tmp_path / "repo",
        {"ralph.yaml": config(agent, [check]), "TODO.md": "- [ ] x\n", "old-latin1.txt": "placeholder"},
    )
    (repo / "old-latin1.txt").write_bytes(b"\xe9t\xe9\n")
    git(repo, "commit", "-qam", "latin-1 content")
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "check \ufffd\ufffd" in json.loads(ralph(repo, "log", "--json").stdout)["laps"][0]["checks"][0]["output_tail"]
    )
    raw = subprocess.run(["git", "show", "ralph/r:latin1.txt"], cwd=repo, capture_output=True).stdout
    assert raw == b"caf\xe9\xff"
    assert ralph(repo, "show", "1").returncode == 0


def test_a_huge_file_in_the_repository(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": config(), "TODO.md": "- [ ] x\n"})
    (repo / "big.bin").write_bytes(b"\0" * (40 << 20))
    git(repo, "add", "big.bin")
    git(repo, "commit", "-qm", "a 40 MB file")
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("recurse", ["false", "true"])
def test_submodules_are_checked_out_in_lap_workspaces(tmp_path: Path, recurse: str):
    """Also with the user's submodule.recurse, which must not carry ralph's checkout into the
    user's own submodule repository (.git/modules)."""
    library = make_repo(tmp_path / "library", {"lib.txt": "from the submodule\n"})
    repo = make_repo(
        tmp_path / "repo", {"ralph.yaml": config(checks=["test -s vendor/lib/lib.txt"]), "TODO.md": "- [ ] x\n"}
    )
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "vendor/lib")
    git(repo, "commit", "-qm", "a submodule")
    git(repo, "config", "submodule.recurse", recurse)
    modules = {
        str(path): path.read_bytes()
        for path in (repo / ".git" / "modules").rglob("*")
        if path.is_file() and "objects" not in path.parts
    }
    before = snapshot(repo)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert snapshot(repo) == before
    assert {
        str(path): path.read_bytes()
        for path in (repo / ".git" / "modules").rglob("*")
        if path.is_file() and "objects" not in path.parts
    } == modules
    assert subprocess.run(["git", "status"], cwd=repo, capture_output=True).returncode == 0


@pytest.mark.skipif(shutil.which("git-lfs") is not None, reason="git-lfs is installed here")
def test_lfs_without_git_lfs_is_refused_with_advice(tmp_path: Path):
    repo = make_repo(
        tmp_path / "repo",
        {
            "ralph.yaml": config(),
            "TODO.md": "- [ ] x\n",
            ".gitattributes": "*.bin filter=lfs diff=lfs merge=lfs -text\n",
        },
    )
    result = ralph(repo, "run")
    assert result.returncode == 1
    assert "uses Git LFS" in result.stderr and "install git-lfs" in result.stderr


def test_a_user_who_signs_every_commit(tmp_path: Path):
    # Signing through an agent socket that laps never see would fail every lap commit;
    # lap commits are ralph's records and are made unsigned.
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": config(), "TODO.md": "- [ ] x\n"})
    git(repo, "config", "commit.gpgsign", "true")
    git(repo, "config", "gpg.format", "ssh")
    git(repo, "config", "user.signingkey", str(tmp_path / "no-such-key"))
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_excludes_file_named_from_home_keeps_what_it_ignores_out_of_laps(tmp_path: Path, monkeypatch):
    """core.excludesFile as `~/…`, which git reads as a path (the home expanded): what it ignores
    stays out of the lap's commit, as out of the user's."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "ignore-these").write_text("*.log\n")
    monkeypatch.setenv("HOME", str(home))
    agent = TICK.replace("write_text('w')", "write_text('w'); pathlib.Path('debug.log').write_text('noise')")
    repo = make_repo(tmp_path / "repo", {"ralph.yaml": config(agent), "TODO.md": "- [ ] work\n"})
    git(repo, "config", "core.excludesFile", "~/ignore-these")
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    committed = git(repo, "ls-tree", "--name-only", "ralph/r").split()
    assert "work.txt" in committed and "debug.log" not in committed
