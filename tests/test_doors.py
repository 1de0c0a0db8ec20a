"""No door back from the lap through ralph's own git, and a workspace that is the repository.

ralph runs git outside the sandbox on what a lap left: to stage it, to see what setup changed,
to clean. Each test here is a hostile lap that plants, in the places git reads, something that
would run if ralph's git read it, each writing a marker at a path the lap itself cannot write
(outside its sandbox); the markers must never appear.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from helpers.repos import SANDBOX_MODES, git, make_repo, needs_bwrap
from helpers.running import lap_notes, ralph, snapshot

# Everything git could run from a repository's config, each a command that leaves a marker.
PLANTS = """
set -e
mark() {{ printf '#!/bin/sh\\ntouch {out}/%s\\ncat\\n' "$1" > "$2" && chmod +x "$2"; }}
plant() {{  # $1: a git dir, $2: its work tree
  d=$1
  mkdir -p $d/planted/hooks
  mark clean $d/planted/clean; mark smudge $d/planted/smudge; mark textconv $d/planted/textconv
  mark fsmonitor $d/planted/fsmonitor; mark included $d/planted/included
  printf '#!/bin/sh\\ntouch {out}/process\\nexit 1\\n' > $d/planted/process && chmod +x $d/planted/process
  for hook in post-index-change pre-commit post-checkout reference-transaction; do
    mark "hook-$hook" $d/planted/hooks/$hook
  done
  git config -f $d/config filter.evil.clean $d/planted/clean
  git config -f $d/config filter.evil.smudge $d/planted/smudge
  git config -f $d/config filter.proc.process $d/planted/process
  git config -f $d/config diff.evil.textconv $d/planted/textconv
  git config -f $d/config core.fsmonitor $d/planted/fsmonitor
  git config -f $d/config core.hooksPath $d/planted/hooks
  printf '[filter "inc"]\\n\\tclean = %s\\n' $d/planted/included > $d/planted/include.cfg
  git config -f $d/config include.path $d/planted/include.cfg
  printf '* filter=evil diff=evil\\n*.p filter=proc\\n*.i filter=inc\\n' > $2/.gitattributes
}}
"""


def one_lap(path: Path, agent: str, files: dict[str, str] | None = None, **settings: object) -> Path:
    """A repository whose one lap runs the command agent `agent`; `settings` go into ralph.yaml
    over one that checks `true` (a `protect` of [] lets the lap change git's own files)."""
    config = {"goal": "g", "agent": {"kind": "command", "command": agent}, "checks": ["true"], **settings}
    config["limits"] = {"max_laps": 1}
    return make_repo(path, {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] x\n", **(files or {})})


@needs_bwrap
def test_a_submodules_git_dir_runs_nothing_of_the_laps_outside_the_sandbox(tmp_path: Path):
    """The red team's door: a lap writes filters, an fsmonitor, hooks and an include into its
    submodule's git dir and edits the submodule's files, so that a `git status` in the submodule
    (which `git add -A` and `git diff-files` start for a submodule whose HEAD did not move) would
    run them unsandboxed. A new commit in another submodule is still what the lap commit records."""
    out = tmp_path / "outside"
    out.mkdir()
    agent = tmp_path / "agent.sh"
    agent.write_text(
        PLANTS.format(out=out)
        + """
sub=$(git -C vendor/lib rev-parse --absolute-git-dir)
plant "$sub" vendor/lib
echo changed > vendor/lib/lib.txt; echo p > vendor/lib/x.p; echo i > vendor/lib/x.i
git -C vendor/two commit -q --allow-empty -m bump
git -C vendor/two rev-parse HEAD > bumped.txt
plant "$(git rev-parse --absolute-git-dir)" .
echo changed > main.txt
sed -i 's/\\[ \\]/[x]/' TODO.md
"""
    )
    library = make_repo(tmp_path / "library", {"lib.txt": "library\n"})
    repo = one_lap(tmp_path / "repo", f"sh {agent}", {"main.txt": "\n"}, setup=["true"], sandbox="required", protect=[])
    for name in ("lib", "two"):
        git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), f"vendor/{name}")
    git(repo, "commit", "-qm", "submodules")
    before = snapshot(repo)
    ralph(repo, "run", "--name", "r")
    assert sorted(path.name for path in out.iterdir()) == []
    assert snapshot(repo) == before
    (lap,) = lap_notes(repo, "r")
    commit = lap["commit"]
    bumped = git(repo, "show", f"{commit}:bumped.txt").strip()
    assert git(repo, "ls-tree", commit, "vendor/two").split()[2] == bumped  # the submodule's new commit
    assert git(repo, "show", f"{commit}:main.txt") == "changed"  # no clean filter ran on it


@needs_bwrap
def test_setups_links_in_the_laps_git_dir_lead_ralphs_writes_nowhere(tmp_path: Path):
    """Setup runs code the lap wrote (an in-tree build backend, a Makefile) with git/ writable,
    before ralph writes the lap's excludes there: a link planted in place of info/exclude, or of
    info/, must not lead that write outside the sandbox (it truncated the file it pointed at)."""
    victims = tmp_path / "victims"
    (victims / "folder").mkdir(parents=True)
    (victims / "file.txt").write_text("precious\n")
    plant = f"""d=$(git rev-parse --absolute-git-dir)
if [ -e kept.txt ]; then rm -rf "$d/info" && ln -s {victims / "folder"} "$d/info"
else mkdir -p "$d/info" && rm -f "$d/info/exclude" && ln -s {victims / "file.txt"} "$d/info/exclude"; fi
echo made > made.txt"""
    agent = "touch kept.txt; echo x >> work.txt && sed -i 's/\\[ \\]/[x]/' TODO.md"
    repo = one_lap(tmp_path / "repo", agent, {"plant.sh": plant, ".gitignore": "made.txt\n"}, setup=["sh plant.sh"])
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (victims / "file.txt").read_text() == "precious\n"
    assert list((victims / "folder").iterdir()) == []


@needs_bwrap
def test_the_laps_gitattributes_cannot_name_a_filter_of_the_users(tmp_path: Path):
    """The user's own repository config defines filters (nbstripout, a script of theirs); ralph's
    git on a lap's files reads no config but its own, so a `.gitattributes` the lap writes cannot
    put the lap's script, or anything, through them outside the sandbox."""
    out = tmp_path / "outside"
    out.mkdir()
    agent = (
        f"printf '#!/bin/sh\\ntouch {out}/relative\\ncat\\n' > clean.sh && chmod +x clean.sh && "
        "printf '* filter=mine diff=mine\\n' > .gitattributes && echo changed > main.txt && "
        "sed -i 's/\\[ \\]/[x]/' TODO.md"
    )
    files = {"main.txt": "\n", "TODO.md": "- [ ] x (may change: .gitattributes)\n"}  # the user's grant
    repo = one_lap(tmp_path / "repo", agent, files, setup=["true"], sandbox="required", protect=[])
    git(repo, "config", "filter.mine.clean", "./clean.sh")
    git(repo, "config", "filter.mine.smudge", f"sh -c 'touch {out}/smudge; cat'")
    git(repo, "config", "diff.mine.textconv", f"sh -c 'touch {out}/textconv; cat'")
    assert ralph(repo, "run", "--name", "r").returncode == 0
    assert sorted(path.name for path in out.iterdir()) == []
    (lap,) = lap_notes(repo, "r")
    assert subprocess.run(["git", "show", f"{lap['commit']}:main.txt"], cwd=repo, capture_output=True).stdout == (
        b"changed\n"
    )
    # Landing would check the lap's .gitattributes out into the user's tree, and git would then
    # run their drivers, the lap's clean.sh among them, as the user: land refuses.
    head = git(repo, "rev-parse", "HEAD")
    landed = ralph(repo, "land", "--run", "r")
    assert landed.returncode == 1 and "which chooses the files your git config's" in landed.stderr
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == ""
    assert sorted(path.name for path in out.iterdir()) == []


def test_laps_setup_and_checks_see_the_repositorys_tags(tmp_path: Path):
    """setuptools-scm, hatch-vcs and versioneer version a package by `git describe`: without the
    user's tags a lap's build is 0.1.dev…, and a dependency resolver may pick ancient pins."""
    describe = "git describe --tags"
    checks = [f"{describe} | grep -q '^v1.2.3-[12]-g'", f'test "$({describe} --abbrev=0)" = v1.2.3']
    agent = f"{describe} > agent.txt && sed -i 's/\\[ \\]/[x]/' TODO.md"
    repo = one_lap(tmp_path / "repo", agent, setup=[describe], checks=checks)
    git(repo, "tag", "-a", "v1.2.3", "-m", "release")
    git(repo, "commit", "-q", "--allow-empty", "-m", "after the release")
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "green"
    assert git(repo, "show", f"{lap['commit']}:agent.txt").startswith("v1.2.3-1-g")
    assert git(repo, "tag") == "v1.2.3"  # the lap's own tags stay in its git dir


@pytest.mark.skipif(shutil.which("git-lfs") is None, reason="git-lfs is not installed")
def test_git_lfs_files_reach_laps_and_lap_commits_as_lfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """git-lfs's own filter is the one ralph's git runs: laps and checks read the real content,
    and a file the lap adds under an LFS pattern is committed as a pointer, its object stored."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    subprocess.run(["git", "lfs", "install", "--skip-repo"], check=True, capture_output=True)
    agent = "cat data.bin > seen.txt && echo more > new.bin && sed -i 's/\\[ \\]/[x]/' TODO.md"
    attributes = {".gitattributes": "*.bin filter=lfs diff=lfs merge=lfs -text\n"}
    repo = one_lap(tmp_path / "repo", agent, attributes, checks=["grep -qx 'real content' data.bin"])
    (repo / "data.bin").write_text("real content\n")
    git(repo, "add", "data.bin")
    git(repo, "commit", "-qm", "an LFS file")
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(repo, "show", "ralph/r:seen.txt") == "real content"
    pointer = git(repo, "show", "ralph/r:new.bin")
    assert pointer.startswith("version https://git-lfs.github.com/spec/v1")
    oid = pointer.split("oid sha256:")[1].split()[0]
    assert (repo / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid).read_text() == "more\n"


@needs_bwrap
def test_sandbox_readable_brings_back_a_path_the_sandbox_empties(tmp_path: Path):
    """/var/tmp is empty in the sandbox (sockets live there); a local hook repository or a tool
    the user keeps there is read by listing it in `sandbox.readable`."""
    kept = Path(tempfile.mkdtemp(prefix="ralph-readable-", dir="/var/tmp"))
    try:
        (kept / "tool.txt").write_text("a tool\n")
        for listed, code in (([str(kept)], 0), ([], 3)):
            repo = one_lap(
                tmp_path / f"repo{code}",
                "echo work > work.txt && sed -i 's/\\[ \\]/[x]/' TODO.md",
                {"where.txt": f"{kept}/tool.txt\n"},
                # (A path a command names is bound.) Unlisted, the check is red from the base commit on.
                checks=[{"run": "grep -q 'a tool' \"$(cat where.txt)\"", "expect_red": not listed}],
                sandbox={"mode": "required", "readable": listed},
            )
            result = ralph(repo, "run", "--name", "r")
            assert result.returncode == code, result.stdout + result.stderr
    finally:
        shutil.rmtree(kept)


WAITING = """
set -e
d=$(git -C vendor/lib rev-parse --absolute-git-dir)
rm $d/HEAD && mkfifo $d/HEAD
git init -q nested && git -C nested commit -q --allow-empty -m own
rm nested/.git/HEAD && mkfifo nested/.git/HEAD && echo 'VALUE = 1' > nested/module.py
git init -q byref && git -C byref commit -q --allow-empty -m own
rm byref/.git/refs/heads/* && mkfifo byref/.git/refs/heads/$(git -C byref branch --show-current)
mkdir fifo && mkfifo fifo/.git && echo 'VALUE = 2' > fifo/module.py
mkdir elsewhere && printf 'gitdir: {outside}\\n' > elsewhere/.git
python3 -c "
import os
os.mkdir('deep'); os.chdir('deep')
for _ in range(40):  # from the top git reaches it; by its whole path, past PATH_MAX
    os.mkdir('a' * 100); os.chdir('a' * 100)
os.mkfifo('.gitignore')
"
echo work > work.txt && sed -i 's/\\[ \\]/[x]/' TODO.md
"""


@pytest.mark.parametrize("sandbox", SANDBOX_MODES)
def test_a_git_dir_that_would_make_git_wait_for_ever_is_cut_off(tmp_path: Path, sandbox: str):
    """git opens a repository's HEAD, refs and `.git` file as it meets them (a submodule's, one a
    lap or setup made), and a FIFO there makes it wait for ever: ralph's staging, cleaning and
    checkout would hang. Such a `.git` is removed first: the folder is plain files to git."""
    library = make_repo(tmp_path / "library", {"lib.txt": "library\n"})
    setup = "rm -rf made && git init -q made && git -C made commit -q --allow-empty -m x && rm made/.git/HEAD && mkfifo made/.git/HEAD"
    repo = one_lap(tmp_path / "repo", f"sh {tmp_path / 'agent.sh'}", setup=[setup], sandbox=sandbox, protect=[])
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "vendor/lib")
    git(repo, "commit", "-qm", "a submodule")
    (tmp_path / "agent.sh").write_text(WAITING.format(outside=repo / ".git" / "modules" / "vendor" / "lib"))
    result = ralph(repo, "run", "--name", "r", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    (lap,) = lap_notes(repo, "r")
    tree = git(repo, "ls-tree", "-r", "--name-only", lap["commit"]).split("\n")
    assert "nested/module.py" in tree and "fifo/module.py" in tree and "work.txt" in tree
    assert git(repo, "ls-tree", lap["commit"], "vendor/lib").split()[2] == git(library, "rev-parse", "HEAD")


def test_an_unsandboxed_lap_that_removes_a_workspace_folder_stops_the_run_untouched(tmp_path: Path):
    """ralph checks its workspace's folders are still its own before its git meets them: one a
    lap deleted (or replaced by a link) stops the run in one line; ralph follows nothing."""
    repo = one_lap(tmp_path / "repo", "rm -rf ../scratch && echo x > work.txt", sandbox="off")
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 1 and "the lap replaced ralph's workspace folder" in result.stderr, result.stderr


def test_a_long_item_makes_a_subject_git_log_shows_whole(tmp_path: Path):
    item = "Rename every caller of the deprecated parse_legacy_config helper across the package " * 2
    agent = "echo x > work.txt && sed -i 's/\\[ \\]/[x]/' TODO.md"
    repo = one_lap(tmp_path / "repo", agent, {"TODO.md": f"- [ ] {item.strip()}\n"})
    assert ralph(repo, "run", "--name", "r").returncode == 0
    subject = git(repo, "log", "-1", "--format=%s", "ralph/r")
    assert len(subject) == 72 and subject.endswith("…") and item.startswith(subject[:-1])
