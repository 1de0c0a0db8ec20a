"""TODO.md is read as markdown: what counts as an item is what a reader of the file sees as one."""

from __future__ import annotations

from pathlib import Path

from helpers.repos import make_repo
from helpers.running import lap_notes, ralph

from ralph.todo import Item, parse

CHECKLIST = """# TODO
- [ ] one
- [x] two
  * [ ] nested
1. [ ] ordered
- [ ] wrapped over
  two lines
- not an item

```
- [ ] an example in a code fence
```
"""


def test_items_are_markdown_list_items_with_a_box():
    assert parse(CHECKLIST) == [
        Item("one", False),
        Item("two", True),
        Item("nested", False),
        Item("ordered", False),
        Item("wrapped over two lines", False),
    ]


def test_a_box_in_a_code_fence_does_not_keep_a_run_from_being_done(tmp_path: Path):
    todo = "- [ ] the job\n\nWrite items like this:\n\n```\n- [ ] an example\n```\n"
    config = {
        "goal": "g",
        "agent": {"kind": "command", "command": "sed -i '1s/\\[ \\]/[x]/' TODO.md && touch x"},
        "checks": ["true"],
    }
    repo = make_repo(tmp_path / "repo", {"TODO.md": todo}, config=config)
    result = ralph(repo, "run", "--name", "r")
    assert result.returncode == 0, result.stdout + result.stderr
    assert lap_notes(repo, "r")[0]["done"] is True
