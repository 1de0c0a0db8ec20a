"""A run's start and its resumes: the configuration it keeps, and the note when the file differs."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.repos import git, make_repo
from helpers.running import lap_notes, ralph

from ralph.agents.scripted import ScriptedServer, Step, finish, tool_call

NOTE = "the config file differs from the configuration this run started with"


def writes(name: str) -> list[Step]:
    """A lap of the scripted model: it writes NAME.txt and ticks its item."""
    edit = "str_replace_based_edit_tool"
    item = f"Write {name}.txt"
    return [
        tool_call(edit, {"command": "create", "path": f"{name}.txt", "file_text": f"{name}\n"}),
        tool_call(
            edit, {"command": "str_replace", "path": "TODO.md", "old_str": f"- [ ] {item}", "new_str": f"- [x] {item}"}
        ),
        finish(f"wrote {name}.txt"),
    ]


def test_max_laps_on_the_command_line_is_no_change_of_the_file(tmp_path: Path):
    """--max-laps holds for the `ralph run` it is given to: a plain `ralph run` then goes on to
    the file's max_laps without a word about the file; the note comes when the file changes."""
    with ScriptedServer(writes("a") + writes("b") + writes("c")) as server:
        agent = {"kind": "openai", "model": "scripted-1", "base_url": server.base_url}
        config = {"goal": "Write three files", "agent": agent, "checks": ["true"], "limits": {"max_laps": 2}}
        repo = make_repo(tmp_path / "repo", config=config, todo=["Write a.txt", "Write b.txt", "Write c.txt"])
        first = ralph(repo, "run", "--max-laps", "1")
        assert first.returncode == 3 and "max_laps (1) reached" in first.stdout, first.stdout + first.stderr

        plain = ralph(repo, "run")
        said = plain.stdout + plain.stderr
        assert plain.returncode == 3 and NOTE not in said, said
        assert "resuming run" in said and "max_laps (2) reached" in said  # the file's, not the last flag's

        (repo / "ralph.yaml").write_text(json.dumps({**config, "limits": {"max_laps": 2, "stagnation": 5}}))
        changed = ralph(repo, "run", "--max-laps", "3")
        said = changed.stdout + changed.stderr
        assert changed.returncode == 0 and NOTE in said, said
    runs = git(repo, "for-each-ref", "--format=%(refname:lstrip=3)", "refs/heads/ralph/").split()
    assert len(runs) == 1 and [note["status"] for note in lap_notes(repo, runs[0])] == ["green"] * 3
