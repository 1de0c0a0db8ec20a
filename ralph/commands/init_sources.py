"""What `ralph init` reads of a project's own test commands: its CI workflows (GitHub's and
GitLab's), its Makefile, tox.ini and noxfile.py. What the project's CI runs, with the variables
it sets, is the best first guess at a check. The files are the user's and may hold anything
(bad YAML, a folder where a file should be, a huge file): every reader here returns nothing
rather than raise."""

from __future__ import annotations

import configparser
import json
import re
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

import yaml

MAX_BYTES = 512 * 1024  # a config file past this is no config file: not read
MAX_FILES = 20  # workflows, test files: the first this many, in name order
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Variables that only colour the output: ralph reads the output (and shows it to the next lap).
COLOUR = re.compile(r"COLOU?R", re.IGNORECASE)
# A token that is only a variable (`${tests}`, `$(ARGS)`, tox's `{posargs}`): a value ralph
# cannot know, dropped from the command rather than guessed.
VARIABLE = re.compile(r"\$\{[^}]*\}|\$\([^)]*\)|\{posargs[^}]*\}|\$[A-Za-z_]\w*")
GITLAB_KEYWORDS = {"stages", "variables", "default", "include", "workflow", "image", "services", "cache"}


@dataclass(frozen=True)
class Found:
    """One command line the project runs, the variables its CI sets for it, and where it is."""

    command: str
    source: str
    env: tuple[tuple[str, str], ...] = ()

    @property
    def unknowable(self) -> bool:
        """It holds a CI expression (`${{ matrix.node }}`): a value ralph cannot know."""
        return "${{" in self.command


def text(path: Path) -> str:
    """The file's text, or "" for what is no regular file, is too big for a config, or cannot be read."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return ""
        with path.open("rb") as handle:
            return handle.read(MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def mapping(value: object) -> dict[str, object]:
    """The value if it is a mapping with text keys, else {}."""
    if not isinstance(value, dict):
        return {}
    return {key: item for key, item in value.items() if isinstance(key, str)}


def json_mapping(path: Path) -> dict[str, object]:
    try:
        return mapping(json.loads(text(path) or "{}"))
    except (ValueError, RecursionError):
        return {}


def yaml_mapping(path: Path) -> dict[str, object]:
    try:
        # Every scalar as the text it is: a workflow's `LIMIT_JEST: yes` is the word `yes` to
        # GitHub (YAML 1.2), not PyYAML's True.
        return mapping(yaml.load(text(path) or "{}", Loader=yaml.BaseLoader))  # noqa: S506 (builds str, list, dict only)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return {}


def words(command: str) -> list[str]:
    """The command's words, the variables ralph cannot know dropped; [] for what is no shell line."""
    try:
        split = shlex.split(command, comments=True)
    except ValueError:
        return []
    return [word for word in split if not VARIABLE.fullmatch(word)]


def lines(script: object) -> list[str]:
    """A `run:`/`script:` block as its command lines: continuations joined, comments dropped."""
    items = script if isinstance(script, list) else [script]
    joined = "\n".join(item for item in items if isinstance(item, str)).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def environment(*levels: object) -> tuple[tuple[str, str], ...]:
    """The variables a workflow sets, the later level winning: literal values only (a
    `${{ secrets.TOKEN }}` or any other expression is never copied), colour settings left out."""
    chosen: dict[str, str] = {}
    for level in levels:
        for name, value in mapping(level).items():
            value = mapping(value).get("value", value)  # GitLab's {value:, description:}
            if not isinstance(value, str | int | float) or not NAME.fullmatch(name) or COLOUR.search(name):
                continue
            if "${{" not in str(value) and "$" not in str(value):
                chosen[name] = str(value)
    return tuple(sorted(chosen.items()))


def github(top: Path) -> list[Found]:
    folder = top / ".github" / "workflows"
    try:
        files = sorted(path for path in folder.iterdir() if path.suffix in (".yml", ".yaml"))[:MAX_FILES]
    except OSError:
        return []
    return [found for path in files for found in _workflow(path, top)]


def _workflow(path: Path, top: Path) -> list[Found]:
    workflow = yaml_mapping(path)
    source = path.relative_to(top).as_posix()
    commands = []
    for job in map(mapping, mapping(workflow.get("jobs")).values()):
        steps = job.get("steps")
        for step in map(mapping, steps if isinstance(steps, list) else []):
            if "working-directory" in step:  # the command is another folder's
                continue
            env = environment(workflow.get("env"), job.get("env"), step.get("env"))
            commands += [Found(line, source, env) for line in lines(step.get("run"))]
    return commands


def gitlab(top: Path) -> list[Found]:
    pipeline = yaml_mapping(top / ".gitlab-ci.yml")
    commands = []
    for name, job in pipeline.items():
        job = mapping(job)
        if name.startswith(".") or name in GITLAB_KEYWORDS or "script" not in job:
            continue
        env = environment(pipeline.get("variables"), job.get("variables"))
        commands += [Found(line, ".gitlab-ci.yml", env) for line in lines(job.get("script"))]
    return commands


def make_targets(top: Path) -> dict[str, list[str]]:
    """Each Makefile target's recipe lines (the echo-off `@` and ignore-error `-` marks dropped)."""
    targets: dict[str, list[str]] = {}
    recipe: list[str] | None = None
    for line in text(top / "Makefile").splitlines():
        if line.startswith("\t") and recipe is not None:
            recipe.append(line.strip().lstrip("@-+ "))
            continue
        header = re.match(r"([A-Za-z0-9_.-]+)\s*:(?!=)", line)
        recipe = targets.setdefault(header.group(1), []) if header else None
    return targets


def _with_make(found: Found, targets: dict[str, list[str]]) -> list[Found]:
    """A CI line `make test` as what the target runs (one hop), with the CI's variables."""
    split = words(found.command)
    if not split or split[0] != "make":
        return [found]
    named = [word for word in split[1:] if not word.startswith("-") and "=" not in word]
    hop = [Found(line, f"{found.source} → make {name}", found.env) for name in named for line in targets.get(name, [])]
    return [found, *hop]


def tox(top: Path) -> list[Found]:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text(top / "tox.ini"))
    except configparser.Error:
        return []
    sections = [name for name in parser.sections() if name == "testenv" or name.startswith("testenv:")]
    commands = [line for name in sections for line in lines(parser[name].get("commands", ""))]
    return [Found(line.replace("{envpython}", "python"), "tox.ini") for line in commands]


def nox(top: Path) -> list[Found]:
    """`session.run("python", "-m", "unittest")` calls, as the command lines they run."""
    calls = re.findall(r"session\.run\(([^)]*)\)", text(top / "noxfile.py"))
    commands = [" ".join(re.findall(r"[\"']([^\"']*)[\"']", call)) for call in calls]
    return [Found(command, "noxfile.py") for command in commands if command]


def own_commands(top: Path) -> list[Found]:
    """Every command line the project's CI, Makefile (test, check), tox.ini and noxfile.py
    run, the CI's first: what its CI runs is the best first guess."""
    targets = make_targets(top)
    ci = [hop for found in github(top) + gitlab(top) for hop in _with_make(found, targets)]
    made = [Found(line, f"Makefile: {name}") for name in ("test", "tests", "check") for line in targets.get(name, [])]
    return ci + made + tox(top) + nox(top)
