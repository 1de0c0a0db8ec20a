"""Which tools of an MCP server a model is offered, and under what name.

Only tools that read are offered, unless `mcp.allow_writes` names one (`removal`), and only
those whose declaration a request can carry (`unfit`); each is called mcp__<server>__<tool>
(`model_name`).
"""

from __future__ import annotations

import hashlib
import json
import re
from fnmatch import fnmatchcase
from typing import Any

PREFIX = "mcp__"
NAME_MAX = 64  # characters of a tool's name, as the chat completions API allows
SCHEMA_MAX = 8 * 1024  # characters of a tool's input schema as JSON; a larger one is not offered

# What makes an unannotated tool a write, by the words of its name and description, in the
# imperative (create_page) or the third person (Creates a page); other forms (created, running)
# say more often what a read returns than what a tool does. WRITE_VERBS are writes wherever they
# stand; VERB_OR_NOUN words (a report, a tag) only as the first word, where a verb goes.
# Wrongly removing a read costs a line in allow_writes; wrongly offering a write can cost the
# user's data: the lists err on the side of removing.
WRITE_VERBS = frozenset(
    """add append approve archive assign cancel checkout cherrypick clear click close commit
    create delete deploy destroy detach drag drop edit erase exec execute fill hover import init
    initialize insert install invite invoke kill launch merge migrate mkdir modify move mutate mv
    navigate overwrite patch post press publish purge push put reboot rebase remove rename reopen
    replace rerun reset restart restore retry revert revoke rm rmdir run send shutdown spawn
    submit subscribe sync terminate transfer trigger truncate unarchive unassign uninstall
    unsubscribe update upgrade upload upsert wipe write""".split()
)
VERB_OR_NOUN = frozenset(
    """apply block book change clone comment configure connect disable disconnect dismiss download
    email emit enable flush fork grant label lock login logout make mark message notify open order
    pause pay pin provision record register reject release reload reply report request resolve
    resume save schedule select set setup share sign star start stash stop store suspend switch
    tag toggle type unblock unlock unpin unstar unwatch vote watch""".split()
)
_PREFIX_VERBS = tuple(verb for verb in WRITE_VERBS if len(verb) >= 4)  # deletepage: one word, a verb first


def removal(server: str, tool: Any, allow_writes: list[str]) -> str | None:
    """Why a listed tool is not offered; None when it reads, or `allow_writes` names it."""
    if any(_allows(pattern, server, tool.name) for pattern in allow_writes):
        return None
    hints = tool.annotations
    if hints is not None and hints.destructive_hint:
        return "marked destructive"
    if hints is not None and hints.read_only_hint is True:
        return None
    if hints is not None and hints.read_only_hint is False:
        return "marked as changing things"
    word = write_word(tool.name, name=True) or _description_word(tool.description or "")
    return f"not annotated, and {word!r} reads as a write" if word else None


def _description_word(description: str) -> str | None:
    """A write verb anywhere in the description, or one that may be a noun opening a sentence."""
    found = write_word(description)
    sentences = re.split(r"(?<=[.!?])\s+|\n+", description.strip())
    return found or next((word for sentence in sentences if (word := write_word(sentence.split(" ")[0]))), None)


def _allows(pattern: str, server: str, tool: str) -> bool:
    """`tool-glob` allows it on any server; `server.tool-glob` on that server only."""
    if "." not in pattern:
        return fnmatchcase(tool, pattern)
    named, _, tool_pattern = pattern.partition(".")
    return named == server and fnmatchcase(tool, tool_pattern)


def write_word(text: str, *, name: bool = False) -> str | None:
    """The word of `text` (a description, or with `name` a tool's name) that makes it a write."""
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", text)
    for position, word in enumerate(words):
        lowered = word.lower()
        stems = {lowered, lowered.removesuffix("s"), lowered.removesuffix("es"), lowered.removesuffix("ies") + "y"}
        if stems & WRITE_VERBS or (position == 0 and stems & VERB_OR_NOUN):
            return word
    if name and len(words) == 1 and words[0].lower().startswith(_PREFIX_VERBS):
        return words[0]
    return None


def unfit(tool: Any) -> str | None:
    """What keeps a tool's declaration out of a request, whatever the tool does: a schema the
    API refuses (the whole request fails, not just the tool) or one too large to send each time."""
    schema = tool.input_schema
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "its input schema is not a JSON object schema"
    if len(json.dumps(schema)) > SCHEMA_MAX:
        return f"its input schema is over {SCHEMA_MAX // 1024} KiB"
    if _array_without_items(schema):
        return "its input schema has an array without `items`, which OpenAI refuses"
    return None


def _array_without_items(schema: object) -> bool:
    if isinstance(schema, list):
        return any(_array_without_items(item) for item in schema)
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if (kind == "array" or (isinstance(kind, list) and "array" in kind)) and "items" not in schema:
        return True
    return any(_array_without_items(value) for value in schema.values())


def model_name(server: str, tool: str, taken: set[str]) -> str:
    """mcp__<server>__<tool>, in the characters and length a tool name may have; a name that
    would be too long or taken ends in a hash of the tool's own instead."""
    name = f"{PREFIX}{server}__{re.sub(r'[^A-Za-z0-9_-]', '_', tool)}"
    if len(name) > NAME_MAX or name in taken:
        digest = hashlib.sha256(f"{server}/{tool}".encode()).hexdigest()[:8]
        name = f"{name[: NAME_MAX - 9]}_{digest}"
    return name
