"""`ralph bench`: jobs built from real sdists (downloaded once through pip, into a cache the
test workers share), both modes run offline by the scripted model, scored, written as JSON and
drawn as a page in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
import yaml
from helpers.browser import browse, colour_runs, screenshot_rows
from helpers.repos import git, needs_bwrap
from helpers.running import ralph

from ralph.bench import build, jobs, sdists
from ralph.bench.page import LAPS_COLOUR, SESSION_COLOUR
from ralph.config import parse
from ralph.isolation import proc
from ralph.records import ledger


@pytest.fixture
def bench_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One cache for every test of the session, every xdist worker's (their temp folders share a parent)."""
    root = tmp_path_factory.getbasetemp()
    shared = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "bench-cache"
    monkeypatch.setenv("RALPH_BENCH_CACHE", str(shared))
    return shared


def test_the_jobs_are_listed_built_from_pinned_sdists_and_cut(bench_cache: Path, tmp_path: Path):
    listed = ralph(tmp_path, "bench", "--list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines() if line.split()[:1] in ([j.name] for j in jobs.JOBS)]
    assert len(rows) == len(jobs.JOBS) >= 6 and len({row[1] for row in rows}) >= 3
    assert ["itsdangerous-encoding", "rebuild", "itsdangerous", "2.2.0", "3", "8"] in rows
    assert all(int(row[4]) > 0 and int(row[5]) > 0 for row in rows)
    assert sorted(path.name for path in (bench_cache / "sdists").iterdir()) == [
        "isodate-0.7.2.tar.gz",
        "itsdangerous-2.2.0.tar.gz",
        "xmltodict-0.13.0.tar.gz",
    ]
    for job in jobs.JOBS:  # each a repository at one base commit, its ralph files in it
        repo, built = build.prepared(job, bench_cache)
        assert git(repo, "rev-list", "--count", "HEAD").strip() == "1" and git(repo, "status", "--porcelain") == ""
        config = parse((repo / "ralph.yaml").read_text(), "ralph.yaml")
        assert config.goal == built.goal and len(config.checks) == len(built.checks)
        # the tests judge test by test; the job's other checks give no per-test results, so are marked expected red
        assert [check.expect_red for check in config.checks] == [False] + [True] * (len(built.checks) - 1)
        todo = (repo / "TODO.md").read_text()
        assert [line[6:] for line in todo.splitlines() if line.startswith("- [ ] ")] == [i.text for i in built.items]
        assert not (repo / "job.json").exists()  # the answers stay in the cache, outside the job's repository
        replacing = built.kind in ("rebuild", "types")  # each item's edits apply to the base as cut
        for edit in (edit for item in built.items for edit in item.edits if replacing):
            text = (repo / str(edit["path"])).read_text()
            assert str(edit["old"]) in text and str(edit["new"]) not in text
    encoding = build.prepared(jobs.chosen("itsdangerous-encoding")[0], bench_cache)[0]
    assert (encoding / "src/itsdangerous/encoding.py").read_text().count("raise NotImplementedError") == 5
    migrate = build.prepared(jobs.chosen("xmltodict-pytest")[0], bench_cache)[0]
    assert "unittest.TestCase" in (migrate / "tests/test_xmltodict.py").read_text()  # the job: still to migrate


def test_a_types_job_cannot_be_passed_by_silencing_mypy(bench_cache: Path, tmp_path: Path):
    repo, built = build.prepared(jobs.chosen("itsdangerous-signer-types")[0], bench_cache)
    silencing = build.render(built.checks[-1])
    module = "src/itsdangerous/signer.py"
    assert proc.run(silencing, repo).ok  # the cut module silences nothing
    git(tmp_path, "clone", "-q", str(repo), "clone")
    for cheat in ("# mypy: ignore-errors\n", "import hmac  # type: ignore[import]\n"):
        (tmp_path / "clone" / module).write_text(cheat + (repo / module).read_text())
        assert not proc.run(silencing, tmp_path / "clone").ok, cheat


def test_a_changed_sdist_is_refused(bench_cache: Path):
    kept = sdists.fetch(jobs.ITSDANGEROUS, bench_cache)
    wrong = sdists.Sdist("itsdangerous", "2.2.0", "0" * 64)
    with pytest.raises(Exception, match="not the pinned 0000"):
        sdists.fetch(wrong, bench_cache / "elsewhere")
    assert kept.is_file()


def test_both_modes_run_offline_scored_written_and_drawn(bench_cache: Path, tmp_path: Path):
    out, page = tmp_path / "out.json", tmp_path / "out.html"
    names = "itsdangerous-encoding,xmltodict-pytest"
    done = ralph(tmp_path, "bench", "--scripted", "--mode", "both", "--jobs", names, "--json", str(out),
                 "--html", str(page), "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["format"] == 1 and report["model"].startswith("scripted-bench")
    results = {(r["job"], r["mode"]): r for r in report["results"]}
    assert sorted(results) == sorted((job, mode) for job in names.split(",") for mode in ("laps", "session"))
    for result in results.values():
        assert result["finished"] is True and result["tests_passed"] == result["tests_total"] > 0
        assert result["tokens"]["total"] == result["tokens"]["prompt"] + result["tokens"]["completion"] > 0
        assert result["requests"] > 0 and result["wall_s"] > 0 and result["red_laps"] == 0
        assert result["curve"][-1][1] == result["tests_total"] and result["not_judged"] == ""
    assert results[("itsdangerous-encoding", "laps")]["curve"][0] == [0, 0]  # the cut module fails every test
    assert results[("xmltodict-pytest", "laps")]["curve"][0] == [0, 58]  # unittest's tests pass: pytest runs them
    for job, items in (("itsdangerous-encoding", 3), ("xmltodict-pytest", 2)):
        laps, session = results[(job, "laps")], results[(job, "session")]
        assert (laps["laps"], session["laps"]) == (items, 1)  # the model did an item a lap; the session all
        # each finish taken at once (the lap's own check allows a migration's tests their new
        # names): an item is a view, its edits, a test run and a tick; a lap adds a handoff and finish
        edits = [len(item.edits) for item in build.prepared(jobs.chosen(job)[0], bench_cache)[1].items]
        assert session["requests"] == sum(3 + count for count in edits) + 1
        # a lap whose checks still fail (the next items' work) is told so once, and finishes again
        assert 0 <= laps["requests"] - sum(3 + count + 2 for count in edits) < items
        # one session carries every item's work in its context: its largest request outweighs any lap's
        assert session["tokens"]["largest_request"] > laps["tokens"]["largest_request"]
    assert re.search(r"laps: 2/2 jobs finished, 66/66 tests passing \(58 at the start\), [\d,]+ tokens", done.stdout)
    assert "session: 2/2 jobs finished" in done.stdout

    html = page.read_text()
    assert not re.search(r"""(src|href)\s*=|url\(|@import|<script""", html, re.IGNORECASE)
    dom = browse(page, tmp_path / "profile", "--dump-dom").stdout
    assert re.findall(r'<section class="job" data-job="([\w-]+)"', dom) == names.split(",")
    assert dom.count('<polyline class="laps"') == 2 and dom.count('<polyline class="session"') == 2
    assert dom.count("<rect ") == 2 * (3 + 2)  # two bars a lap
    rows = screenshot_rows(page, tmp_path / "profile", tmp_path / "bench.png", size="1000,1400")
    colours = {"laps": LAPS_COLOUR, "session": SESSION_COLOUR}
    assert any(colour_runs(row, colours)[:6] == ["laps", "session"] * 3 for row in rows)  # the bars, lap by lap


def test_bench_input_errors_are_one_line(bench_cache: Path, tmp_path: Path):
    def error(*args: str) -> str:
        result = ralph(tmp_path, "bench", *args)
        assert result.returncode != 0 and result.stdout == "", result.stdout
        return result.stderr

    assert error("--jobs", "itsdangerous-encoding") == (
        "ralph: bench: give --config FILE (the agent to bench) or --scripted (ralph's scripted model)\n"
    )
    assert error("--scripted", "--jobs", "nope,itsdangerous-encoding") == (
        "ralph: bench: no job nope — `ralph bench --list` names them\n"
    )
    config = tmp_path / "agent.yaml"
    config.write_text("goal: mine\nchecks: [true]\n")
    assert "needs an `agent:` section" in error("--config", str(config))
    config.write_text("# the agent\nagent:\n  kind: openai\n  modle: m\n")
    assert error("--config", str(config), "--jobs", "itsdangerous-encoding").startswith(
        f"ralph: {config} (line 4): agent.modle: unknown key"  # the user's file and line, before any job
    )
    assert "cannot read it" in error("--config", str(tmp_path / "missing.yaml"))
    assert "exclude each other" in error("--config", str(config), "--scripted")
    assert error("--scripted", "--jobs", "") == "ralph: bench: --jobs names no job — `ralph bench --list` names them\n"
    # where the results go is checked before any lap is spent on them
    assert "has no folder" in error("--scripted", "--json", str(tmp_path / "missing" / "out.json"))
    assert "is a folder" in error("--scripted", "--html", str(tmp_path))
    assert error("--scripted", "--keep", str(config)) == f"ralph: bench: --keep {config}: not a folder\n"


def test_a_configured_agent_gets_the_same_budget_in_one_session(bench_cache: Path, tmp_path: Path):
    config = tmp_path / "agent.yaml"
    agent = {"kind": "command", "command": "echo looked > notes.txt"}  # works, ticks nothing
    config.write_text(yaml.safe_dump({"agent": agent, "limits": {"max_laps": 2, "lap_timeout": 40}, "goal": "x"}))
    kept, out = tmp_path / "kept", tmp_path / "out.json"
    done = ralph(tmp_path, "bench", "--config", str(config), "--jobs", "itsdangerous-encoding", "--keep", str(kept),
                 "--json", str(out), "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    laps, session = json.loads(out.read_text())["results"]
    assert (laps["mode"], laps["laps"], session["mode"], session["laps"]) == ("laps", 2, "session", 1)
    assert not laps["finished"] and not session["finished"] and laps["tests_passed"] == session["tests_passed"] == 0
    assert laps["not_judged"] == session["not_judged"] == ""  # the bench's own checks ran on what was left
    assert json.loads(out.read_text())["model"] == "command `echo looked > notes.txt`"
    for mode, max_laps, lap_timeout in (("laps", 2, 40), ("session", 1, 80)):
        state = ledger.load(kept / f"itsdangerous-encoding-{mode}", f"bench-{mode}")
        assert state is not None
        limits, agent_config = state.record.config.limits, state.record.config.agent
        assert (limits.max_laps, limits.lap_timeout) == (max_laps, lap_timeout)
        # the laps' model calls and rounds of red checks shown, all in the session's one lap
        assert (agent_config.max_turns, agent_config.fix_attempts) == (60 * 2 // max_laps, 1 * 2 // max_laps)
        assert state.record.config.goal.startswith("Rebuild src/itsdangerous/encoding.py")  # the job's, not the file's


@needs_bwrap
def test_laps_cannot_read_the_bench_cache(bench_cache: Path, tmp_path: Path):
    """The cache holds every job's answers and the packages as they were: in the sandbox it is empty."""
    build.prepared(jobs.chosen("itsdangerous-encoding")[0], bench_cache)
    config = tmp_path / "agent.yaml"
    agent = {
        "kind": "command",
        "command": f"ls -A {bench_cache} | wc -l > seen.txt; ls -A {bench_cache}/jobs >> seen.txt",
    }
    config.write_text(yaml.safe_dump({"agent": agent, "limits": {"max_laps": 1}}))
    kept = tmp_path / "kept"
    done = ralph(tmp_path, "bench", "--config", str(config), "--jobs", "itsdangerous-encoding", "--mode", "laps",
                 "--keep", str(kept), "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert any((bench_cache / "jobs").iterdir())  # there, outside the sandbox
    seen = git(kept / "itsdangerous-encoding-laps", "show", "refs/ralph/bench-laps/laps/1:seen.txt")
    assert seen.split() == ["0"]  # inside: an empty folder, and no jobs folder in it


def test_a_session_that_rewrites_the_tests_is_scored_by_the_tests_as_they_were(bench_cache: Path, tmp_path: Path):
    """A cheat a red session keeps: every test body made `pass` (names and parameters kept), every item ticked."""
    cheat = tmp_path / "cheat.py"
    cheat.write_text(
        "import pathlib, re\n"
        "p = pathlib.Path('tests/test_itsdangerous/test_encoding.py')\n"
        "p.write_text(re.sub(r'(def test_\\w+\\(.*\\):\\n)((?:    .*\\n|\\n)*)', r'\\1    pass\\n\\n', p.read_text()))\n"
        "t = pathlib.Path('TODO.md')\n"
        "t.write_text(t.read_text().replace('- [ ]', '- [x]'))\n"
    )
    config = tmp_path / "agent.yaml"
    config.write_text(yaml.safe_dump({"agent": {"kind": "command", "command": f"{sys.executable} {cheat}"}}))
    out = tmp_path / "out.json"
    done = ralph(tmp_path, "bench", "--config", str(config), "--jobs", "itsdangerous-encoding", "--mode", "session",
                 "--json", str(out), "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (session,) = json.loads(out.read_text())["results"]
    assert session["red_laps"] == 1 and not session["finished"]
    assert (session["tests_passed"], session["tests_total"]) == (0, 8)  # its own versions would have passed 8
