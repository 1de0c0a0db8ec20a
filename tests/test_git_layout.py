"""The git model written once: every ref name and run folder is spelled in ralph/git/layout.py,
and the names are a stored format (runs started by an older ralph are read by their refs)."""

from __future__ import annotations

from pathlib import Path

import ralph
from ralph.git import layout
from ralph.git.layout import RunRefs

PACKAGE = Path(ralph.__file__).parent
SPELLINGS = ("refs/ralph", "refs/heads/ralph", "refs/notes/ralph")


def test_no_module_but_the_layout_spells_a_ref_name():
    spelled = {
        str(path.relative_to(PACKAGE)): [word for word in SPELLINGS if word in path.read_text()]
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != Path(layout.__file__)
    }
    assert {path: words for path, words in spelled.items() if words} == {}


def test_the_names_are_those_older_runs_wrote(tmp_path: Path):
    names = RunRefs("r")
    assert (names.branch, names.base, names.record) == ("refs/heads/ralph/r", "refs/ralph/r/base", "refs/ralph/r/run")
    assert (names.lap(3), names.rebased_lap(3), names.landed) == (
        "refs/ralph/r/laps/3",
        "refs/ralph/r/rebased/3",
        "refs/ralph/r/landed",
    )
    assert names.claim("item 1") == "refs/ralph/r/claims/acadda60a86d56e836b3"  # the item's text's hash
    assert (names.started_lap(2), names.numbered, names.worker(1), names.message(7)) == (
        "refs/ralph/r/started/2",
        "refs/ralph/r/numbered",
        "refs/ralph/r/workers/1",
        "refs/ralph/r/told/7",
    )
    assert (layout.NOTES, layout.FETCHED_NOTES) == ("refs/notes/ralph", "refs/ralph-remote/notes")
    assert layout.lap_dir(layout.run_dir(tmp_path, "r"), 2) == tmp_path / "ralph" / "r" / "lap-2"


def test_a_record_ref_names_its_run_and_numbered_refs_their_numbers():
    assert layout.run_of_record("refs/ralph/r/run") == "r"
    assert [layout.run_of_record(ref) for ref in ("refs/ralph/r/laps/1", "refs/ralph/r/x/run", "refs/heads/r")] == [
        None,
        None,
        None,
    ]
    laps = {
        "refs/ralph/r/laps/10": "b",
        "refs/ralph/r/laps/9": "a",
        "refs/ralph/r/laps/x": "c",
        "refs/ralph/r/base": "d",
    }
    assert layout.numbered(RunRefs("r").laps, laps) == {9: "a", 10: "b"}
