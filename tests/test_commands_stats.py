"""`ralph stats`: real runs of two agents in one repository compared, as text and as JSON; the
runs a remote keeps beside a clone's own; bad input (no run, an unknown --run or remote, a lap
note a newer ralph wrote)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from helpers.repos import PY, git, make_repo, python_agent
from helpers.running import ralph

from ralph.cli import main

# Ticks the first open item a lap; `claude` prints a result as Claude Code does (its tokens and
# cost), `late` too but not in its first lap; `clumsy` breaks the check in its first lap (a red
# lap), and reports nothing.
AGENT = r"""
import json, os, pathlib, sys
mode, lap = sys.argv[1], int(os.environ["RALPH_LAP"])
todo = pathlib.Path("TODO.md")
if mode == "clumsy" and lap == 1:
    pathlib.Path("broken.txt").write_text("oops\n")
else:
    todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
    pathlib.Path(f"work-{lap}.txt").write_text("done\n")
    if "- [ ]" not in todo.read_text():
        pathlib.Path("finished.txt").write_text("yes\n")
if mode == "claude" or mode == "late" and lap > 1:
    usage = {"input_tokens": 100, "output_tokens": 20}
    print(json.dumps({"type": "result", "result": "ticked", "num_turns": 2, "total_cost_usd": 0.05, "usage": usage}))
"""
NOT_BROKEN = f"{PY} -c 'import pathlib; assert not pathlib.Path(\"broken.txt\").exists()'"
TESTS = """
import pathlib

def test_always():
    pass

def test_finished():
    assert pathlib.Path("finished.txt").exists()
"""


def job(path: Path) -> Path:
    return make_repo(path, {"test_items.py": TESTS}, todo=["first", "second"], progress="")


def run_in(repo: Path, name: str, mode: str, *checks: str, preset: str | None = None) -> None:
    """`ralph run --name NAME` with the agent in `mode` (a preset's reports read, when named)."""
    agent = python_agent(repo.parent / "agent.py", AGENT)
    agent = dict(agent, command=f"{agent['command']} {mode}", **({"preset": preset} if preset else {}))
    config = repo.parent / f"{name}.yaml"
    config.write_text(
        json.dumps({"goal": "Tick both", "agent": agent, "checks": [NOT_BROKEN, *checks], "sandbox": "off"})
    )
    ran = ralph(repo, "run", "--name", name, "--config", str(config))
    assert ran.returncode == 0, ran.stdout + ran.stderr


def two_runs(tmp_path: Path) -> Path:
    """Run `a` (claude, tokens and cost known, pytest as a check): 2 green laps, done. Run `b` (a
    plain command, neither known): a red lap, then 2 green ones, done."""
    repo = job(tmp_path / "repo")
    run_in(repo, "a", "claude", f"{PY} -m pytest -q -p no:cacheprovider test_items.py", preset="claude")
    run_in(repo, "b", "clumsy")
    return repo


def stats(cwd: Path, *args: str, monkeypatch) -> tuple[int, str, str]:
    """`ralph stats ARGS` in-process, as the user would run it in `cwd`."""
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, ["stats", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_two_runs_of_two_agents_compared_in_text_and_json(tmp_path: Path, monkeypatch) -> None:
    repo = two_runs(tmp_path)
    code, out, err = stats(repo, "--json", monkeypatch=monkeypatch)
    assert code == 0 and err == "", err
    shown = json.loads(out)
    assert shown["format"] == 1
    a, b = shown["runs"]
    assert (a["run"], a["done"], a["laps"], a["green_laps"], a["green_share"]) == ("a", True, 2, 2, 1.0)
    assert (a["items_finished"], a["items_open"], a["tests_passing"]) == (2, 0, {"at_base": 1, "at_end": 2})
    assert (a["tokens"], a["cost_usd"], a["laps_of_unknown_cost"], a["tokens_per_item"]) == (240, 0.1, 0, 120)
    assert (b["run"], b["laps"], b["green_laps"], b["green_share"], b["items_finished"]) == ("b", 3, 2, 0.6667, 2)
    assert (b["tokens"], b["laps_of_unknown_tokens"], b["cost_usd"], b["laps_of_unknown_cost"]) == (None, 3, None, 3)
    assert (b["tests_passing"], b["tokens_per_item"]) == ({"at_base": None, "at_end": None}, None)  # never 0 or $0
    assert b["wall_s"] >= b["lap_s"] / 3 and abs(b["lap_s_per_item"] - b["lap_s"] / 2) < 0.001
    assert [(row["agent"], row["model"], row["laps"]) for row in a["agents"] + b["agents"]] == [
        ("claude", None, 2),
        ("command", None, 3),
    ]
    assert [(row["agent"], row["runs"], row["items_finished"], row["cost_usd"]) for row in shown["agents"]] == [
        ("claude", 1, 2, 0.1),
        ("command", 1, 2, None),
    ]

    code, out, err = stats(repo, monkeypatch=monkeypatch)
    assert code == 0 and err == ""
    runs, agents = (block.splitlines() for block in out.split("\n\n"))
    assert [line.split() for line in runs] == [
        "run laps green items tests tokens cost wall t/item tok/item done".split(),
        ["a", "2", "100%", "2", "1", "→", "2", "240", "$0.10", runs[1].split()[9], runs[1].split()[10], "120", "yes"],
        ["b", "3", "67%", "2", "-", "?", "?", runs[2].split()[7], runs[2].split()[8], "?", "yes"],
    ]
    assert [line.split()[:7] for line in agents[1:3]] == [
        ["claude", "1", "2", "100%", "2", "240", "$0.10"],
        ["command", "1", "3", "67%", "2", "?", "?"],
    ]
    assert "?: not known for any lap" in out and "≥" not in out

    code, out, _ = stats(repo, "--run", "b", "--json", monkeypatch=monkeypatch)
    assert code == 0 and [run["run"] for run in json.loads(out)["runs"]] == ["b"]
    assert [row["agent"] for row in json.loads(out)["agents"]] == ["command"]


def test_the_runs_a_remote_keeps_beside_the_clones_own_and_bad_input(tmp_path: Path, monkeypatch) -> None:
    repo = job(tmp_path / "repo")
    run_in(repo, "a", "plain")
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    # the run's refs, its branch and the notes, where `ralph run --remote` keeps them (git/remote.py)
    git(repo, "push", "-q", "origin", "refs/ralph/a/*:refs/ralph/a/*", "refs/heads/*:refs/heads/*", "refs/notes/ralph")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))

    none_here = stats(clone, monkeypatch=monkeypatch)
    assert (
        none_here[0] == 1
        and none_here[2] == "ralph: no ralph run in this repository yet — start one with `ralph run`\n"
    )
    unknown = stats(repo, "--run", "zzz", monkeypatch=monkeypatch)
    assert unknown[0] == 1 and unknown[2] == "ralph: no run named 'zzz' — known runs: a\n"
    no_remote = stats(clone, "--remote", "upstream", monkeypatch=monkeypatch)
    assert no_remote[0] == 1 and "no git remote named 'upstream'" in no_remote[2]

    run_in(clone, "mine", "late", preset="claude")
    code, out, err = stats(clone, "--remote", "origin", "--json", monkeypatch=monkeypatch)
    assert code == 0 and err == "", err
    here = {run["run"]: run for run in json.loads(out)["runs"]}
    assert sorted(here) == ["a", "mine"]
    in_repo = json.loads(stats(repo, "--run", "a", "--json", monkeypatch=monkeypatch)[1])["runs"][0]
    assert here["a"] == in_repo  # the remote's copy reads as the run itself
    mine = here["mine"]
    assert (mine["laps"], mine["items_finished"], mine["tokens"], mine["laps_of_unknown_tokens"]) == (2, 2, 120, 1)
    assert (mine["cost_usd"], mine["laps_of_unknown_cost"]) == (0.05, 1)  # a lower bound, said so
    code, out, _ = stats(clone, monkeypatch=monkeypatch)
    (row,) = [line.split() for line in out.splitlines() if line.startswith("mine ")]
    assert code == 0 and row[:6] == ["mine", "2", "100%", "2", "-", "≥120"] and row[6] == "≥$0.05"
    assert "≥: the sum over the laps that reported; some laps did not" in out

    lap = git(clone, "rev-parse", "refs/ralph/mine/laps/1")  # its note, as a later ralph would write it
    note = json.loads(git(clone, "notes", "--ref=ralph", "show", lap))
    git(clone, "notes", "--ref=ralph", "add", "-f", "-m", json.dumps(dict(note, format=99)), lap)
    code, out, err = stats(clone, "--run", "mine", "--json", monkeypatch=monkeypatch)
    assert code == 0 and err.startswith("ralph: warning: run mine: 1 lap(s) without a note this ralph reads")
    assert "(lap 1: the note of lap 1 was written by a newer ralph (format 99" in err
    (mine,) = json.loads(out)["runs"]
    assert (mine["laps"], mine["unreadable_laps"], mine["green_laps"], mine["items_finished"]) == (2, 1, 1, 1)
