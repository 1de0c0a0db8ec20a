"""Records outlive the ralph that wrote them: old formats read and resume, newer ones and
broken ones are named, never taken for a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.repos import git
from helpers.running import ralph

from ralph.records import ledger
from ralph.records.formats import FORMAT, LapRecord

BUNDLE = Path(__file__).parent / "fixtures" / "format1-run.bundle"


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    """The repository of a run ralph 0.1 started and stopped (format 1: no format key)."""
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "scratch", str(repo))
    git(repo, "fetch", "-q", str(BUNDLE), "refs/*:refs/*")
    git(repo, "checkout", "-q", "main")
    return repo


def rewrite_note(repo: Path, lap: int, change) -> None:
    commit = git(repo, "rev-parse", f"refs/ralph/old/laps/{lap}")
    text = git(repo, "notes", "--ref", "ralph", "show", commit)
    git(repo, "notes", "--ref", "ralph", "add", "-f", "-m", change(text), commit)


def test_a_run_written_in_format_1_reads_as_it_was(old_run: Path):
    laps = json.loads(ralph(old_run, "log", "--json").stdout)["laps"]
    assert [(lap["lap"], lap["status"], lap["format"]) for lap in laps] == [(1, "green", FORMAT), (2, "red", FORMAT)]
    assert "tests that passed now fail: tests/test_calc.py::test_add" in laps[1]["reason"]
    shown = ralph(old_run, "show", "2").stdout
    assert "interrupted" not in shown and "passing tests 2 → 1" in shown


def test_a_run_written_in_format_1_resumes_and_finishes(old_run: Path):
    result = ralph(old_run, "run", "--name", "old", "--max-laps", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    laps = json.loads(ralph(old_run, "log", "--json").stdout)["laps"]
    assert [lap["status"] for lap in laps] == ["green", "red", "green"] and laps[2]["done"]
    assert git(old_run, "show", "ralph/old:NOTES.md") == "notes"


def test_a_note_from_a_newer_ralph_is_named_and_the_run_not_resumed(old_run: Path):
    rewrite_note(old_run, 2, lambda text: json.dumps(dict(json.loads(text), format=99)))
    expected = f"the note of lap 2 was written by a newer ralph (format 99; this one reads up to {FORMAT})"
    assert expected in ralph(old_run, "show", "2").stdout
    assert "ralph to read it" in ralph(old_run, "log").stdout  # the line cut to the width, its end kept
    result = ralph(old_run, "run", "--name", "old", "--max-laps", "3")
    assert result.returncode == 1 and expected in result.stderr and "upgrade ralph" in result.stderr
    assert git(old_run, "for-each-ref", "refs/ralph/old/laps/").count("\n") == 1  # no lap 3


def test_a_run_record_from_a_newer_ralph_is_one_clear_line(old_run: Path):
    blob = git(old_run, "rev-parse", "refs/ralph/old/run")
    record = json.loads(git(old_run, "cat-file", "blob", blob))
    (old_run.parent / "newer.json").write_text(json.dumps(dict(record, format=FORMAT + 1)))
    newer = git(old_run, "hash-object", "-w", str(old_run.parent / "newer.json"))
    git(old_run, "update-ref", "refs/ralph/old/run", newer)
    result = ralph(old_run, "log")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"the record of run 'old' was written by a newer ralph (format {FORMAT + 1}" in result.stderr


def test_an_unreadable_note_says_why_instead_of_calling_it_a_crash(old_run: Path):
    rewrite_note(old_run, 1, lambda text: text.replace('"status": "green"', '"status": "purple"'))
    laps = json.loads(ralph(old_run, "log", "--json").stdout)["laps"]
    assert laps[0]["problem"].startswith(
        "unreadable note: status: Input should be 'green', 'red', 'error' or 'limited'"
    )
    assert "unreadable note" in ralph(old_run, "show", "1").stdout


@pytest.mark.parametrize("value", ["--output=/tmp/x", "HEAD", "abc123", "A" * 40, "0" * 41])
def test_a_commit_in_a_note_or_record_is_a_full_object_id_or_the_note_does_not_read(old_run: Path, value: str):
    """A stored commit reaches git's command line (`git diff PARENT`, `git rev-list BASE..`):
    only what git writes as an object id is read as one, never an option or a name."""
    rewrite_note(old_run, 2, lambda text: json.dumps(dict(json.loads(text), parent=value)))
    laps = json.loads(ralph(old_run, "log", "--json").stdout)["laps"]
    assert laps[1]["problem"].startswith("unreadable note: parent: String should match pattern")
    shown = ralph(old_run, "show", "2")
    assert shown.returncode == 0 and "unreadable note" in shown.stdout
    blob = git(old_run, "rev-parse", "refs/ralph/old/run")
    record = json.loads(git(old_run, "cat-file", "blob", blob))
    (old_run.parent / "record.json").write_text(json.dumps(dict(record, base=value)))
    git(
        old_run,
        "update-ref",
        "refs/ralph/old/run",
        git(old_run, "hash-object", "-w", str(old_run.parent / "record.json")),
    )
    result = ralph(old_run, "report", "-o", str(old_run.parent / "report.html"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "the record of run 'old' does not read: base: String should match pattern" in result.stderr
    assert not (old_run.parent / "report.html").exists() and not Path("/tmp/x").exists()


def test_a_notes_fallback_is_the_agent_index_and_keeps_its_key(old_run: Path):
    """The code names it agent_index; a note keeps the key every ralph since format 5 wrote."""
    rewrite_note(old_run, 2, lambda text: json.dumps(dict(json.loads(text), fallback=1)))
    state = ledger.load(old_run, "old")
    assert state is not None and state.laps[1].record is not None
    record = state.laps[1].record
    assert record.agent_index == 1
    written = json.loads(record.model_dump_json(indent=1))
    assert written["fallback"] == 1 and "agent_index" not in written
    assert LapRecord.model_validate_json(record.model_dump_json(indent=1)) == record
    assert json.loads(ralph(old_run, "log", "--json").stdout)["laps"][1]["fallback"] == 1
