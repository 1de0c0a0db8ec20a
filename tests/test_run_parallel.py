"""`ralph run --parallel N`: slots run laps side by side on items of their own, rebased and
checked again onto a green line that moved, without a lap's work ever landing unchecked.
After each run, ledger.audit: every commit on the green line has a green note of its own,
every lap its note, and no claim is left behind."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers.jobs import ITEMS_AGENT, items_repo
from helpers.repos import PY, git, make_repo, python_agent
from helpers.running import lap_notes, ralph

from ralph import todo
from ralph.git.store import RefStore
from ralph.lap.rebase import progress_with
from ralph.records import ledger
from ralph.run import claims, parallel
from ralph.verdict.decide import Overrule
from ralph.workspace.places import folder_for


def parallel_run(repo: Path, *args: str) -> subprocess.Popen:
    """`ralph run --name p ARGS` as a process of its own, to be interrupted or killed."""
    return subprocess.Popen(
        [PY, "-m", "ralph", "run", "--name", "p", *args],
        cwd=repo,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def slot_processes(repo: Path, coordinator: int) -> list[int]:
    """The slots of the `ralph run --parallel` in `repo` whose pid is `coordinator`: forks of it,
    with its command line (and, for a moment, a command a slot starts, before it runs)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if b"--parallel" in cmdline and cwd == str(repo) and int(entry.name) != coordinator:
            found.append(int(entry.name))
    return found


def environment_block(pid: int) -> bytes:
    """What /proc shows of a process's environment (nothing, once it ended)."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def test_three_slots_do_every_item_once_and_only_checked_commits_reach_the_green_line(tmp_path: Path):
    items = [f"Write f{number}.txt" for number in range(1, 7)]
    repo = items_repo(tmp_path, items)
    result = ralph(repo, "run", "--name", "p", "--parallel", "3", "--events", str(tmp_path / "events.jsonl"))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert ledger.audit(repo, "p") == []
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    ended = [event for event in events if event["type"] == "lap_ended"]
    assert len(ended) == 6 and {event["slot"] for event in ended} == {1, 2, 3}
    assert events[-1]["type"] == "run_ended" and events[-1]["exit"] == 0
    laps = lap_notes(repo, "p")
    assert [lap["status"] for lap in laps] == ["green"] * 6, [lap["reason"] for lap in laps]
    assert sorted(item for lap in laps for item in lap["items"]) == sorted(items)  # each item once
    assert {lap["slot"] for lap in laps} == {1, 2, 3}
    assert any("rebased onto" in lap["reason"] for lap in laps)  # the line moved under some laps
    todo = git(repo, "show", "ralph/p:TODO.md")
    assert todo.count("- [x]") == 6 and "- [ ]" not in todo
    progress = git(repo, "show", "ralph/p:PROGRESS.md")
    assert all(f"## Slot {slot}" in progress for slot in (1, 2, 3))  # a section each, none lost
    for number in range(1, 7):
        assert git(repo, "show", f"ralph/p:f{number}.txt") == f"Write f{number}.txt"
    assert "slot 1 │" in output and "slot 3 │" in output
    assert "stopped: done" in output
    assert all(f"(slot {slot})" in ralph(repo, "log", "--run", "p").stdout for slot in (1, 2, 3))
    assert "laps by slot: slot 1: " in ralph(repo, "status", "--run", "p").stdout
    assert ralph(repo, "report", "--run", "p", "-o", str(tmp_path / "report.html")).returncode == 0
    assert "(slot 2: Write f" in (tmp_path / "report.html").read_text()
    assert git(repo, "status", "--porcelain") == ""


# Write a.txt fast, b.txt slowly: b's lap ends on a line a's lap moved while b's agent worked.
A_THEN_B = r"""
import os, pathlib, time
items = [line for line in os.environ["RALPH_ITEMS"].splitlines() if line]
time.sleep(2 if "Write b.txt" in items else 0.2)
text = pathlib.Path("TODO.md").read_text()
for item in items:
    pathlib.Path(item.split()[1]).write_text(item + "\n")
    text = text.replace(f"- [ ] {item}", f"- [x] {item}")
pathlib.Path("TODO.md").write_text(text)
"""


def test_a_lap_whose_line_moved_while_its_agent_worked_is_checked_once_on_the_commit_that_lands(tmp_path: Path):
    """Its commit is rebased onto the line before any check: the checks run once, on what would
    land. The check here passes only where b.txt comes with a.txt: b's own commit fails it, so a
    green b was checked on the line a's lap moved, and on nothing else."""
    config = {
        "goal": "Write both",
        "agent": python_agent(tmp_path / "agent.py", A_THEN_B),
        "checks": ["test ! -e b.txt || test -e a.txt"],
        "limits": {"max_laps": 4},
    }
    todo = "# TODO\n- [ ] Write a.txt\n- [ ] Write b.txt\n"
    repo = make_repo(tmp_path / "repo", {"TODO.md": todo}, config=config, progress="# Progress\n")
    events_file = tmp_path / "events.jsonl"
    result = ralph(repo, "run", "--name", "p", "--parallel", "2", "--events", str(events_file))
    assert result.returncode == 0, result.stdout + result.stderr
    assert ledger.audit(repo, "p") == []
    laps = {lap["items"][0]: lap for lap in lap_notes(repo, "p")}
    a, b = laps["Write a.txt"], laps["Write b.txt"]
    assert (a["status"], b["status"]) == ("green", "green"), b["reason"]
    assert b["reason"] == f"all checks pass (rebased onto {a['commit'][:10]}, which moved during the lap)"
    assert b["parent"] == a["commit"] and git(repo, "rev-parse", "ralph/p") == b["commit"]
    # Its agent's own commit, on the line as the lap started, is kept; no check ever ran on it.
    own = git(repo, "rev-parse", f"refs/ralph/p/rebased/{b['lap']}")
    assert git(repo, "rev-parse", f"{own}^") == git(repo, "rev-parse", "refs/ralph/p/base")
    never_judged = subprocess.run(["git", "notes", "--ref", "ralph", "list", own], cwd=repo, capture_output=True)
    assert never_judged.returncode == 1, never_judged.stdout
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    checked = [event["lap"] for event in events if event["type"] == "check_finished"]
    assert sorted(checked) == sorted([0, a["lap"], b["lap"]])  # the baseline, then each lap once


# b's lap ends on the moved line, having done one more thing to the files the rebase writes anew.
B_ALSO = {
    "an open item deleted, another reworded": (
        'text = text.replace("- [ ] Write c.txt\\n", "").replace("- [ ] Write d.txt\\n", "- [ ] Write d.txt soon\\n")',
        "TODO items deleted or reworded: 'Write c.txt'; 'Write d.txt'",
    ),
    "PROGRESS.md a link out of the repository": (
        'os.remove("PROGRESS.md"); os.symlink("/etc/passwd", "PROGRESS.md")',
        "symbolic links where protected files belong: PROGRESS.md",
    ),
    "an item added ticked that a's lap added open": (
        'text += "- [x] Write e.txt\\n"',
        "ticked items it did not claim, which other laps work on: Write e.txt",
    ),
}


@pytest.mark.parametrize("also", B_ALSO)
def test_a_lap_rebased_before_its_checks_is_judged_on_what_its_agent_did_to_todo_and_progress(
    tmp_path: Path, also: str
):
    """The rebase writes TODO.md and PROGRESS.md anew (the lap's ticks and new items put onto the
    line's): what the agent did to them beyond that is judged on its own commit, as made."""
    snippet, reason = B_ALSO[also]
    agent = A_THEN_B.replace('pathlib.Path("TODO.md").write_text(text)\n', "")
    agent += 'if "Write a.txt" in items:\n    text += "- [ ] Write e.txt\\n"\n'
    agent += f'if "Write b.txt" in items:\n    {snippet}\npathlib.Path("TODO.md").write_text(text)\n'
    config = {"goal": "Write them", "agent": python_agent(tmp_path / "agent.py", agent), "checks": ["true"]}
    todo = "# TODO\n- [ ] Write a.txt\n- [ ] Write b.txt\n- [ ] Write c.txt\n- [ ] Write d.txt\n"
    repo = make_repo(
        tmp_path / "repo", {"TODO.md": todo}, config=config | {"limits": {"max_laps": 2}}, progress="# Progress\n"
    )
    result = ralph(repo, "run", "--name", "p", "--parallel", "2")
    assert "Traceback" not in result.stdout + result.stderr
    laps = {lap["items"][0]: lap for lap in lap_notes(repo, "p")}
    a, b = laps["Write a.txt"], laps["Write b.txt"]
    assert a["status"] == "green" and git(repo, "rev-parse", "ralph/p") == a["commit"]  # the line moved under b
    assert b["status"] == "red" and reason in b["reason"], b["reason"]
    assert ledger.audit(repo, "p") == []


# Three laps end one after another, a, b then c, each soon enough to wait for the one before to land.
STAGGERED = r"""
import os, pathlib, time
items = [line for line in os.environ["RALPH_ITEMS"].splitlines() if line]
time.sleep({"Write a.txt": 0, "Write b.txt": 0.6, "Write c.txt": 1.2}[items[0]])
text = pathlib.Path("TODO.md").read_text()
pathlib.Path(items[0].split()[1]).write_text(items[0] + "\n")
pathlib.Path("TODO.md").write_text(text.replace(f"- [ ] {items[0]}", f"- [x] {items[0]}"))
"""


@pytest.mark.parametrize("b_lands", [True, False], ids=["b lands", "b is red on the moved line"])
def test_a_lap_waiting_to_land_is_checked_ahead_on_the_commit_landing_before_it(tmp_path: Path, b_lands: bool):
    """a lands; b, rebased onto a, is checked again there; c, waiting for its turn, is checked
    meanwhile on b's rebased commit. When b lands, c's commit made on it is the one that lands,
    its checks not run again; when b is red there, the guess is dropped and c is rebased onto a
    and checked there."""
    check = "echo *.txt; sleep 2" if b_lands else "echo *.txt; sleep 2; ! { test -e a.txt && test -e b.txt; }"
    config = {
        "goal": "Write them",
        "agent": python_agent(tmp_path / "agent.py", STAGGERED),
        "checks": [check],
        "limits": {"max_laps": 3},
    }
    todo = "# TODO\n- [ ] Write a.txt\n- [ ] Write b.txt\n- [ ] Write c.txt\n"
    repo = make_repo(tmp_path / "repo", {"TODO.md": todo}, config=config, progress="# Progress\n")
    events_file = tmp_path / "events.jsonl"
    result = ralph(repo, "run", "--name", "p", "--parallel", "3", "--events", str(events_file))
    assert result.returncode == (0 if b_lands else 3), result.stdout + result.stderr
    assert ledger.audit(repo, "p") == []
    laps = {lap["items"][0]: lap for lap in lap_notes(repo, "p")}
    a, b, c = laps["Write a.txt"], laps["Write b.txt"], laps["Write c.txt"]
    events = [json.loads(line) for line in events_file.read_text().splitlines()]

    def checks(lap: dict, kind: str) -> list[str]:
        """When each of the lap's runs of the checks began (`started`) or ended (`finished`)."""
        found = {"started": ("phase_changed", "checks"), "finished": ("check_finished", None)}[kind]
        return [
            event["at"]
            for event in events
            if (event["type"], event.get("phase")) == found and event["lap"] == lap["lap"]
        ]

    assert (a["status"], b["status"], c["status"]) == ("green", "green" if b_lands else "red", "green"), c["reason"]
    assert len(checks(b, "finished")) == 2  # where it was made, then on a
    # c's second run of the checks began while b's second still ran: on b's rebased commit, and said so.
    assert checks(c, "started")[1] < checks(b, "finished")[1]
    ahead = [event for event in events if event.get("ahead") and event["type"] == "check_finished"]
    assert [(event["lap"], event["ahead"]) for event in ahead] == [(c["lap"], b["commit"][:10])]
    assert f"(ahead, on {b['commit'][:10]})" in result.stdout
    logs = repo / ".git" / "ralph" / "p" / f"lap-{c['lap']}"
    if b_lands:
        assert c["parent"] == b["commit"] and git(repo, "rev-parse", "ralph/p") == c["commit"]
        assert len(checks(c, "finished")) == 2  # where it was made, then ahead: not again
        assert (logs / "check-1.log").read_text().startswith("a.txt b.txt c.txt")  # the guess's log, in place
    else:
        assert c["parent"] == a["commit"] and git(repo, "rev-parse", "ralph/p") == c["commit"]
        assert len(checks(c, "finished")) == 3  # the guess on b dropped: checked on a
        assert git(repo, "show", "ralph/p:c.txt") == "Write c.txt" and "b.txt" not in git(repo, "ls-tree", "ralph/p")
        assert (logs / "check-1.log").read_text().startswith("a.txt c.txt")  # what landed was checked
        assert (logs / "ahead" / "check-1.log").read_text().startswith("a.txt b.txt c.txt")  # kept apart


@pytest.mark.parametrize("names", ["a tree", "no object"])
def test_a_candidate_that_is_no_commit_is_not_guessed_on_and_the_laps_land(tmp_path: Path, names: str):
    """What a lap killed in its turn leaves (its candidate file, naming a commit gc took since), or
    any other name that is no commit: the laps waiting for their turn pass it by."""
    config = {"goal": "Write them", "agent": python_agent(tmp_path / "agent.py", STAGGERED), "checks": ["true"]}
    todo = "# TODO\n- [ ] Write a.txt\n- [ ] Write b.txt\n"
    repo = make_repo(tmp_path / "repo", {"TODO.md": todo}, config=config, progress="# Progress\n")
    said = git(repo, "rev-parse", "HEAD^{tree}") if names == "a tree" else "1234567890abcdef" * 2 + "12345678"
    run = parallel_run(repo, "--parallel", "2", "--events", str(tmp_path / "events.jsonl"))
    while not git(repo, "for-each-ref", "refs/ralph/p/started/"):  # the slots took their laps
        time.sleep(0.01)
    folder = folder_for(repo / ".git", "p")
    with open(folder / "landing.lock", "a") as lock:  # the turn held, by a lap that said `said`
        fcntl.flock(lock, fcntl.LOCK_EX)
        (folder / "landing.next").write_text(said + "\n")
        time.sleep(1.5)
    output = run.communicate(timeout=120)[0].decode()
    assert run.returncode == 0 and "Traceback" not in output and "internal error" not in output, output
    assert ledger.audit(repo, "p") == []
    assert [lap["status"] for lap in lap_notes(repo, "p")] == ["green", "green"]
    assert '"ahead"' not in (tmp_path / "events.jsonl").read_text()


def test_slots_keep_the_secrets_out_of_their_environment_blocks_and_hand_them_to_laps(tmp_path: Path):
    """Slots are forks of the ralph that started them: its environment block, which the secrets
    left when it hardened itself, and the secrets in memory, which laps get as configured."""
    repo = items_repo(tmp_path, ["Write a.txt", "Write b.txt"], sleep=3)
    config = json.loads((repo / "ralph.yaml").read_text())
    (repo / "ralph.yaml").write_text(json.dumps(dict(config, env={"pass": ["RALPH_TEST_TOKEN"]})))
    agent = tmp_path / "agent.py"
    agent.write_text(agent.read_text() + 'pathlib.Path("token.txt").write_text(os.environ["RALPH_TEST_TOKEN"])\n')
    git(repo, "commit", "-qam", "a token for the laps")
    canary = f"canary-{tmp_path.name}"
    run = subprocess.Popen(
        [PY, "-m", "ralph", "run", "--name", "p", "--parallel", "2"],
        cwd=repo,
        env=dict(os.environ, RALPH_TEST_TOKEN=canary),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while len(slot_processes(repo, run.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    ralphs = [run.pid, *slot_processes(repo, run.pid)]
    assert len(ralphs) >= 3
    assert [pid for pid in ralphs if canary.encode() in environment_block(pid)] == []
    output = run.communicate(timeout=90)[0].decode()
    assert run.returncode == 0, output
    assert git(repo, "show", "ralph/p:token.txt") == canary
    assert {lap["slot"] for lap in lap_notes(repo, "p")} == {1, 2}


def test_laps_that_conflict_the_later_is_red_and_its_items_are_done_again_knowing_why(tmp_path: Path):
    items = ["Set the greeting to hi", "Set the greeting to hey", "Write other.txt"]
    repo = items_repo(tmp_path, items, sleep=2)
    result = ralph(repo, "run", "--name", "p", "--parallel", "2")
    output = result.stdout + result.stderr
    assert ledger.audit(repo, "p") == []
    laps = lap_notes(repo, "p")
    conflicts = [lap for lap in laps if lap["reason"].startswith("conflict:")]
    assert conflicts, output
    assert "greeting.txt" in conflicts[0]["reason"]
    # Kept for review under its lap ref, off the green line.
    lap_commit = git(repo, "rev-parse", f"refs/ralph/p/laps/{conflicts[0]['lap']}")
    on_line = subprocess.run(["git", "merge-base", "--is-ancestor", lap_commit, "ralph/p"], cwd=repo)
    assert on_line.returncode == 1
    # Its items were let go of, taken again by a later lap, whose prompt named the conflict.
    again = [lap for lap in laps if lap["lap"] > conflicts[0]["lap"] and set(lap["items"]) & set(conflicts[0]["items"])]
    assert again and again[0]["status"] == "green"
    seen = (repo / ".git" / "ralph" / "p" / f"lap-{again[0]['lap']}" / "agent.log").read_text()
    assert "saw a conflict" in seen
    assert result.returncode == 0, output


def test_ctrl_c_stops_every_slot_and_leaves_nothing_registered(tmp_path: Path):
    repo = items_repo(tmp_path, [f"Write f{number}.txt" for number in range(1, 7)], sleep=30)
    run = parallel_run(repo, "--parallel", "3")
    deadline = time.monotonic() + 90
    status: dict = {}
    while time.monotonic() < deadline:  # until the three slots are in their laps' agents (30 s each)
        seen = ralph(repo, "status", "--run", "p", "--json")
        status = json.loads(seen.stdout) if seen.returncode == 0 else {}
        if len(status.get("under_way", [])) == 3:
            break
        time.sleep(0.2)
    assert {lap["slot"] for lap in status["under_way"]} == {1, 2, 3}
    assert all(len(lap["items"]) == 1 for lap in status["under_way"])
    run.send_signal(signal.SIGINT)
    output = run.communicate(timeout=90)[0].decode()
    assert run.returncode == 130, output
    assert slot_processes(repo, run.pid) == []
    assert git(repo, "for-each-ref", "refs/ralph/p/claims/", "refs/ralph/p/started/") == ""
    assert git(repo, "worktree", "list").count("\n") == 0
    assert git(repo, "status", "--porcelain") == ""


def test_a_ralph_killed_mid_run_is_resumed_and_every_item_is_done_once(tmp_path: Path):
    items = [f"Write f{number}.txt" for number in range(1, 7)]
    repo = items_repo(tmp_path, items, sleep=4)
    run = parallel_run(repo, "--parallel", "3")
    deadline = time.monotonic() + 60
    while len(slot_processes(repo, run.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)
    run.kill()  # SIGKILL: no cleanup of its own; its slots end with it
    run.communicate(timeout=60)
    deadline = time.monotonic() + 60
    while slot_processes(repo, run.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert slot_processes(repo, run.pid) == []
    (tmp_path / "agent.py").write_text(ITEMS_AGENT.replace("SLEEP", "0.2"))
    resumed = ralph(repo, "run", "--name", "p", "--parallel", "3")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert ledger.audit(repo, "p") == []
    green = [lap for lap in lap_notes(repo, "p") if lap["status"] == "green"]
    assert sorted(item for lap in green for item in lap["items"]) == sorted(items)
    assert git(repo, "show", "ralph/p:TODO.md").count("- [x]") == 6


def test_a_slot_killed_between_its_green_note_and_its_landing_lands_nothing_and_its_item_is_done_again(
    tmp_path: Path,
):
    # The lap is recorded green, then its slot dies before the line moves: it never lands (its
    # claims are let go of), so its note must not say green, or that item is done twice.
    items = [f"Write f{number}.txt" for number in range(1, 4)]
    repo = items_repo(tmp_path, items, sleep=0.2)
    killed = ralph(repo, "run", "--name", "p", "--parallel", "2", env={"RALPH_DEBUG_STOP_AT": "advance"})
    assert killed.returncode == 1, killed.stdout + killed.stderr
    laps = lap_notes(repo, "p")
    assert len(laps) == 2 and all(
        lap["status"] == "red" and lap["reason"] == Overrule.NEVER_LANDED.value for lap in laps
    )
    assert git(repo, "rev-parse", "ralph/p") == git(repo, "rev-parse", "refs/ralph/p/base")
    resumed = ralph(repo, "run", "--name", "p", "--parallel", "2")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert ledger.audit(repo, "p") == []
    green = [lap for lap in lap_notes(repo, "p") if lap["status"] == "green"]
    assert sorted(item for lap in green for item in lap["items"]) == sorted(items)  # each once
    status = json.loads(ralph(repo, "status", "--run", "p", "--json").stdout)
    assert status["done"] and status["green_laps"] == len(green)


def test_laps_of_slots_interrupted_before_they_landed_are_red_once_the_run_resumes(tmp_path: Path):
    """Ctrl-C right after each slot's first lap was judged green, before it landed: the resumed
    run lands the last of them (its checks ran on its commit, on the line's tip); the other never
    will, and its note says so, where it said green before."""
    items = ["Write a.txt", "Write b.txt"]
    repo = items_repo(tmp_path, items, sleep=0)
    stopped = subprocess.run(
        [PY, "-m", "ralph", "run", "--name", "p", "--parallel", "2"],
        cwd=repo, env=dict(os.environ, RALPH_DEBUG_STOP_AT="advance:INT"), capture_output=True, text=True,
    )  # fmt: skip
    assert stopped.returncode == 130, stopped.stdout + stopped.stderr
    assert git(repo, "rev-parse", "ralph/p") == git(repo, "rev-parse", "refs/ralph/p/base")  # nothing landed
    resumed = ralph(repo, "run", "--name", "p", "--parallel", "2")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert ledger.audit(repo, "p") == []
    on_the_line = git(repo, "rev-list", "ralph/p").split()
    laps = lap_notes(repo, "p")
    assert all(lap["status"] == "red" for lap in laps if lap["commit"] not in on_the_line), laps
    unlanded = [lap for lap in laps if lap["commit"] not in on_the_line]
    assert [lap["reason"] for lap in unlanded] == ["interrupted before it landed; its items are done again"]
    green = [lap for lap in laps if lap["status"] == "green"]
    assert sorted(item for lap in green for item in lap["items"]) == sorted(items)  # each once


def test_claims_are_taken_once_whoever_asks_at_the_same_moment(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    items = [f"item {number}" for number in range(20)]
    taken: dict[int, list[str]] = {}

    store = RefStore(repo)

    def take(slot: int) -> None:
        mine = claims.holder(repo, slot)
        # Each look reads what is free, then takes by compare-and-swap: another may have won since.
        free = (claims.unclaimed(repo, "r", items) for _ in range(10))
        taken[slot] = [item for items_free in free for item in claims.take_items(store, "r", items_free, 1, mine)]

    threads = [threading.Thread(target=take, args=(slot,)) for slot in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [item for held in taken.values() for item in held]
    assert sorted(everything) == sorted(items) and len(set(everything)) == 20  # each once, all taken
    numbers = [claims.take_number(store, "r", claims.holder(repo, slot)) for slot in (1, 2, 1)]
    assert numbers == [1, 2, 3] and sorted(claims.started(repo, "r")) == [1, 2, 3]
    claims.release_items(store, "r", taken[2], claims.holder(repo, 2))  # a holder letting go of what is not its
    assert len(git(repo, "for-each-ref", "refs/ralph/r/claims/").splitlines()) == 20
    # Slot 1 died: what it held is free, the others' is not.
    assert claims.release_dead(store, "r", lambda holder: holder.get("slot") != 1) == len(taken[1]) + 2
    assert sorted(claims.started(repo, "r")) == [2]
    assert claims.unclaimed(repo, "r", items) == [item for item in items if item in taken[1]]
    assert claims.take_items(store, "r", items, 20, claims.holder(repo, 4)) == taken[1]  # the held ones: lost swaps
    assert claims.clear(store, repo / ".git", "r") == 20 + 1
    assert ledger.audit(repo, "r") == ["no run 'r'"]


def test_a_lap_put_onto_another_todo_and_progress_keeps_its_ticks_items_and_section():
    onto = "# TODO\n- [x] a\n- [ ] b\n  wrapped\n1. [ ] c\n"
    assert todo.combined(onto, ["b wrapped", "c"], ["- [ ] d, found\n  by the lap\n"]) == (
        "# TODO\n- [x] a\n- [x] b\n  wrapped\n1. [x] c\n- [ ] d, found\n  by the lap\n"
    )
    # An item listed twice, one of them done: a lap that ticks the other ticks that one only.
    twice = todo.parse("- [x] foo\n- [ ] foo\n- [ ] bar\n")
    assert todo.newly_ticked(twice, todo.parse("- [x] foo\n- [x] foo\n- [ ] bar\n")) == ["foo"]
    assert todo.combined("- [ ] foo\n- [ ] foo\n", ["foo"], []) == "- [x] foo\n- [ ] foo\n"
    # What lies in a code block, or wraps, is never taken for items of its own.
    sources = todo.sources("- [ ] a\n  wrapped\n\n```\n- [ ] not an item\n```\n")
    assert [(item.text, source) for item, _, source in sources] == [("a wrapped", "- [ ] a\n  wrapped\n")]
    theirs = "# Progress\n\n## Slot 1\nold one\n\n## Slot 2\ntwo\n"
    mine = "# Progress\n\n## Slot 1\nnew one\nmore\n"
    assert progress_with(theirs, mine, 1) == "# Progress\n\n## Slot 1\nnew one\nmore\n## Slot 2\ntwo\n"
    assert progress_with("# Progress", "## Slot 3\nthree\n", 3) == "# Progress\n\n## Slot 3\nthree\n"
    assert progress_with(theirs, "no section of its own", 1) == theirs
    # The heading written twice: the last one counts; only slot 1's section is replaced.
    headed_twice = "## Slot 1\nfirst\n## Slot 1\nsecond\n"
    assert progress_with(theirs, headed_twice, 1) == "# Progress\n\n## Slot 1\nsecond\n## Slot 2\ntwo\n"
    same_text = "## Slot 2\nsame\n\n## Slot 1\nsame\n"
    assert progress_with(same_text, "## Slot 1\nnew\n", 1) == "## Slot 2\nsame\n\n## Slot 1\nnew\n"


def test_parallel_laps_need_the_sandbox_and_slots_are_started_by_ralph_alone(tmp_path: Path):
    repo = items_repo(tmp_path, ["Write a.txt"])
    config = json.loads((repo / "ralph.yaml").read_text())
    (repo / "ralph.yaml").write_text(json.dumps(dict(config, sandbox="off")))
    git(repo, "commit", "-qam", "no sandbox")
    result = ralph(repo, "run", "--name", "p", "--parallel", "2")
    assert result.returncode == 1 and "--parallel needs laps in the sandbox (bubblewrap)" in result.stderr
    result = ralph(repo, "run", "--name", "p", "--slot", "1")
    assert result.returncode == 1 and "--slot is for the slots a `ralph run --parallel`" in result.stderr
    result = ralph(repo, "run", "--name", "p", "--items-per-lap", "2")
    assert result.returncode == 1 and "--items-per-lap is for --parallel runs" in result.stderr
    assert git(repo, "for-each-ref", "refs/ralph/") == ""


def test_a_slot_takes_what_is_open_and_stops_when_the_run_is_done(tmp_path: Path, monkeypatch):
    """A slot on its own (as the coordinator starts it, here in this process): it claims the
    open items (two a lap), runs its lap, sees the run done and stops; the lap says its slot."""
    repo = items_repo(tmp_path, ["Write a.txt", "Write b.txt", "Write c.txt"], sleep=0)
    assert ralph(repo, "run", "--name", "p", "--max-laps", "1").returncode == 3  # a.txt, then the fuse
    monkeypatch.setenv("RALPH_PARALLEL_PARENT", str(os.getppid()))  # what ends it: this process's parent
    result = ralph(repo, "run", "--name", "p", "--slot", "2", "--max-laps", "4", "--items-per-lap", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = lap_notes(repo, "p")
    assert (first["slot"], first["items"]) == (None, [])
    assert (second["slot"], second["items"], second["status"]) == (2, ["Write b.txt", "Write c.txt"], "green")
    assert second["done"] is True and ledger.audit(repo, "p") == []


def test_max_laps_holds_across_slots(tmp_path: Path):
    repo = items_repo(tmp_path, [f"Write f{number}.txt" for number in range(1, 5)], sleep=1)
    result = ralph(repo, "run", "--name", "p", "--parallel", "4", "--max-laps", "2")
    assert result.returncode == 3, result.stdout + result.stderr
    assert len(lap_notes(repo, "p")) == 2 and ledger.audit(repo, "p") == []  # 4 slots, and still 2 laps


def test_a_lap_that_ticks_items_it_did_not_claim_is_red(tmp_path: Path, monkeypatch):
    items = ["Write a.txt", "Write b.txt and tick every item", "Write c.txt"]
    repo = items_repo(tmp_path, items, sleep=0)
    assert ralph(repo, "run", "--name", "p", "--max-laps", "1").returncode == 3  # a.txt
    monkeypatch.setenv("RALPH_PARALLEL_PARENT", str(os.getppid()))
    result = ralph(repo, "run", "--name", "p", "--slot", "1", "--max-laps", "2")
    assert result.returncode == 3, result.stdout + result.stderr
    greedy = lap_notes(repo, "p")[-1]
    assert greedy["items"] == [items[1]] and greedy["status"] == "red"
    assert greedy["reason"] == "ticked items it did not claim, which other laps work on: Write c.txt"


def test_a_ring_cuts_an_idle_slots_nap_short_and_nothing_else():
    """The coordinator rings (parallel.RING) its slots when one of them ends: a slot napping
    between glances at the run looks at once; a ring while it does anything else is nothing."""
    main = threading.main_thread().ident
    assert main is not None
    signal.pthread_kill(main, parallel.RING)  # not napping: ignored, nothing raised, nothing kept
    assert parallel._nap(0.01) is True
    timer = threading.Timer(0.2, signal.pthread_kill, (main, parallel.RING))
    timer.start()
    started = time.monotonic()
    assert parallel._nap(30) is False
    assert time.monotonic() - started < 20
    assert parallel._nap(0.01) is True  # the ring was taken: none is left pending
