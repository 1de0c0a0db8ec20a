"""`ralph demo`: the embedded default job, offline, with a scripted model; and the same
sample against an endpoint the user names."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.repos import git
from helpers.running import ralph

from ralph.agents.scripted import ScriptedServer
from ralph.commands.demo import scripted_model


def test_demo_runs_real_laps_offline_and_ends_done(tmp_path: Path):
    folder = tmp_path / "demo"
    result = ralph(tmp_path, "demo", str(folder), timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the model is scripted" in result.stdout and "look around" in result.stdout
    # The person watching sees what the agent does within a lap.
    lines = result.stdout.splitlines()
    assert "  · view textkit/words.py" in lines
    assert any(line.startswith("  · bash: ") and "unittest" in line for line in lines)
    assert "  · finish (done): implemented word_count and top_words" in lines
    assert any(
        "not finished, shown to the agent: the repository's checks fail on your edits: check regressed" in line
        for line in lines
    )
    laps = json.loads(ralph(folder, "log", "--json").stdout)["laps"]
    assert [lap["status"] for lap in laps] == ["green", "red", "green", "green"]
    # unittest's verbose lines judge test by test: the red lap names the test it broke.
    assert "tests that passed now fail: tests/test_words.py::WordsTest::test_top_words" in laps[1]["reason"]
    # The docstring tool is red until the last item and marked expected red: green laps say it judged nothing.
    assert laps[0]["reason"].endswith("tools/docstrings.py` judged nothing (red, no per-test results)")
    assert "expect_red" in result.stderr and "tools/docstrings.py" in result.stderr
    assert laps[-1]["done"] is True
    assert all(lap["agent"]["kind"] == "openai" and lap["agent"]["usage"]["requests"] > 0 for lap in laps)
    assert git(folder, "rev-list", "--count", "refs/ralph/demo/base..ralph/demo") == "3"
    assert '"""Number of whitespace-separated words."""' in git(folder, "show", "ralph/demo:textkit/words.py")
    assert git(folder, "status", "--porcelain") == ""  # the user's side of the demo repo is untouched


def test_demo_refuses_a_folder_that_is_not_empty(tmp_path: Path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    result = ralph(tmp_path, "demo", str(tmp_path / "busy"))
    assert result.returncode == 1 and "is not empty" in result.stderr


def test_demo_against_a_named_endpoint(tmp_path: Path):
    # The named endpoint here is a scripted server too, but ralph treats it as any other:
    # it is reached only through --model and --base-url.
    with ScriptedServer(scripted_model) as server:
        result = ralph(tmp_path, "demo", str(tmp_path / "d"), "--model", "my-model", "--base-url", server.base_url)
        assert result.returncode == 0, result.stdout + result.stderr
        assert all(request.body["model"] == "my-model" for request in server.requests)
    assert "the model is scripted" not in result.stdout
    assert "worked by my-model" in result.stdout
    assert ralph(tmp_path, "demo", "--model", "m").returncode == 1


def test_demo_limits_are_options(tmp_path: Path):
    with ScriptedServer(scripted_model) as server:
        result = ralph(
            tmp_path,
            "demo",
            str(tmp_path / "d"),
            "--model",
            "m",
            "--base-url",
            server.base_url,
            "--max-laps",
            "1",
            "--lap-timeout",
            "30",
            "--max-turns",
            "2",
        )
    assert result.returncode == 3 and "max_laps (1) reached" in result.stdout, result.stdout + result.stderr
    assert "demo: the run did not end done (exit 3)" in result.stdout and "look around" not in result.stdout
    config = json.loads((tmp_path / "d" / "ralph.yaml").read_text())
    assert config["limits"]["lap_timeout"] == 30 and config["agent"]["max_turns"] == 2
    assert len(server.requests) == 2  # the lap's two model calls (the endpoint check is answered apart)
