"""The one decision (ralph/verdict/decide.py): a row per way a lap becomes green, red, error or
limited, and a row per way a decided lap turns red after the fact."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

import ralph.verdict.decide as decide_module
from ralph.agents.base import AgentResult
from ralph.agents.judge import JudgeRecord
from ralph.facts.pytest_results import TestCounts, TestResults
from ralph.todo import Counts
from ralph.verdict.checks import CheckResult
from ralph.verdict.decide import (
    CannotCheck,
    Checked,
    CommitFacts,
    Evidence,
    LapStatus,
    Overrule,
    Verdict,
    decide,
    overruled,
    wants_checks,
    wants_judge,
)
from ralph.verdict.guard import GuardReport

GREEN, RED, ERROR, LIMITED = LapStatus.GREEN, LapStatus.RED, LapStatus.ERROR, LapStatus.LIMITED


def pytest_check(passed: list[str], failing: tuple[str, ...] = (), exit_code: int = 0, **more: str) -> CheckResult:
    counts = TestCounts(passed=len(passed), failed=len(failing))
    tests = TestResults(counts=counts, passed_ids=sorted(passed), failing_ids=list(failing))
    return CheckResult(command="pytest", exit_code=exit_code, duration_s=1, tests=tests, output_tail="the tail", **more)


def agent(outcome: str = "ok", detail: str = "") -> AgentResult:
    return AgentResult(kind="command", outcome=outcome, duration_s=1, detail=detail)


LAST_GREEN = [pytest_check(["t::a"])]
COMMIT = CommitFacts(files_changed=2, ticked=["Add b"], todo_before=Counts(open=2, done=0), todo=Counts(open=1, done=1))
LAP = Evidence(
    agent=agent(),
    commit=COMMIT,
    guard=GuardReport(),
    checks=Checked(results=[pytest_check(["t::a", "t::b"])], removed=[]),
    last_green=LAST_GREEN,
    strict=True,
)
SPLIT = Evidence(
    agent=None,
    commit=CommitFacts(files_changed=1, todo_before=Counts(open=1, done=0), todo=Counts(open=3, done=0), split=True),
    checks=Checked(results=[pytest_check(["t::a"])], removed=[]),
    last_green=LAST_GREEN,
    strict=True,
    kind="split",
)
IN_LAP = Evidence(
    agent=None,
    commit=CommitFacts(files_changed=1),
    guard=GuardReport(grants=("tests/",)),
    checks=Checked(results=[pytest_check(["t::a"])], removed=[]),
    last_green=LAST_GREEN,
    strict=True,
    kind="in_lap",
)
REGRESSED = Checked(results=[pytest_check([], failing=("t::a",), exit_code=1)], removed=["cache/x.pyc"])
DONE = replace(COMMIT, todo=Counts(open=0, done=2))
PASSED = JudgeRecord(status="passed", score=0.9)
HELD = JudgeRecord(status="held", score=0.4, blocking=["test the edge case"])
UNAVAILABLE = JudgeRecord(status="unavailable", detail="judge unavailable: 503")
NESTED = "the lap made repositories inside the tree, whose files no commit holds: vendor/x — commit their files"
SPLIT_REFUSED = CommitFacts(files_changed=0, refusal=("the planner's split was refused: 1 item(s)", "- one"))

# id, evidence, status, reason (the whole of it, or the part named), progress, done
ROWS = [
    ("green: ticked an item", LAP, GREEN, "all checks pass", True, False),
    ("green: the last item ticked, done", replace(LAP, commit=DONE), GREEN, "all checks pass", True, True),
    (
        "green: no tick, more tests pass",
        replace(LAP, commit=replace(COMMIT, ticked=[])),
        GREEN,
        "all checks pass",
        True,
        False,
    ),
    (
        "green: no tick, no test more",
        replace(LAP, commit=replace(COMMIT, ticked=[]), checks=Checked(results=LAST_GREEN, removed=[])),
        GREEN,
        "all checks pass",
        False,
        False,
    ),
    ("agent error", replace(LAP, agent=agent("error", "\n 503 down\nmore")), ERROR, "agent error: 503 down", 0, 0),
    ("agent limited", replace(LAP, agent=agent("limited", "usage limit")), LIMITED, "usage limit", False, False),
    ("agent failed", replace(LAP, agent=agent("failed", "exit 2")), RED, "exit 2", False, False),
    ("agent timed out, no detail", replace(LAP, agent=agent("timeout")), RED, "no detail", False, False),
    (
        "the hooks refused the commit",
        replace(LAP, commit=replace(COMMIT, refusal=("pre-commit hook refused", "flake8: E501"))),
        RED,
        "pre-commit hook refused",
        False,
        False,
    ),
    ("changed nothing", replace(LAP, commit=CommitFacts(files_changed=0)), RED, "the lap changed nothing", 0, 0),
    ("nested repositories", replace(LAP, commit=replace(COMMIT, nested=["vendor/x"])), RED, NESTED, False, False),
    (
        "cannot check, after what the guard found",
        replace(LAP, guard=GuardReport(problems=["protected file changed: ci.yml"]), checks=CannotCheck("setup: x")),
        RED,
        "protected file changed: ci.yml; setup: x",
        False,
        False,
    ),
    ("a check regressed", replace(LAP, checks=REGRESSED), RED, "check regressed: `pytest` (exit 1)", False, False),
    (
        "strict: files deleted count",
        replace(LAP, checks=REGRESSED),
        RED,
        "were deleted before the checks: cache/x.pyc",
        0,
        0,
    ),
    (
        "a check could not run",
        replace(LAP, checks=Checked(results=[pytest_check([], could_not_run="no pytest")], removed=[])),
        RED,
        "check could not run: `pytest`: no pytest",
        False,
        False,
    ),
    (
        "the guard found a problem",
        replace(LAP, guard=GuardReport(problems=["changed outside scope: x.py"])),
        RED,
        "changed outside scope: x.py",
        False,
        False,
    ),
    (
        "ticks with nothing done",
        replace(
            LAP,
            guard=GuardReport(idle_ticks="ticked with no change: Add b"),
            checks=Checked(results=LAST_GREEN, removed=[]),
        ),
        RED,
        "ticked with no change: Add b",
        False,
        False,
    ),
    (
        "ticks, and a test passes now",
        replace(LAP, guard=GuardReport(idle_ticks="idle")),
        GREEN,
        "all checks pass",
        1,
        0,
    ),
    ("judge passed", replace(LAP, commit=DONE, judge=PASSED), GREEN, "all checks pass; the judge scored 0.9", 1, 1),
    (
        "judge unavailable: the checks alone",
        replace(LAP, commit=DONE, judge=UNAVAILABLE),
        GREEN,
        "all checks pass; judge unavailable: 503 (judged by the checks alone)",
        True,
        False,
    ),
    (
        "judge held it back",
        replace(LAP, judge=HELD, threshold=0.7),
        RED,
        "judge: score 0.4 below 0.7, blocking: test the edge case",
        False,
        False,
    ),
    ("split: green", SPLIT, GREEN, "split into 2 steps; all checks pass", True, False),
    ("split: strict does not count", replace(SPLIT, checks=REGRESSED), RED, "check regressed: `pytest` (exit 1)", 0, 0),
    ("split: cannot check", replace(SPLIT, checks=CannotCheck("setup: y", "log")), RED, "setup: y", False, False),
    ("split: refused", replace(SPLIT, commit=SPLIT_REFUSED), RED, "the planner's split was refused: 1 item(s)", 0, 0),
    (
        "in the lap: nothing changed",
        replace(IN_LAP, commit=CommitFacts(files_changed=0)),
        RED,
        "the lap changed nothing",
        0,
        0,
    ),
    (
        "in the lap: regressed",
        replace(IN_LAP, checks=REGRESSED),
        RED,
        "check regressed: `pytest` (exit 1)",
        False,
        False,
    ),
    ("in the lap: green", IN_LAP, GREEN, "all checks pass", False, False),
]


@pytest.mark.parametrize(
    ("evidence", "status", "reason", "progress", "done"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS]
)
def test_one_decision_for_every_way_a_lap_ends(evidence: Evidence, status: LapStatus, reason: str, progress, done):
    verdict = decide(evidence)
    assert (verdict.status, verdict.progress, verdict.done) == (status, bool(progress), bool(done))
    assert reason in verdict.reason


def test_what_each_verdict_keeps_of_its_evidence():
    assert decide(replace(LAP, agent=agent("error", "503\nmore"))).output_tail == "503\nmore"
    refused = decide(replace(LAP, commit=replace(COMMIT, refusal=("hook refused", "E501"))))
    assert (refused.output_tail, refused.files_changed) == ("E501", 2)
    cannot = decide(
        replace(LAP, guard=GuardReport(problems=["p"], protected_touched=["ci.yml"]), checks=CannotCheck("x", "log"))
    )
    assert (cannot.output_tail, cannot.files_changed, cannot.guard, cannot.checks) == ("log", 2, GuardReport(), [])
    regressed = decide(replace(LAP, checks=REGRESSED))
    assert (regressed.output_tail, regressed.checks, regressed.removed) == (
        "the tail",
        REGRESSED.results,
        ["cache/x.pyc"],
    )
    assert decide(replace(LAP, checks=REGRESSED, strict=False)).reason == regressed.reason.rsplit("; files the", 1)[0]
    held = decide(replace(LAP, judge=HELD, threshold=0.7))
    assert held.judge == HELD and held.output_tail.startswith("The judge held the lap back (score 0.4).")
    assert decide(SPLIT).guard == GuardReport()
    assert "deleted" not in decide(replace(SPLIT, checks=REGRESSED)).reason  # a split's commit is ralph's own


def test_the_lap_asks_for_the_checks_and_the_judge_only_when_they_can_change_the_verdict():
    assert wants_checks(replace(LAP, checks=None))
    assert not wants_checks(replace(LAP, agent=agent("error"), checks=None))
    assert not wants_checks(replace(IN_LAP, commit=CommitFacts(files_changed=0), checks=None))
    with pytest.raises(ValueError, match="needs its checks"):
        decide(replace(LAP, checks=None))
    assert wants_judge(decide(LAP))
    assert not wants_judge(decide(replace(LAP, checks=REGRESSED)))
    assert not wants_judge(decide(replace(LAP, judge=UNAVAILABLE)))


OVERRULES = [
    (
        Overrule.STRAY_TICKS,
        ("Write c.txt",),
        "ticked items it did not claim, which other laps work on: Write c.txt",
        "",
    ),
    (
        Overrule.TAMPERED,
        (".git/config",),
        "the lap changed the repository outside its workspace, restored: .git/config",
        "",
    ),
    (
        Overrule.DISK_FREED,
        ("2.0 GiB",),
        "the lap filled the disk of its workspace; its files were deleted, and 2.0 GiB is free again",
        "",
    ),
    (
        Overrule.DISK_FULL,
        ("the disk is full", 7),
        "the disk is full, not with the lap's files",
        "the disk is full, and not with lap 7's files (deleted) — free some space, then `ralph run` goes on",
    ),
    (Overrule.LOST_CLAIMS, (), "its claims were let go of during the lap (its worker was taken for dead", ""),
    (Overrule.LINE_MOVED, (), "the green line kept moving during the lap; not advanced", ""),
    (
        Overrule.REBASE_CONFLICT,
        ("abc1234567", "a.py, b.py"),
        "conflict: the green line moved to abc1234567 during the lap, and the lap's changes to a.py, b.py conflict with it",
        "",
    ),
    (Overrule.UNLANDED_INTERRUPTED, (), "interrupted before it landed; its items are done again", ""),
    (Overrule.NEVER_LANDED, (), "its slot or worker died before the lap landed", ""),
]


@pytest.mark.parametrize(("why", "facts", "reason", "stop"), OVERRULES, ids=[row[0].name for row in OVERRULES])
def test_every_red_after_the_fact(why: Overrule, facts: tuple[object, ...], reason: str, stop: str):
    green = decide(replace(LAP, commit=DONE))
    assert (green.status, green.progress, green.done) == (GREEN, True, True)
    red = overruled(green, why, *facts, output_tail="why")
    assert red == Verdict(status=RED, reason=red.reason, output_tail="why", files_changed=2, stop=stop)
    assert red.reason.startswith(reason)
    assert overruled(None, why, *facts).files_changed == 0


def test_every_overrule_has_a_row():
    assert {row[0] for row in OVERRULES} == set(Overrule)


STATUS_WORDS = {status.value for status in LapStatus}
DECIDES = Path(decide_module.__file__)


def _made_statuses(source: str) -> list[str]:
    """Where `source` makes a lap's status rather than reading one: a LapStatus member anywhere
    but compared (`==`, `in (…)`) or looked up (a dict's key); LapStatus(…) called; a status
    word given as `status=` or as a dict's "status"."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    made = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "LapStatus":
            up = parents[node]
            if isinstance(up, ast.Tuple | ast.List | ast.Set):
                up = parents[up]
            read = isinstance(up, ast.Compare) or (isinstance(up, ast.Dict) and node in up.keys)
            if not read:
                made.append(f"{node.lineno}: {ast.unparse(up)[:80]}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "LapStatus":
            made.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
        elif isinstance(node, ast.keyword) and node.arg == "status" and _a_status_word(node.value):
            made.append(f"{node.value.lineno}: status={ast.unparse(node.value)}")
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "status" and _a_status_word(value):
                    made.append(f"{value.lineno}: 'status': {ast.unparse(value)}")
    return made


def _a_status_word(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value in STATUS_WORDS


def test_a_lap_is_made_green_or_red_in_verdict_decide_and_nowhere_else():
    made = {
        str(path.relative_to(DECIDES.parents[2])): found
        for path in sorted(DECIDES.parents[1].rglob("*.py"))
        if path != DECIDES and (found := _made_statuses(path.read_text()))
    }
    assert made == {}
    assert _made_statuses(DECIDES.read_text())  # where they are made: the finder finds them


def test_the_finder_tells_making_a_status_from_reading_one():
    reading = """
if record.status == LapStatus.GREEN and status not in (LapStatus.ERROR, LapStatus.LIMITED):
    colour = {LapStatus.RED: "red"}[record.status]
"""
    assert _made_statuses(reading) == []
    making = """
status = LapStatus.RED
judged = Judged(status=LapStatus.GREEN, reason="")
red = record.model_copy(update=dict(status=LapStatus.RED))
kind = {"error": LapStatus.ERROR}.get(outcome, LapStatus.RED)
parsed = LapStatus("red")
note = record.model_copy(update={"status": "red"})
again = dict(status="green")
"""
    assert sorted(int(line.split(":")[0]) for line in _made_statuses(making)) == [2, 3, 4, 5, 5, 6, 7, 8]
