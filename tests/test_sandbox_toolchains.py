"""Toolchains where developers install them (rustup under HOME, an agent CLI in an npm prefix
under /var/tmp, Go's module cache) work in the sandbox, read-only, without their logins."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.repos import git, make_repo, needs_bwrap
from helpers.running import ralph

from ralph.isolation import proc, toolchains
from ralph.isolation.jail import Jail
from ralph.isolation.sandbox import missing_inside

# rustup's proxy, as it behaves: the toolchain comes from RUSTUP_HOME (default ~/.rustup), its
# settings.toml naming the default; without them, rustup's own error and exit 1.
PROXY = """#!/bin/sh
home="${RUSTUP_HOME:-$HOME/.rustup}"
toolchain=$(sed -n 's/^default_toolchain = "\\(.*\\)"/\\1/p' "$home/settings.toml" 2>/dev/null)
if [ -z "$toolchain" ] || [ ! -x "$home/toolchains/$toolchain/bin/cargo" ]; then
  echo "error: rustup could not choose a version of cargo to run" >&2
  exit 1
fi
exec "$home/toolchains/$toolchain/bin/cargo" "$@"
"""


def rustup_layout(home: Path) -> None:
    """~/.cargo/bin/cargo (a proxy), ~/.rustup's settings and toolchain, ~/.cargo/credentials.toml."""
    executable(home / ".cargo" / "bin" / "cargo", PROXY)
    (home / ".cargo" / "credentials.toml").write_text('[registry]\ntoken = "cio-secret-token"\n')
    toolchain = home / ".rustup" / "toolchains" / "stable-stand-in" / "bin" / "cargo"
    executable(toolchain, "#!/bin/sh\necho 'cargo 1.99.0 (stand-in)'\n")
    (home / ".rustup" / "settings.toml").write_text('version = "12"\ndefault_toolchain = "stable-stand-in"\n')


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def var_tmp() -> Iterator[Path]:
    """A folder under /var/tmp, which the sandbox empties but for what a lap needs."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="ralph-test-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def npm_prefix_cli(prefix: Path, body: str) -> Path:
    """An agent CLI as `npm install -g --prefix` lays it out: bin/NAME links to the package."""
    script = executable(prefix / "lib" / "node_modules" / "agent-cli" / "cli.sh", "#!/bin/sh\n" + body)
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "agent-cli").symlink_to("../lib/node_modules/agent-cli/cli.sh")
    (prefix / "etc").mkdir()
    (prefix / "etc" / "npmrc").write_text("//registry.example/:_authToken=npm-secret-token\n")
    return script


@needs_bwrap
def test_a_rustup_toolchain_and_an_agent_cli_under_var_tmp_work_read_only_in_the_sandbox(tmp_path: Path, var_tmp):
    home = Path.home()
    rustup_layout(home)
    (home / ".npmrc").write_text("//registry.npmjs.org/:_authToken=user-npm-token\nfund=false\n")
    prefix = var_tmp / "npm"
    attempts = [
        f"{home}/.cargo/bin/planted",
        f"{home}/.rustup/settings.toml",
        f"{home}/.rustup/toolchains/stable-stand-in/bin/cargo",
        f"{prefix}/lib/node_modules/agent-cli/cli.sh",
        f"{prefix}/bin/planted",
    ]
    writes = "".join(f"(echo planted >> {path}) 2>/dev/null && echo {path} >> written.txt\n" for path in attempts)
    reads = f"cat {home}/.cargo/credentials.toml {home}/.npmrc {prefix}/etc/npmrc > logins.txt\n"
    variables = "env | grep -E '^(RUSTUP_HOME|CARGO_HOME|GOFLAGS|NVM_DIR|VIRTUAL_ENV)=' | sort > env.txt\n"
    npm_prefix_cli(prefix, "cargo --version > cargo.txt\n" + reads + variables + writes + "touch written.txt\n")
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": "agent-cli && sed -i 's/\\[ \\]/[x]/' TODO.md"},
        "setup": ["cargo --version"],
        "checks": ["cargo --version | grep -q stand-in"],
        "sandbox": "required",
    }
    repo = make_repo(tmp_path / "repo", config=config, todo=["x"])
    venv = tmp_path / "users-venv"
    env = {
        "PATH": f"{prefix}/bin:{home}/.cargo/bin:{os.environ['PATH']}",
        "VIRTUAL_ENV": str(venv),
        "GOFLAGS": "-count=1",
        "NVM_DIR": str(home / ".nvm"),
    }
    result = ralph(repo, "run", "--name", "r", env=env)
    assert result.returncode == 0, result.stdout + result.stderr

    def seen(name: str) -> str:
        return git(repo, "show", f"ralph/r:{name}")

    assert seen("cargo.txt") == "cargo 1.99.0 (stand-in)"
    assert seen("written.txt") == "", "a lap wrote to a toolchain"
    assert seen("logins.txt") == "", "a registry login was readable"
    assert seen("env.txt").splitlines() == [
        f"CARGO_HOME={home}/.cargo",
        "GOFLAGS=-count=1",
        f"NVM_DIR={home}/.nvm",
        f"RUSTUP_HOME={home}/.rustup",
    ]
    assert (home / ".rustup" / "settings.toml").read_text().endswith('"stable-stand-in"\n')
    assert not (home / ".cargo" / "bin" / "planted").exists() and not (prefix / "bin" / "planted").exists()


@needs_bwrap
def test_outside_the_sandbox_nothing_changes_for_rustup_without_a_private_home(tmp_path: Path):
    # The same layout, unsandboxed: the variables ralph sets are the defaults the proxy uses anyway.
    rustup_layout(Path.home())
    config = {"goal": "g", "agent": {"kind": "command", "command": "sed -i 's/\\[ \\]/[x]/' TODO.md && touch done.txt"}}
    config |= {"checks": ["cargo --version | grep -q stand-in"], "sandbox": "off"}
    repo = make_repo(tmp_path / "repo", config=config, todo=["x"])
    env = {"PATH": f"{Path.home()}/.cargo/bin:{os.environ['PATH']}"}
    result = ralph(repo, "run", "--name", "r", env=env)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_bwrap
def test_a_program_the_sandbox_does_not_show_is_named_with_the_fix(tmp_path: Path, var_tmp):
    prefix = var_tmp / "npm"
    npm_prefix_cli(prefix, "echo hello\n")
    env = dict(os.environ, PATH=f"{prefix}/bin:{os.environ['PATH']}")
    # What ralph binds back for the command: the CLI, its package and prefix are there.
    assert missing_inside("agent-cli --print", env) is None
    # A sandbox that binds back the bin folder alone (as ralph did): its link leads nowhere.
    (tmp_path / "tmp").mkdir()
    bare = Jail((), tmp_path / "tmp", tmp_path, keep=(prefix / "bin",))
    said = missing_inside("FOO=1 agent-cli --print", env, bare)
    assert said == (
        f"`agent-cli` is at {prefix}/bin/agent-cli outside the sandbox, but "
        f"{prefix}/lib/node_modules/agent-cli/cli.sh is not there inside it — "
        f"list {prefix}/lib in `sandbox.readable` (ralph.yaml)"
    )
    assert missing_inside("no-such-program-here --x", env, bare) is None  # not the sandbox's doing
    assert missing_inside("sh -c true", env, bare) is None


def test_only_npmrc_files_that_hold_a_login_are_masked_and_cargo_credentials_always(tmp_path: Path):
    home = tmp_path / "home"
    rustup_layout(home)
    (home / ".npmrc").write_text("registry=https://mirror.example/\n")
    (home / ".yarnrc.yml").write_text('npmAuthToken: "yarn-token"\n')
    prefix = tmp_path / "prefix"
    npm_prefix_cli(prefix, "true\n")
    env = {"HOME": str(home), "PATH": f"{prefix}/bin:/usr/bin"}
    assert set(toolchains.logins(env)) == {
        home / ".cargo" / "credentials.toml",
        home / ".yarnrc.yml",
        prefix / "etc" / "npmrc",
    }
    # Bound whole since toolchains are: cargo's config with a token, what `go env -w` wrote with a
    # login in its GOPROXY; a FIFO where a config would be is never waited on.
    (home / ".cargo" / "config.toml").write_text('[registry]\ntoken = "cio-config-token"\n')
    (home / ".config" / "go").mkdir(parents=True)
    (home / ".config" / "go" / "env").write_text("GOPROXY=https://me:go-token@proxy.example\n")
    os.mkfifo(home / ".npmrc.fifo")
    env["NPM_CONFIG_USERCONFIG"] = str(home / ".npmrc.fifo")
    assert {home / ".cargo" / "config.toml", home / ".config" / "go" / "env"} <= set(toolchains.logins(env))
    (home / ".config" / "go" / "env").write_text("GOFLAGS=-mod=mod\n")
    assert home / ".config" / "go" / "env" not in toolchains.logins(env)


def test_the_allow_list_never_holds_home_or_a_private_folder_whole(tmp_path: Path):
    home = tmp_path / "home"
    rustup_layout(home)
    (home / "bin").mkdir()
    (home / "lib").mkdir()  # ~/bin's parent looks like a prefix: it is HOME, never bound whole
    env = {"HOME": str(home), "PATH": f"{home}/bin:/var/tmp:/tmp/bin:/usr/bin", "CARGO_HOME": str(home)}
    found = toolchains.readable(env, ["cargo test"])
    assert home / ".rustup" in found and home / "bin" in found
    assert not {home, tmp_path, Path("/tmp"), Path("/var/tmp"), Path("/run"), Path("/")} & set(found)
    assert toolchains.variables(env)["RUSTUP_HOME"] == str(home / ".rustup")
    assert "CARGO_HOME" not in toolchains.variables(env)  # the user's passes as it is


def test_the_users_virtualenv_is_not_the_laps(monkeypatch):
    monkeypatch.setenv("VIRTUAL_ENV", "/somewhere/.venv")
    monkeypatch.setenv("VIRTUAL_ENV_PROMPT", "(proj)")
    assert "VIRTUAL_ENV" not in proc.lap_env() and "VIRTUAL_ENV_PROMPT" not in proc.lap_env()
    assert proc.lap_env(("VIRTUAL_ENV",))["VIRTUAL_ENV"] == "/somewhere/.venv"


@needs_bwrap
@pytest.mark.slow
@pytest.mark.skipif(not Path("/root/.rustup/settings.toml").exists(), reason="no rustup under /root")
@pytest.mark.parametrize("how", ["defaults under HOME", "variables"])
def test_the_real_rustup_cargo_tests_a_crate_sandboxed(tmp_path: Path, how: str):
    home = Path.home()
    env = {"PATH": f"{home}/.cargo/bin:{os.environ['PATH']}"}
    if how == "variables":
        env |= {"RUSTUP_HOME": "/root/.rustup", "CARGO_HOME": "/root/.cargo"}
    else:  # the private HOME hid these: rustup found no toolchain
        (home / ".rustup").symlink_to("/root/.rustup")
        (home / ".cargo").symlink_to("/root/.cargo")
    files = {
        "Cargo.toml": '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n',
        "src/lib.rs": "pub fn one() -> u32 { 1 }\n#[test]\nfn it_is_one() { assert_eq!(one(), 1); }\n",
        ".gitignore": "target/\n",
    }
    check = "cargo --version && cargo test --offline 2>&1 | grep -q 'test it_is_one ... ok'"
    config = {"goal": "g", "agent": {"kind": "command", "command": "sed -i 's/\\[ \\]/[x]/' TODO.md && touch done.txt"}}
    config |= {"checks": [check, "touch /root/.cargo/planted 2>/dev/null && exit 1 || true"], "sandbox": "required"}
    repo = make_repo(tmp_path / "repo", files, config=config, todo=["x"])
    result = ralph(repo, "run", "--name", "r", env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not Path("/root/.cargo/planted").exists()


def go_module_zip(download: Path, module: str, version: str, files: dict[str, str]) -> None:
    """A module as a Go proxy serves it (the layout of a module cache's cache/download)."""
    at = download / module / "@v"
    at.mkdir(parents=True)
    (at / "list").write_text(version + "\n")
    (at / f"{version}.info").write_text(f'{{"Version":"{version}"}}')
    (at / f"{version}.mod").write_text(files["go.mod"])
    with zipfile.ZipFile(at / f"{version}.zip", "w") as archive:
        for name, text in files.items():
            archive.writestr(f"{module}@{version}/{name}", text)


@needs_bwrap
@pytest.mark.skipif(shutil.which("go") is None, reason="no go here")
def test_go_builds_offline_from_the_users_module_cache_which_stays_read_only(tmp_path: Path):
    home = Path.home()
    mod = {"go.mod": "module example.com/hello\n\ngo 1.19\n", "hello.go": 'package hello\n\nconst Hi = "hi"\n'}
    go_module_zip(tmp_path / "proxy", "example.com/hello", "v1.0.0", mod)
    files = {
        "go.mod": "module example.com/app\n\ngo 1.19\n\nrequire example.com/hello v1.0.0\n",
        "app.go": 'package app\n\nimport "example.com/hello"\n\nvar Said = hello.Hi\n',
    }
    cache = home / "go" / "pkg" / "mod"
    checks = [
        "go build ./... && go env GOMODCACHE | grep -qx /tmp/go/pkg/mod",
        f"! touch {cache}/cache/download/planted",
    ]
    config = {"goal": "g", "agent": {"kind": "command", "command": "sed -i 's/\\[ \\]/[x]/' TODO.md && touch done.txt"}}
    config |= {"checks": checks, "sandbox": {"mode": "required", "network": False}}
    repo = make_repo(tmp_path / "repo", files, config=config, todo=["x"])
    # The user's own download, into ~/go/pkg/mod (from a stand-in proxy: no network in tests).
    outside = dict(os.environ, GOPROXY=f"file://{tmp_path}/proxy", GOSUMDB="off", GOFLAGS="-mod=mod")
    subprocess.run(["go", "mod", "download"], cwd=repo, env=outside, check=True, capture_output=True)
    git(repo, "add", "go.sum")
    git(repo, "commit", "-qm", "sum")
    before = sorted(str(path) for path in cache.rglob("*"))
    result = ralph(repo, "run", "--name", "r", env={"GOFLAGS": "-mod=mod", "GOSUMDB": "off"}, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(str(path) for path in cache.rglob("*")) == before
