"""Node: package.json's scripts followed a hop or two (`npm test` → `npm run test:vi` → `vitest
run`) to the runner, and that runner's per-test form: node's runner, vitest and mocha through
JUnit reporters they ship, jest through its own `--json --outputFile` report (jest-junit where
the project has it)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath

from ralph.commands.init_checks import Check, prefix, quoted, source_note, with_report
from ralph.commands.init_sources import NAME, Found, mapping, words

HOPS = 3  # `npm test` → the test script → `npm run test:vi` → `vitest run`
PARTS = re.compile(r"&&|\|\||;")
NODE_TEST = (
    "node --test --test-reporter=spec --test-reporter-destination=stdout "
    "--test-reporter=junit --test-reporter-destination={path}"
)
JUNIT_NODE = "mkdir -p reports && " + NODE_TEST.format(path="reports/junit.xml")
RUNNERS = ("node --test", "vitest", "jest", "mocha")
LAUNCHERS = ("npx", "pnpx", "bunx", "cross-env", "nyc", "c8", "yarn", "pnpm")
# Flags ralph's form sets itself (the reporters, the report), or that never end (watch mode).
OWN_FLAGS = ("--reporter", "--outputFile", "--ci", "--json", "--watch", "--test-reporter", "-R", "-O", "-w")
TAKE_VALUE = {"--reporter", "--reporter-option", "--reporter-options", "-R", "-O", "--outputFile", "--reporters"}


@dataclass(frozen=True)
class Runner:
    """A test runner a script runs: its arguments, its variables, and the scripts on the way."""

    name: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]


def _assignments(split: list[str]) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """`TZ=UTC jest` as ((TZ, UTC),) and `jest`."""
    env = []
    split = split[1:] if split[:1] == ["cross-env"] else split
    while split and "=" in split[0] and NAME.fullmatch(split[0].partition("=")[0]):
        name, _, value = split.pop(0).partition("=")
        env.append((name, value))
    return tuple(env), split


def script_call(split: list[str], scripts: dict[str, str]) -> tuple[str, list[str]] | None:
    """`npm test`, `npm run X -- args`, `pnpm X`, `yarn run X`: the script named and its extra arguments."""
    if len(split) < 2 or split[0] not in ("npm", "pnpm", "yarn", "bun"):
        return None
    cut = split.index("--") if "--" in split else len(split)
    named = [word for word in split[1:cut] if not word.startswith("-")]
    if named[:1] in (["test"], ["t"]):
        name, after = "test", named[1:]
    elif named[:1] in (["run"], ["run-script"]) and len(named) > 1:
        name, after = named[1], named[2:]
    elif split[0] in ("pnpm", "yarn") and named and named[0] in scripts:
        name, after = named[0], named[1:]
    else:
        return None
    extra = (after if split[0] != "npm" else []) + split[cut + 1 :]  # npm passes on only what follows --
    return (name, extra) if name in scripts else None


def _launched(split: list[str]) -> list[str]:
    """The program behind `npx`, `cross-env TZ=UTC`, `pnpm exec`, `nyc` and their flags."""
    while split and (split[0] in LAUNCHERS or split[0] == "exec" or split[0].startswith("-") or "=" in split[0]):
        split = split[1:]
    return split


def _kept(args: list[str]) -> tuple[str, ...]:
    """The script's own arguments (a test folder, `--recursive`), less what ralph's form sets."""
    kept: list[str] = []
    skip = False
    for word in args:
        if not skip and not word.startswith(OWN_FLAGS):
            kept.append(word)
        skip = not skip and word in TAKE_VALUE
    return tuple(kept)


def recognise(split: list[str]) -> tuple[str, tuple[str, ...]] | None:
    """The runner this command runs, with its own arguments, or None."""
    split = _launched(split)
    program = PurePosixPath(split[0]).name if split else ""
    rest = split[1:]
    if program == "node" and "--test" in rest:
        return "node --test", _kept([word for word in rest if word != "--test"])
    if program == "vitest":
        return "vitest", _kept(rest[1:] if rest[:1] in (["run"], ["watch"], ["dev"]) else rest)
    if program in ("jest", "mocha"):
        return program, _kept(rest)
    if program == "_mocha":
        return "mocha", _kept(rest)
    return None


def expand(command: str, scripts: dict[str, str], depth: int = 0) -> tuple[list[Runner], list[str]]:
    """The runners a command line reaches through the scripts, and the other commands it runs."""
    runners: list[Runner] = []
    others: list[str] = []
    for part in (part.strip() for part in PARTS.split(command)):
        env, split = _assignments(words(part))
        call = script_call(split, scripts)
        found = recognise(split)
        if call and depth < HOPS:
            name, extra = call
            more = expand(scripts[name] + "".join(f" {shlex.quote(word)}" for word in extra), scripts, depth + 1)
            runners, others = runners + more[0], others + more[1]
        elif found:
            runners.append(Runner(found[0], found[1], env))
        elif part:
            others.append(part)
    return runners, others


def _form(runner: Runner, installed: set[str], env: str, number: int) -> tuple[str, str, str]:
    """The runner's per-test command, the key of its report and the report's path (numbered
    past the first, so two checks never read one report)."""
    suffix = f"-{number}" if number > 1 else ""
    args = "".join(f" {shlex.quote(word)}" for word in runner.args)
    junit = f"reports/junit{suffix}.xml"
    if runner.name == "node --test":
        return f"mkdir -p reports && {env}{NODE_TEST.format(path=junit)}{args}", "junit", junit
    if runner.name == "vitest":
        return (
            f"{env}npx vitest run --reporter=default --reporter=junit --outputFile.junit={junit}{args}",
            "junit",
            junit,
        )
    if runner.name == "jest" and "jest-junit" in installed:
        named = f"JEST_JUNIT_OUTPUT_DIR=reports JEST_JUNIT_OUTPUT_NAME=junit{suffix}.xml "
        named += "JEST_JUNIT_SUITE_NAME='{filepath}' "
        return f"{env}{named}npx jest --ci --reporters=default --reporters=jest-junit{args}", "junit", junit
    if runner.name == "jest":
        report = f"reports/jest{suffix}.json"
        # jest writes its report into a folder that is there, or fails the check after its tests ran.
        return f"mkdir -p reports && {env}npx jest --ci --json --outputFile={report}{args}", "jest", report
    if "mocha-junit-reporter" in installed:
        options = f"--reporter mocha-junit-reporter --reporter-options mochaFile={junit}"
    else:
        options = f"--reporter xunit --reporter-option output={junit}"
    return f"{env}npx mocha {options}{args}", "junit", junit


def entry(own: list[Found], scripts: dict[str, str]) -> tuple[str, Found | None]:
    """The project's CI command that reaches a runner, else `npm test`."""
    for found in own:
        if not found.unknowable and expand(found.command, scripts)[0]:
            return found.command, found
    return "npm test", None


def node_checks(package: dict[str, object], own: list[Found]) -> list[Check]:
    scripts = {name: value for name, value in mapping(package.get("scripts")).items() if isinstance(value, str)}
    installed = set(mapping(package.get("dependencies"))) | set(mapping(package.get("devDependencies")))
    command, found = entry(own, scripts)
    runners, others = expand(command, scripts)
    if not runners:
        why = "package.json has no test script" if "test" not in scripts else f"it runs `{scripts['test']}`"
        return [Check(quoted("npm test"), unjudged=f"{why}, no runner ralph reads ({', '.join(RUNNERS)})")]
    reached = ", ".join(dict.fromkeys(runner.name for runner in runners))
    above = source_note(found, f" ({reached})")
    if others:
        also = ", ".join(f"`{other}`" for other in dict.fromkeys(others))
        above += (f"`{command}` also runs {also}: a check of its own each keeps it green (exit code only)",)
    checks = []
    for number, runner in enumerate(dict.fromkeys(runners), start=1):
        run, key, path = _form(runner, installed, prefix((found.env if found else ()) + runner.env), number)
        checks.append(Check(with_report(run, key, path), f"per-test results: {runner.name}'s report", above))
        above = ()
    return checks
