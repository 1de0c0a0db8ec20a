"""The README and docs/ say what the code does: the configuration reference against the
pydantic models, exit codes, commands and their options, events, `ralph log`'s columns,
the record format, links between pages. A statement here that drifts from the code fails."""

from __future__ import annotations

import json
import re
import tokenize
import types
import typing
from collections.abc import Iterator
from pathlib import Path

import click
import yaml
from helpers.repos import git, make_repo
from helpers.running import ralph
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ralph.cli import main
from ralph.config import DEFAULT_PROTECT, Config
from ralph.errors import Exit

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]
ROW = re.compile(r"^\| `([^`]+)` \| (.*?) \| (.*) \|$", re.MULTILINE)
PLACEHOLDER = re.compile(r"<[^>]*>")
# `ralph lap <n>` is the subject of a lap commit that ticked nothing, not a command.
NOT_COMMANDS = {"lap"}


def read(name: str) -> str:
    return (ROOT / name).read_text()


def section(text: str, start: str, end: str | None = None) -> str:
    begin = text.index(start)
    return text[begin : text.index(end, begin) if end else len(text)]


def held_model(annotation: object) -> tuple[str, type[BaseModel] | None]:
    """The section model a field holds, directly or in a list, dict or optional, and the key
    suffix that reaches into it (`[]` for a list's items, `.<>` for a dict's values)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "", annotation
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list:
        suffix, model = held_model(args[0])
        return "[]" + suffix, model
    if origin is dict:
        suffix, model = held_model(args[1])
        return ".<>" + suffix, model
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            suffix, model = held_model(arg)
            if model:
                return suffix, model
    return "", None


def config_keys(
    model: type[BaseModel] = Config, prefix: str = "", seen: frozenset[type[BaseModel]] = frozenset()
) -> Iterator[tuple[str, FieldInfo, bool]]:
    """Every key of ralph.yaml as (dotted key, its field, whether it is a plain section), walking
    the models from the top one, so that the walk follows the code wherever its modules live."""
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        suffix, held = held_model(field.annotation)
        yield key, field, held is not None and field.annotation is held
        if held is not None and held not in seen | {model}:  # agent.fallback holds agents again
            yield from config_keys(held, key + suffix + ".", seen | {model})


def documented() -> dict[str, tuple[str, str]]:
    """The reference's keys: a table row per key (its default cell and description), and a
    heading per section."""
    text = (DOCS / "configuration.md").read_text()
    rows = {PLACEHOLDER.sub("<>", key): (default, what) for key, default, what in ROW.findall(text)}
    headings = re.findall(r"^## `([a-z_]+)`$", text, re.MULTILINE)
    return rows | {key: ("", "") for key in headings if key not in rows}


def test_every_configuration_key_is_documented_and_every_documented_key_exists() -> None:
    keys = {key: plain_section for key, _, plain_section in config_keys()}
    docs = documented()
    missing = [key for key, plain_section in keys.items() if not plain_section and key not in docs]
    assert missing == []
    assert sorted(set(docs) - set(keys)) == []


def test_the_defaults_the_reference_states_are_the_models() -> None:
    docs = documented()
    for key, field, plain_section in config_keys():
        if key not in docs or plain_section:
            continue
        cell = docs[key][0]
        if field.is_required():
            assert cell == "required", key
            continue
        default = field.get_default(call_default_factory=True)
        stated = re.fullmatch(r"`([^`]*)`", cell)
        assert stated, (key, cell)
        if not isinstance(default, BaseModel):  # `sandbox: auto` is a mapping's short form
            assert yaml.safe_load(stated.group(1)) == default, (key, cell, default)


def test_the_keys_named_in_prose_exist() -> None:
    keys = {PLACEHOLDER.sub("<>", key) for key, _, _ in config_keys()}
    named = re.compile(r"`((?:limits|sandbox|roles|mcp|hooks|commit|files|env)\.[a-z_.<>]+)`")
    for page in PAGES:
        for key in named.findall(page.read_text()):
            assert PLACEHOLDER.sub("<>", key) in keys, (page.name, key)


def test_the_default_protect_list_in_prose_is_the_code() -> None:
    prose = section((DOCS / "trust.md").read_text(), "**Default `protect` list:**", "Patterns follow")
    listed = re.findall(r"`([^`]+)`", prose)
    assert [pattern for pattern in dict.fromkeys(listed) if pattern in DEFAULT_PROTECT] == DEFAULT_PROTECT


def test_the_exit_code_table_is_the_code() -> None:
    table = section((DOCS / "commands.md").read_text(), "## Exit codes of `ralph run`")
    rows = re.findall(r"^\| (\d+) \| `([A-Z_]+)` \|", table, re.MULTILINE)
    assert [(int(code), name) for code, name in rows] == sorted((exit.value, exit.name) for exit in Exit)
    kept = re.findall(r"`([a-z_]+)`", table.split("keep the words they had")[1])
    assert kept == [Exit(code).status for code in (5, 6, 7)]


def option_names(command: click.Command) -> set[str]:
    names = {opt for param in command.params for opt in param.opts}
    for sub in getattr(command, "commands", {}).values():
        names |= option_names(sub)
    return names


def test_the_commands_table_is_the_cli() -> None:
    table = section((DOCS / "commands.md").read_text(), "| command |", "`--run` defaults")
    rows = re.findall(r"^\| `ralph ([a-z]+)([^`]*)` \|", table, re.MULTILINE)
    assert sorted(name for name, _ in rows) == sorted(main.commands)
    for name, usage in rows:
        for option in re.findall(r"--[a-z-]+|-o\b", usage):
            assert option in option_names(main.commands[name]), (name, option)


def test_every_command_the_pages_name_exists() -> None:
    for page in PAGES:
        for name in re.findall(r"`(?:git )?ralph ([a-z][a-z-]*)", page.read_text()):
            assert name in main.commands or name in NOT_COMMANDS, (page.name, name)


def test_the_events_table_lists_every_event_with_the_fields_it_has() -> None:
    from ralph.show.events import TYPES

    table = section((DOCS / "watching.md").read_text(), "## Events: `--events FILE`", "## The report")
    rows = dict(re.findall(r"^\| `(\w+)` \| (.+) \|$", table, re.MULTILINE))
    assert set(rows) == set(TYPES)
    for kind, fields in rows.items():
        for field in re.findall(r"^`(\w+)`|, `(\w+)`", fields):
            name = next(part for part in field if part)
            assert name in TYPES[kind], (kind, name)


def test_the_presets_table_is_the_presets() -> None:
    from ralph.facts.presets import PRESETS

    table = section((DOCS / "agents.md").read_text(), "| preset |", "\n\n")
    rows = [line.strip("|").split(" | ") for line in table.splitlines() if line.startswith("| `")]
    assert [row[0].strip(" `") for row in rows] == list(PRESETS)
    provider_keys = re.findall(r"`(\w+)`", section((DOCS / "agents.md").read_text(), "¹ `OPENAI_API_KEY`", ":"))
    channels = {"stdin": "stdin", "file": "a file", "task-config": "a config file²"}
    for name, command, prompt, credentials, _reports, _kept_out, checked in rows:
        preset = PRESETS[name.strip(" `")]
        assert command.strip("`") == preset.command and channels[preset.prompt] == prompt, name
        assert checked.strip().startswith(preset.written_for), name
        listed = re.findall(r"`(\w+)`", credentials) + (provider_keys if "provider keys¹" in credentials else [])
        assert sorted(listed) == sorted(preset.credentials), name


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    return {slug(heading) for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def test_every_link_between_pages_reaches_a_file_and_heading() -> None:
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), (page.name, target)
            if anchor:
                assert anchor in anchors(linked), (page.name, target)


def test_the_readme_links_every_page_of_docs() -> None:
    readme = read("README.md")
    assert [page.name for page in sorted(DOCS.glob("*.md")) if f"(docs/{page.name})" not in readme] == []


def test_the_two_set_up_commands_are_in_the_readme_and_ci_runs_the_test_one() -> None:
    readme = read("README.md")
    assert "```sh\npip install -e . && ralph demo\n```" in readme
    assert "```sh\npip install -e '.[dev]' && python -m pytest -n 4 --cov\n```" in readme
    assert "\npip install -e '.[dev]' && python -m pytest -n 4 --cov\n" in read(".ci/run")


def test_the_design_page_names_every_entry_of_the_package() -> None:
    design = (DOCS / "design.md").read_text()
    entries = sorted(
        path.name + ("/" if path.is_dir() else "")
        for path in (ROOT / "ralph").iterdir()
        if path.name not in ("__init__.py", "__main__.py", "__pycache__")
    )
    assert [entry for entry in entries if not re.search(rf"^  {re.escape(entry)} ", design, re.MULTILINE)] == []


def test_a_runs_log_columns_show_line_and_record_format_are_as_documented(tmp_path: Path) -> None:
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": "sed -i 's/\\[ \\]/[x]/' TODO.md && echo x > x.txt"},
        "checks": ["true"],
    }
    repo = make_repo(tmp_path / "repo", {"TODO.md": "- [ ] a\n", "ralph.yaml": json.dumps(config)})
    run = ralph(repo, "run", "--name", "d")
    assert run.returncode == 0, run.stdout + run.stderr
    watching = (DOCS / "watching.md").read_text()
    documented_header = section(watching, "```\nlap ", "\n1 ").split()[1:]
    header = next(line for line in ralph(repo, "log").stdout.splitlines() if line.startswith("lap "))
    assert header.split() == documented_header
    assert "(prepare " in ralph(repo, "show", "1").stdout  # docs/environments.md: prepare in ralph show
    note = json.loads(git(repo, "notes", "--ref=ralph", "show", "refs/ralph/d/laps/1"))
    assert "prepare_s" in note
    stated = re.search(r"carries `format` \(now\s+(\d+);", (DOCS / "design.md").read_text())
    assert stated and int(stated.group(1)) == note["format"]


# A pointer at the docs in ralph's own strings and comments: a page, and maybe the section of
# it (`docs/sandbox.md`, `docs/agents.md: Presets`); a message that sends a user to a section
# that moved sends them nowhere.
POINTER = re.compile(r"\b(README(?:\.md)?|docs/[\w-]+\.md)(?:: ([A-Z][\w-]*(?: [\w-]+)*))?")


def headings(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    return re.findall(r"^#+ (.+)$", text, re.MULTILINE)


def pointers_in_ralph() -> Iterator[tuple[str, str, str]]:
    """Each pointer of ralph/'s strings and comments, as (module, page, section or "")."""
    for path in sorted((ROOT / "ralph").rglob("*.py")):
        with path.open("rb") as source:
            words = [
                token.string
                for token in tokenize.tokenize(source.readline)
                if token.type in (tokenize.STRING, tokenize.COMMENT)
            ]
        for found in POINTER.finditer("\n".join(words)):
            yield str(path.relative_to(ROOT)), found.group(1), found.group(2) or ""


def test_every_pointer_at_the_docs_in_ralph_names_a_page_and_section_that_exist() -> None:
    pointers = list(pointers_in_ralph())
    assert len(pointers) > 10  # ralph's messages point users at the docs: the look finds them
    for module, name, wanted in pointers:
        page = ROOT / ("README.md" if name.startswith("README") else name)
        assert page.is_file(), (module, name)
        if wanted:
            sections = headings(page)
            assert any(
                heading == wanted or heading.startswith((f"{wanted}: ", f"{wanted} (")) for heading in sections
            ), (module, name, wanted, sections)
