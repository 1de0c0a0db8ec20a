"""`ralph run --remote origin --name r`: workers on clones of one bare repository (a file://
remote on this machine), with the remote as the only thing they share. After each run,
ledger.audit on a clone that fetched the run: every commit on the green line has a green note
of its own, every lap its note (notes written by different workers, merged), nothing left
claimed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import yaml
from helpers.jobs import items_repo
from helpers.repos import PY, git
from helpers.running import lap_notes, ralph

from ralph.records import ledger
from ralph.verdict.decide import Overrule


def remote_with(tmp_path: Path, items: list[str], clones: int, sleep: float, **limits: object) -> list[Path]:
    """A bare repository (the remote) holding a job of `items`, and `clones` clones of it."""
    repo = items_repo(tmp_path, items, sleep, **limits)
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(origin))
    made = []
    for number in range(1, clones + 1):
        clone = tmp_path / f"clone{number}"
        git(tmp_path, "clone", "-q", origin.as_uri(), str(clone))
        made.append(clone)
    return made


def worker(clone: Path, *args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [PY, "-m", "ralph", "run", "--remote", "origin", "--name", "r", "--plain", *args],
        cwd=clone,
        env=dict(os.environ, PYTHONUNBUFFERED="1", **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def on_remote(clone: Path, folder: str) -> dict[str, dict]:
    """The remote's refs under refs/ralph/r/<folder>/, each with the holder its blob names
    (a message left for a lap: its text)."""
    origin = Path(git(clone, "remote", "get-url", "origin").removeprefix("file://"))
    listing = git(origin, "for-each-ref", "--format=%(refname) %(objectname)", f"refs/ralph/r/{folder}/")
    found = {}
    for ref, blob in (line.split() for line in listing.splitlines()):
        text = git(origin, "cat-file", "-p", blob)
        found[ref.rsplit("/", 1)[1]] = json.loads(text) if text.startswith("{") else {"text": text}
    return found


def wait_for(what, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"waited {seconds}s in vain")


def heartbeats(under: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if b"ralph.run.workers" in cmdline and cwd.startswith(str(under)):
            found.append(int(entry.name))
    return found


def finished(observer: Path) -> dict:
    """The run as the remote has it, through `ralph status --remote` in a clone of its own,
    whose refs then hold the run for the audit."""
    result = ralph(observer, "status", "--remote", "origin", "--run", "r", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert ledger.audit(observer, "r") == []
    return json.loads(result.stdout)


def test_workers_on_clones_share_the_run_through_the_remote_and_one_killed_mid_lap_loses_nothing(tmp_path: Path):
    items = [f"Write f{number}.txt" for number in range(1, 7)]
    *clones, observer = remote_with(tmp_path, items, 4, sleep=1.0, max_laps=20, worker_timeout=30)
    received = tmp_path / "received.log"  # what the host was asked to update, push by push
    hook = tmp_path / "origin.git" / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\n{{ cat; echo --; }} >> {received}\n")
    hook.chmod(0o755)
    # Started at once: one starts the run, the others join it. The victim is killed in its
    # first lap, once the lap is recorded green and before it lands: the narrowest window.
    victim = worker(clones[0], RALPH_DEBUG_STOP_AT="advance")
    workers = [victim, *(worker(clone) for clone in clones[1:])]

    def everyone_at_work() -> dict:
        seen = ralph(observer, "status", "--remote", "origin", "--run", "r", "--json")
        return json.loads(seen.stdout) if seen.returncode == 0 else {}

    status = wait_for(lambda: (found := everyone_at_work()) and len(found["workers"]) == 3 and found)
    assert {len(worker["worker"].split(":")) for worker in status["workers"]} == {3}  # host:pid:tag
    told = ralph(observer, "tell", "--remote", "origin", "--run", "r", "Mind the tabs")
    assert told.returncode == 0, told.stderr
    assert (
        victim.wait(timeout=120) == -signal.SIGKILL
    )  # holding a claim and a lap number: the others take its item over
    # Its heartbeat, told by the kernel, takes its number off the remote at once (not after worker_timeout).
    wait_for(lambda: all(worker["pid"] != victim.pid for worker in on_remote(observer, "workers").values()), 10)
    outputs = [process.communicate(timeout=120)[0] for process in workers[1:]]
    assert [process.returncode for process in workers[1:]] == [0, 0], outputs
    assert all("every TODO item is ticked" in output for output in outputs)
    status = finished(observer)
    assert status["done"] and status["workers"] == [] and status["under_way"] == []
    assert on_remote(observer, "claims") == {} and on_remote(observer, "started") == {}
    laps = lap_notes(observer, "r")
    green = [lap for lap in laps if lap["status"] == "green"]
    assert sorted(item for lap in green for item in lap["items"]) == sorted(items)  # each item once
    assert len({lap["worker"] for lap in green}) >= 2 and all(lap["worker"] for lap in laps)
    (killed,) = [lap for lap in laps if lap["worker"].split(":")[1] == str(victim.pid)]
    assert killed["status"] == "red" and killed["reason"] == Overrule.NEVER_LANDED.value  # recorded, never landed
    assert ["Mind the tabs"] in [lap["told"] for lap in laps] and on_remote(observer, "told") == {}
    rebased = {str(lap["lap"]) for lap in laps if "rebased onto" in lap["reason"]}
    assert rebased and set(on_remote(observer, "rebased")) == rebased  # each lap's own commit, kept
    here = ralph(observer, "tell", "--run", "r", "Only here")  # the next fetch would drop it: refused
    assert here.returncode == 1 and "ralph tell --remote" in here.stderr
    assert git(observer, "show", "ralph/r:TODO.md").count("- [x]") == 6
    assert heartbeats(tmp_path) == []  # the killed worker's heartbeat ended with it
    # Past the start, the line moves only in pushes that also let go of the landing lap's claims
    # (by their holder): the host, not the worker, checks under its lock that they are the lap's.
    pushes = [push.splitlines() for push in received.read_text().split("--\n")]
    moves = [push for push in pushes if any(line.endswith(" refs/heads/ralph/r") for line in push)]
    landings = [push for push in moves if not any(line.endswith(" refs/ralph/r/run") for line in push)]
    assert len(landings) >= len(green)
    assert all(any(f" {'0' * 40} refs/ralph/r/claims/" in line for line in push) for push in landings)
    for clone in clones:
        assert git(clone, "status", "--porcelain") == ""  # each clone's work tree untouched


def test_a_worker_that_stops_beating_is_taken_for_dead_and_its_late_lap_breaks_nothing(tmp_path: Path):
    items = [f"Write f{number}.txt" for number in range(1, 5)]
    slow, quick, observer = remote_with(tmp_path, items, 3, sleep=1.0, worker_timeout=3)
    first = worker(slow)
    wait_for(lambda: on_remote(observer, "started"))  # it started the run and took the first item
    beat = wait_for(lambda: heartbeats(slow))
    for pid in (first.pid, *beat):  # frozen (a machine cut off): its heartbeat stops
        os.kill(pid, signal.SIGSTOP)
    second = ralph(quick, "run", "--remote", "origin", "--name", "r", "--plain")
    assert second.returncode == 0, second.stdout + second.stderr  # it waited out worker_timeout, took the item
    for pid in (first.pid, *beat):
        os.kill(pid, signal.SIGCONT)
    late = first.communicate(timeout=120)[0]
    assert first.returncode == 0, late  # back, it finds the run done
    status = finished(observer)
    assert status["done"] and status["workers"] == []
    laps = lap_notes(observer, "r")
    green = [lap for lap in laps if lap["status"] == "green"]
    assert sorted(item for lap in green for item in lap["items"]) == sorted(items)  # each item once
    (frozen,) = [lap for lap in laps if lap["worker"].split(":")[1] == str(first.pid)]
    assert frozen["status"] == "red" and "its claims were let go of" in frozen["reason"]  # recorded, not landed
    assert git(observer, "show", "ralph/r:TODO.md").count("- [x]") == 4
    # Someone pushes an unchecked commit onto the line: no worker builds on it.
    git(observer, "checkout", "-q", "--detach", "ralph/r")
    git(observer, "commit", "-q", "--allow-empty", "-m", "pushed by hand")
    git(observer, "push", "-q", "origin", "HEAD:refs/heads/ralph/r")
    refused = ralph(quick, "run", "--remote", "origin", "--name", "r", "--plain")
    assert refused.returncode == 1 and "which no lap of the run checked" in refused.stderr, refused.stderr
    plain = ralph(quick, "run", "--name", "r")  # a worker's clone resumed without --remote
    assert plain.returncode == 1 and "ralph run --remote REMOTE --name r" in plain.stderr, plain.stderr


def test_a_worker_interrupted_before_its_green_lap_landed_marks_it_red_and_the_item_is_done_once(tmp_path: Path):
    items = ["Write a.txt", "Write b.txt"]
    clone, observer = remote_with(tmp_path, items, 2, sleep=0)
    # Ctrl-C (SIGINT) right after its first lap was judged green, before it landed.
    interrupted = subprocess.run(
        [PY, "-m", "ralph", "run", "--remote", "origin", "--name", "r", "--plain"],
        cwd=clone, env=dict(os.environ, RALPH_DEBUG_STOP_AT="advance:INT"), capture_output=True, text=True,
    )  # fmt: skip
    assert interrupted.returncode == 130, interrupted.stdout + interrupted.stderr
    again = ralph(clone, "run", "--remote", "origin", "--name", "r", "--plain")  # the same command resumes
    assert again.returncode == 0, again.stdout + again.stderr
    status = finished(observer)
    assert status["done"]
    laps = lap_notes(observer, "r")
    green = [lap for lap in laps if lap["status"] == "green"]
    assert sorted(item for lap in green for item in lap["items"]) == sorted(items)  # each once
    assert any(lap["reason"] == "interrupted before it landed; its items are done again" for lap in laps)


def test_bad_remotes_and_options_are_refused_in_one_line_and_touch_nothing(tmp_path: Path):
    (clone,) = remote_with(tmp_path, ["Write a.txt"], 1, sleep=0)
    unsandboxed = tmp_path / "unsandboxed.yaml"
    config = yaml.safe_load((clone / "ralph.yaml").read_text())
    unsandboxed.write_text(json.dumps(dict(config, sandbox={"mode": "off"})))
    git(clone, "remote", "add", "gone", str(tmp_path / "nothing-here.git"))
    declining = tmp_path / "origin.git" / "hooks" / "pre-receive"
    run = ("run", "--remote", "origin", "--name", "r")
    cases = {
        ("run", "--remote", "origin"): "--remote needs --name",
        ("run", "--remote", "upstream", "--name", "r"): "no git remote named 'upstream' (remotes: gone, origin)",
        (*run, "--parallel", "2"): "one worker per clone",
        ("status", "--remote", "origin"): "origin has no ralph run",
        ("run", "--remote", "gone", "--name", "r"): "cannot fetch from the remote gone: fatal:",
        (*run, "--config", str(unsandboxed)): "--remote needs laps in the sandbox",
        run: "cannot push to the remote origin: remote: the host says no",  # with the hook below
    }
    local = ralph(clone, "run", "--name", "mine")  # a run of this clone's own: a remote's must not replace it
    assert local.returncode == 0, local.stdout + local.stderr
    cases[("run", "--remote", "origin", "--name", "mine")] = "this clone has a run named mine of its own"
    before = git(clone, "status", "--porcelain", "--branch"), git(clone, "rev-parse", "HEAD")
    for args, said in cases.items():
        if args == run:
            declining.write_text("#!/bin/sh\necho 'the host says no' >&2\nexit 1\n")
            declining.chmod(0o755)
        result = ralph(clone, *args)
        assert result.returncode == 1 and said in result.stderr, (args, result.stdout, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    assert git(clone, "ls-remote", "origin", "refs/ralph/*") == ""
    state = ledger.load(clone, "mine")
    assert state is not None and state.is_done
    assert (git(clone, "status", "--porcelain", "--branch"), git(clone, "rev-parse", "HEAD")) == before


def test_one_malformed_run_on_the_remote_hides_no_other_from_status_and_stats(tmp_path: Path):
    """Anyone who may push to the remote may push a run that does not read: each is said in one
    line, the run that reads is shown, and neither command ends in an error or a traceback."""
    clone, other = remote_with(tmp_path, ["Write a.txt"], 2, sleep=0)
    done = ralph(clone, "run", "--remote", "origin", "--name", "r")
    assert done.returncode == 0, done.stdout + done.stderr
    origin = tmp_path / "origin.git"
    record = json.loads(git(origin, "cat-file", "blob", "refs/ralph/r/run"))

    def blob(text: str) -> str:
        written = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"], cwd=origin, input=text.encode(), capture_output=True
        )
        return written.stdout.decode().strip()

    def later(run: str, **fields: object) -> str:  # a record started after r's, so the most recent
        return blob(json.dumps(dict(record, run=run, created_at=record["created_at"] + "9", **fields)))

    planted = {
        "refs/ralph/zjson/run": blob('{"format": 1, "run": '),  # no JSON
        "refs/ralph/-odd/run": later("-odd"),  # a name ralph does not take
        "refs/ralph/ztree/run": git(origin, "rev-parse", "HEAD^{tree}"),  # not a blob
        "refs/ralph/znewer/run": later("znewer", format=999),  # a later ralph's
        "refs/ralph/zalias/run": later("r"),  # another run's record under its own name
        "refs/ralph/zbase/run": later("zbase", base=blob("not a commit")),  # reads, its base a blob
        "refs/ralph/zbase/base": blob("not a commit"),
    }
    for ref, sha in planted.items():
        git(origin, "update-ref", ref, sha)

    for command in ("status", "stats"):
        for attempt in (1, 2):  # the second time, the clone holds the malformed refs already
            result = ralph(other, command, "--remote", "origin")
            said = result.stdout + result.stderr
            assert result.returncode == 0 and "Traceback" not in said, (command, attempt, said)
            warnings = result.stderr.strip().splitlines()
            for run in ("zjson", "-odd", "ztree", "znewer", "zalias"):
                assert len([line for line in warnings if f"refs/ralph/{run}/run: " in line]) == 1, (run, warnings)
            assert not any("zbase" in line for line in warnings) and all("warning" in line for line in warnings)
            if command == "status":  # the most recent run that reads, whose base is a blob
                assert "run zbase: not done" in result.stdout, said
    assert "run r: done" in ralph(other, "status", "--remote", "origin", "--run", "r").stdout
    runs = json.loads(ralph(other, "stats", "--remote", "origin", "--json").stdout)["runs"]
    assert [run["run"] for run in runs] == ["r", "zbase"] and runs[0]["done"] is True
