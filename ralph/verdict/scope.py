"""What a lap may change: the run's scope, less the paths that are never in it.

`scope:` in ralph.yaml lists globs from the repository's root (absent: every path); TODO.md and
PROGRESS.md are always in it. Some paths are never in scope, wherever they sit and whatever glob
covers them: what a runtime, a package manager, a test runner, a CI service or an agent reads by
its name alone, and what the checks' own commands run. The list is fixed by the languages and
their tools, not by guesses about attacks; only a grant that names the path opens one
(ralph/verdict/grants.py, in the user's own TODO.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pathspec

from ralph.facts import check_files, paths
from ralph.facts.paths import anchored

# Gitignore patterns without a slash match a name in any folder; `name/` a folder and all in it.
NEVER = (
    # What an interpreter or a shell runs or reads by its name alone: Python at start-up, a .env
    # that make, direnv, docker compose or a dotenv loader reads, pytest's folder blinder.
    *"sitecustomize.py usercustomize.py *.pth .env .env.* *.env .envrc pyvenv.cfg".split(),
    # Installed code: what package managers put there runs in place of the project's.
    *"node_modules/ .venv/ venv/ vendor/ __pypackages__/ site-packages/ .tox/ .nox/ .cargo/ .yarn/ .pnp.*".split(),
    *".mvn/ gradle/wrapper/ gradlew mvnw".split(),
    # Test runners, build tools, type checkers and linters read these to know what to run and how
    # to judge (check_files.FILE_NAMES adds those a check's program reads).
    *"pytest.ini .pytest.ini pytest.toml .pytest.toml setup.cfg .coveragerc tsconfig*.json jsconfig*.json".split(),
    *".eslintrc* eslint.config.* karma.conf.* cypress.config.* deno.json deno.jsonc CMakeLists.txt *.cmake".split(),
    ".config/nextest.toml",
    # Dependency manifests and lockfiles (a change of dependencies is the user's decision), and
    # the toolchain pins that choose the interpreter or compiler.
    *"requirements*.txt requirements/ constraints*.txt Pipfile Pipfile.lock poetry.lock uv.lock pdm.lock".split(),
    *"pixi.toml pixi.lock environment.yml setup.py package.json package-lock.json npm-shrinkwrap.json".split(),
    *"yarn.lock pnpm-lock.yaml pnpm-workspace.yaml bun.lock bun.lockb go.mod go.sum go.work go.work.sum".split(),
    *"Cargo.toml Cargo.lock Gemfile Gemfile.lock *.gemspec composer.json composer.lock pom.xml".split(),
    *"build.gradle build.gradle.kts settings.gradle settings.gradle.kts gradle.properties".split(),
    *".python-version .tool-versions mise.toml .mise.toml .nvmrc .node-version .ruby-version .java-version".split(),
    # git and the hooks it runs, CI, and ralph's own configuration.
    *".gitattributes .gitmodules .gitignore .githooks/ .husky/ .pre-commit-config.yaml .pre-commit-hooks.yaml".split(),
    *".github/ .gitlab-ci.yml .gitlab/ .circleci/ .ci/ .travis.yml .buildkite/ azure-pipelines.yml".split(),
    *"appveyor.yml bitbucket-pipelines.yml Jenkinsfile .woodpecker.yml .woodpecker/ ralph.yaml".split(),
    # What coding agents load from the project: settings with hooks, MCP servers, instructions.
    *".claude/ CLAUDE.md CLAUDE.local.md AGENTS.md .mcp.json .codex/ .gemini/ GEMINI.md .opencode/".split(),
    *"opencode.json opencode.jsonc .goosehints .aider* .cursor/ .cursorrules .windsurfrules .windsurf/".split(),
    *".clinerules .roo/ .continue/ .kiro/ .junie/".split(),
    # What editors, dev containers, git hook managers and shells run when the user next opens the
    # folder, commits or enters it: outside any sandbox.
    *".vscode/ .idea/ .devcontainer/ .devcontainer.json lefthook.yml .lefthook.yml lefthook-local.yml".split(),
    *".overcommit.yml .lintstagedrc* lint-staged.config.* commitlint.config.* .commitlintrc* .pdbrc".split(),
    *".mise/ mise.local.toml .mise.local.toml .config/mise.toml .config/mise/".split(),
    *check_files.FILE_NAMES,
)


@functools.cache
def _never_spec() -> pathspec.GitIgnoreSpec:
    """NEVER, compiled at its first use (not when ralph starts: ~150 patterns, 25 ms), matched
    without regard to case: macOS and Windows file systems, and the tools on them, read
    `Conftest.py` as conftest.py and `.ENV` as .env."""
    return paths.spec(tuple(pattern.lower() for pattern in NEVER))


# A name in no folder `protect` covers whole: a conftest.py is in a test folder when it is.
_PROBE = ".ralph-probe"


@dataclass(frozen=True)
class Scope:
    """The run's scope (`globs`, None: every path) and what its configuration puts out of any: the
    files its checks' commands run, and paths it names (the MCP servers' file)."""

    globs: tuple[str, ...] | None = None
    commands: tuple[str, ...] = ()
    named: tuple[str, ...] = ()

    def run_files(self, read: Callable[[str], str | None]) -> tuple[str, ...]:
        """The files the checks run, as whole-file patterns (`package.json#scripts` is package.json),
        the scripts of pre-commit's `repo: local` hooks included; `read` gives a file as the last
        green commit has it."""
        commands = list(self.commands)
        hooks = [
            pattern
            for config in check_files.pre_commit_configs(commands)
            for pattern in check_files.local_hook_files(read(config))
        ]
        named = ["/" + path for path in self.named]
        return tuple(dict.fromkeys(p.partition("#")[0] for p in [*check_files.patterns(commands), *hooks, *named]))

    def why_not(self, path: str, runs: tuple[str, ...], protect: Iterable[str], *, link: bool = False) -> str:
        """Why a lap may not change the path without a grant: "never" (in scope), "outside" (the
        run's scope), or "" when it may. A `link` is also the folder it may stand for: every tool
        follows `.claude` → cfg/ into `.claude/settings.json`."""
        if never(path, runs, tuple(protect)) or (link and never(f"{path}/{_PROBE}", runs, tuple(protect))):
            return "never"
        if self.globs is not None and not anchored(self.globs).match_file(path):
            return "outside"
        return ""


def never_itself(pattern: str, runs: tuple[str, ...], protect: tuple[str, ...]) -> bool:
    """Is a grant's pattern itself a path never in scope (`.github/`, `.env`), so that it names
    what it opens, rather than a folder that merely holds such a path (`src/`)?"""
    bare = pattern.strip("/")
    return never(bare, runs, protect) or never(f"{bare}/{_PROBE}", runs, protect)


def never(path: str, runs: tuple[str, ...], protect: tuple[str, ...]) -> bool:
    """Never in scope: a name of the fixed list, a file the checks run, a conftest.py outside the
    folders `protect` covers whole (a new one inside is a new test file; it sets up every test)."""
    folded = path.lower()
    if folded.rsplit("/", 1)[-1] == "conftest.py":
        folder = path.rpartition("/")[0]
        return not folder or not paths.spec(tuple(p for p in protect if "#" not in p)).match_file(f"{folder}/{_PROBE}")
    return _never_spec().match_file(folded) or paths.spec(tuple(run.lower() for run in runs)).match_file(folded)
