"""Nothing a lap writes runs later outside a sandbox: not through ralph's pre-commit cache (a
later lap's hooks, a later run's), not through the agent CLI's files in the user's HOME (the
next time the user starts it), not through the user's own hooks when the run is landed. And
hooks that cannot run where laps commit stop the run before lap 1, named, instead of making
every lap red."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from helpers.repos import PY, git, make_repo, needs_bwrap, write
from helpers.running import lap_notes, ralph


def committed(path: Path, files: dict[str, str], executable: tuple[str, ...] = ()) -> Path:
    """A repository with one commit holding `files`, `executable` ones with their x bit."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    write(path, files)
    for name in executable:
        (path / name).chmod(0o755)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def install_pre_commit(repo: Path) -> None:
    subprocess.run([PY, "-m", "pre_commit", "install"], cwd=repo, check=True, capture_output=True)


# --- the cache, and the local hook at `ralph land` -------------------------------------

HOOK_REPO = {  # the user's hook, fetched by pre-commit into the cache as any hook repository is
    ".pre-commit-hooks.yaml": "- id: no-fixme\n  name: no FIXME\n  entry: no-fixme.sh\n  language: script\n"
    "  types: [text]\n",
    "no-fixme.sh": '#!/bin/sh\n! grep -n FIXME "$@"\n',
}

# Laps 1 and 2 rewrite the script of the user's `repo: local` hook: wherever it runs, it stubs
# the user's hook in every pre-commit cache it finds and leaves a sign outside the sandbox's
# reach; lap 1 also changes pre-commit's configuration (so its hooks get a cache of its own).
# Lap 3 leaves a FIXME for the user's hook to refuse; lap 4 writes clean code.
POISON = """#!/bin/sh
for stub in "$PRE_COMMIT_HOME"/repo*/no-fixme.sh "$HOME"/.cache/pre-commit/repo*/no-fixme.sh \\
    USERS_HOME/.cache/ralph/pre-commit/*/repo*/no-fixme.sh; do
  printf '#!/bin/sh\\nexit 0\\n' > "$stub"
done 2>/dev/null
touch SIGN 2>/dev/null
exit 0
"""
AGENT = """
import os, pathlib
lap = int(os.environ["RALPH_LAP"])
if lap <= 2:
    pathlib.Path("scripts/lint.sh").write_text(POISON)
if lap == 1:
    config = pathlib.Path(".pre-commit-config.yaml")
    config.write_text(config.read_text() + "# the lap's own\\n")
if lap >= 3:
    pathlib.Path("mod.py").write_text("value = 1  # FIXME\\n" if lap == 3 else "value = 1\\n")
if lap >= 2:
    todo = pathlib.Path("TODO.md")
    todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
"""


@needs_bwrap
def test_no_lap_leaves_a_stub_in_the_hook_cache_nor_lands_through_a_local_hook(tmp_path: Path):
    hooks = committed(tmp_path / "hooks", HOOK_REPO, executable=("no-fixme.sh",))
    sign = tmp_path / "the-laps-script-ran"  # not writable in the sandbox: made only outside it
    agent = tmp_path / "agent.py"
    agent.write_text(
        AGENT.replace("POISON", repr(POISON.replace("SIGN", str(sign)).replace("USERS_HOME", str(Path.home()))))
    )
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": f"{PY} {agent}"},
        "checks": ["true"],
        "limits": {"max_laps": 5},
        "sandbox": {"mode": "required", "readable": [str(hooks)]},  # a local hook repository, outside the repository
    }
    pre_commit = (
        f"repos:\n- repo: {hooks}\n  rev: {git(hooks, 'rev-parse', 'HEAD')}\n  hooks: [{{id: no-fixme}}]\n"
        "- repo: local\n  hooks:\n  - {id: lint, name: lint, entry: scripts/lint.sh, language: script, "
        "pass_filenames: false, always_run: true}\n"
    )
    files = {
        "ralph.yaml": json.dumps(config),
        "TODO.md": "- [ ] the linter\n- [ ] mod.py\n",
        ".pre-commit-config.yaml": pre_commit,
        "scripts/lint.sh": "#!/bin/sh\nexit 0\n",
    }
    repo = committed(tmp_path / "repo", files, executable=("scripts/lint.sh",))
    install_pre_commit(repo)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    laps = lap_notes(repo, "r")
    assert [lap["status"] for lap in laps] == ["red", "green", "red", "green"], [lap["reason"] for lap in laps]
    assert laps[0]["reason"].startswith("never in scope")  # its hooks, from its own cache, passed
    assert laps[2]["reason"] == "the repository's commit hooks rejected the lap: no-fixme failed"
    cached = list((Path.home() / ".cache" / "ralph" / "pre-commit").glob("*/repo*/no-fixme.sh"))
    assert cached and all(copy.read_text() == HOOK_REPO["no-fixme.sh"] for copy in cached)

    # Landing commits through the user's pre-commit, whose `lint` hook runs the lap's script.
    head = git(repo, "rev-parse", "HEAD")
    landed = ralph(repo, "land")
    assert landed.returncode == 1
    assert "scripts/lint.sh, which the pre-commit hook `lint` runs" in landed.stderr
    assert "merge ralph/r by hand" in landed.stderr and len(landed.stderr.strip().splitlines()) == 1
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == ""
    assert not sign.exists()


def test_land_goes_through_hooks_that_run_nothing_the_run_changed(tmp_path: Path):
    """Local hooks that run a tool of the user's, a script the run left alone, a pattern: the
    run's change to mod.py is landed through them as through any commit (the other side of
    the refusal above)."""
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": "echo x > mod.py && sed -i 's/\\[ \\]/[x]/' TODO.md"},
        "checks": ["true"],
    }
    pre_commit = (
        "repos:\n- repo: local\n  hooks:\n  - {id: words, name: words, entry: wc -w, language: system}\n"
        "  - {id: tidy, name: tidy, entry: tools/tidy.sh, language: script}\n"
        "  - {id: no-fixme, name: no FIXME, entry: FIXME, language: pygrep}\n"
    )
    files = {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] x\n", ".pre-commit-config.yaml": pre_commit}
    repo = committed(tmp_path / "repo", {**files, "tools/tidy.sh": "#!/bin/sh\nexit 0\n"}, ("tools/tidy.sh",))
    install_pre_commit(repo)
    assert ralph(repo, "run", "--name", "r").returncode == 0
    landed = ralph(repo, "land")
    assert landed.returncode == 0, landed.stdout + landed.stderr
    assert git(repo, "show", "HEAD:mod.py") == "x"


# Hooks that run a file of the tree in ways a reading by "the word after a shell" missed (the
# red team's): a shell option first, a Python hook importing its neighbours, a hand-written
# hook running pre-commit with a configuration of its own. The lap rewrites that file to leave
# a sign where it runs (in the sandbox it cannot); landing would run it as the user.
LOCAL_CHECK = (
    "repos:\n- repo: local\n  hooks:\n  - {id: check, name: check, entry: sh -e scripts/check.sh, "
    "language: system, pass_filenames: false}\n"
)
INDIRECT = {  # the hook, the file it runs, the file at the base, the file the lap writes
    "shell option": (None, "scripts/check.sh", "exit 0\n", "touch {sign} 2>/dev/null || true\n"),
    "python hook": (
        '#!/usr/bin/env python3\nimport sys\nsys.path.insert(0, "tools")\nimport checks\n',
        "tools/checks.py",
        "",
        "import pathlib\ntry:\n    pathlib.Path('{sign}').touch()\nexcept OSError:\n    pass\n",
    ),
    "own config": (
        f"#!/bin/sh\nexec {PY} -m pre_commit run --config ci/hooks.yaml\n",
        "ci/hooks.yaml",
        "repos: []\n",
        "repos:\n- repo: local\n  hooks:\n  - {{id: x, name: x, entry: sh -c 'touch {sign} 2>/dev/null; true', "
        "language: system, pass_filenames: false}}\n",
    ),
}


@pytest.mark.parametrize("case", INDIRECT)
def test_land_refuses_hooks_that_run_a_changed_file_indirectly(tmp_path: Path, case: str):
    hook, target, before, after = INDIRECT[case]
    sign = tmp_path / "ran"
    (tmp_path / "after").write_text(after.format(sign=sign))
    agent = f"cp {tmp_path / 'after'} {target} && sed -i 's/\\[ \\]/[x]/' TODO.md"
    config = {"goal": "g", "agent": {"kind": "command", "command": agent}, "checks": ["true"], "protect": []}
    files = {
        "ralph.yaml": json.dumps(config),
        "TODO.md": "- [ ] x\n",
        target: before,
        ".pre-commit-config.yaml": LOCAL_CHECK,
    }
    repo = committed(tmp_path / "repo", files)
    if hook is None:
        install_pre_commit(repo)
    else:
        (repo / ".git" / "hooks" / "pre-commit").write_text(hook)
        (repo / ".git" / "hooks" / "pre-commit").chmod(0o755)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    head = git(repo, "rev-parse", "HEAD")
    landed = ralph(repo, "land")
    assert landed.returncode == 1 and "your git hooks would run what the run changed" in landed.stderr, landed.stderr
    assert git(repo, "rev-parse", "HEAD") == head and not sign.exists()


# --- hooks that cannot run ---------------------------------------------------------------

NO_JIRA = '#!/bin/sh\ngrep -q "^JIRA-" "$1" || { echo "commit-msg: name the JIRA ticket"; exit 1; }\n'
GHOST = "repos:\n- repo: local\n  hooks: [{id: ghost, name: ghost, entry: ralph-test-no-such-tool, language: system}]\n"
CANNOT_RUN = {
    "interpreter": (
        {"pre-commit": "#!/usr/bin/env ralph-test-no-such-interpreter\n"},
        None,
        "the pre-commit hook could not run",
    ),
    "program": ({}, GHOST, "the commit hook ghost could not run"),
    "message": ({"commit-msg": NO_JIRA}, None, "the commit-msg hook refuses the message ralph gives every lap's"),
    "fetch": ({}, "UNREACHABLE", "pre-commit could not set up /var/tmp/"),
}


@pytest.mark.parametrize(
    "case", [pytest.param(case, marks=needs_bwrap) if case == "fetch" else case for case in CANNOT_RUN]
)
def test_a_hook_that_cannot_run_stops_the_run_before_lap_1_naming_it(tmp_path: Path, case: str):
    hooks, pre_commit, said = CANNOT_RUN[case]
    started = tmp_path / "out" / "agent-started"
    started.parent.mkdir()
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": f"touch {started}"},
        "checks": ["true"],
        "sandbox": {"writable": [str(started.parent)]},
    }
    unreachable = Path("/var/tmp") / f"ralph-test-hooks-{uuid.uuid4().hex[:8]}"  # the sandbox empties /var/tmp
    try:
        if pre_commit == "UNREACHABLE":
            committed(unreachable, HOOK_REPO, executable=("no-fixme.sh",))
            pre_commit = f"repos:\n- repo: {unreachable}\n  rev: {git(unreachable, 'rev-parse', 'HEAD')}\n"
            pre_commit += "  hooks: [{id: no-fixme}]\n"
        files = {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] x\n"}
        repo = make_repo(
            tmp_path / "repo", {**files, **({".pre-commit-config.yaml": pre_commit} if pre_commit else {})}
        )
        if pre_commit:
            install_pre_commit(repo)
        for name, script in hooks.items():
            (repo / ".git" / "hooks" / name).write_text(script)
            (repo / ".git" / "hooks" / name).chmod(0o755)
        result = ralph(repo, "run", "--name", "r")
    finally:
        shutil.rmtree(unreachable, ignore_errors=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not started.exists()
    assert git(repo, "for-each-ref", "refs/ralph/", "refs/heads/ralph/") == ""


# --- the agent CLI's files in the user's HOME -------------------------------------------

# What Claude Code runs outside any sandbox when the user starts it: hooks in
# ~/.claude/settings.json, MCP servers in ~/.claude.json. The stand-in plants both from the
# agent, and has the lap's test plant them from the checks.
PLANT = """
import json, os, pathlib
def plant(sign):
    home = pathlib.Path(os.environ["HOME"])
    hook = {"SessionStart": [{"hooks": [{"type": "command", "command": f"touch {sign}-hook"}]}]}
    server = {"planted": {"command": "sh", "args": ["-c", f"touch {sign}-mcp"]}}
    for path, key, value in ((home / ".claude" / "settings.json", "hooks", hook), (home / ".claude.json", "mcpServers", server)):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            found = json.loads(path.read_text()) if path.exists() else {}
            path.write_text(json.dumps(dict(found, **{key: value})))
        except OSError:
            pass
"""
CLAUDE = """#!PYTHON
import json, pathlib, sys
sys.stdin.read()
PLANT
plant("SIGN-by-the-agent")
pathlib.Path("test_plant.py").write_text(PLANT + "\\ndef test_plant():\\n    plant('SIGN-by-a-test')\\n")
todo = pathlib.Path("TODO.md")
todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "planted", "total_cost_usd": 0}))
"""


def suggested(config_text: str) -> dict:
    """ralph.yaml as `ralph init` writes it, with the `sandbox:` it suggests in comments taken."""
    lines = config_text.splitlines()
    block = []
    for line in lines[lines.index("# sandbox:") + 1 :]:
        if not line.startswith("#   "):
            break
        block.append(line[2:])
    return dict(yaml.safe_load(config_text), **yaml.safe_load("\n".join(["sandbox:", *block])))


def start_claude_later(home: Path) -> None:
    """What Claude Code would run of the user's files when started: SessionStart hooks, MCP servers."""
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    for group in settings.get("hooks", {}).get("SessionStart", []):
        for hook in group["hooks"]:
            subprocess.run(hook["command"], shell=True)
    for server in json.loads((home / ".claude.json").read_text()).get("mcpServers", {}).values():
        subprocess.run([server["command"], *server.get("args", [])])


@needs_bwrap
def test_the_claude_code_setup_ralph_init_suggests_leaves_nothing_for_claude_to_run_later(tmp_path: Path):
    home = Path.home()  # the user's, with Claude Code installed
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text('{"model": "opus"}')
    (home / ".claude.json").write_text('{"numStartups": 3}')
    before = {path: path.read_bytes() for path in (home / ".claude" / "settings.json", home / ".claude.json")}
    sign = tmp_path / "planted"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = CLAUDE.replace("PYTHON", PY).replace("PLANT", PLANT, 1).replace("PLANT", repr(PLANT), 1)
    (bin_dir / "claude").write_text(stand_in.replace("SIGN", str(sign)))
    (bin_dir / "claude").chmod(0o755)
    repo = make_repo(tmp_path / "repo", {"test_base.py": "def test_base():\n    pass\n"})
    assert ralph(repo, "init", "--agent", "claude").returncode == 0
    config = suggested((repo / "ralph.yaml").read_text())
    config.update(goal="g", checks=[f"{PY} -m pytest -q -p no:cacheprovider"])
    (repo / "ralph.yaml").write_text(json.dumps(config))
    (repo / "TODO.md").write_text("- [ ] plant\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ralph init")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "CLAUDE_CODE_OAUTH_TOKEN": "canary-token"}
    result = ralph(repo, "run", "--name", "r", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(repo, "show", "ralph/r:test_plant.py")  # the lap's test ran with the checks
    start_claude_later(home)
    assert sorted(path.name for path in tmp_path.glob("planted*")) == []
    assert {path: path.read_bytes() for path in before} == before


def test_a_hook_the_lap_left_unable_to_run_names_it_and_the_lap_is_red(tmp_path: Path):
    """The try-out ran the hook; the lap deletes the script it runs: the hook cannot run on the
    lap's commit (exit 127), which is the lap's doing, and the lap's reason names the hook."""
    hook = "#!/bin/sh\nexec ./scripts/check.sh\n"
    config = {
        "goal": "g",
        "agent": {
            "kind": "command",
            "command": "rm scripts/check.sh && echo x > mod.py && sed -i 's/\\[ \\]/[x]/' TODO.md",
        },
        "checks": ["true"],
        "protect": [],
        "limits": {"max_laps": 1},
    }
    files = {"ralph.yaml": json.dumps(config), "TODO.md": "- [ ] x\n", "scripts/check.sh": "#!/bin/sh\nexit 0\n"}
    repo = committed(tmp_path / "repo", files, ("scripts/check.sh",))
    (repo / ".git" / "hooks" / "pre-commit").write_text(hook)
    (repo / ".git" / "hooks" / "pre-commit").chmod(0o755)
    ralph(repo, "run", "--name", "r")
    (lap,) = lap_notes(repo, "r")
    assert lap["status"] == "red" and "could not run on the lap" in lap["reason"], lap["reason"]
