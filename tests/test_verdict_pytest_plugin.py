"""ralph's pytest plugin in real pytest sessions, on every pytest users have: the oldest that ralph
supports, the newest 8.x and the newest 9.x. Each runs in a virtualenv of its own, holding that
pytest and nothing else, built at most once a day and kept between runs of the suite (in
RALPH_TEST_PYTESTS_DIR, else /tmp/ralph-test-pytests). The plugin is injected as ralph injects it
(`pytest_results.check_env`), and each session is compared with the same session without it."""

from __future__ import annotations

import ast
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.repos import write

from ralph.facts import pytest_results

VERSIONS = {"7.4": "pytest==7.4.*", "8.x": "pytest>=8,<9", "9.x": "pytest>=9,<10"}
CACHE = Path(os.environ.get("RALPH_TEST_PYTESTS_DIR") or "/tmp/ralph-test-pytests")
FRESH_FOR = 24 * 3600  # seconds: "newest 8.x or 9.x" is PyPI's newest of a day ago at most

PROJECT = {
    "test_outcomes.py": """\
        def test_passes():
            pass


        def test_fails():
            assert 1 == 2
    """,
    "test_skipped.py": """\
        import pytest

        pytest.skip("not on this machine", allow_module_level=True)
    """,
    "test_needs_module.py": """\
        import pytest

        pytest.importorskip("ralph_test_no_such_module")
    """,
}
# Every kind of configuration file pytest reads, each making any warning an error.
CONFIGS = {
    "pyproject.toml": '[tool.pytest.ini_options]\nfilterwarnings = ["error"]\npython_files = ["test_*.py"]\n',
    "pytest.ini": "[pytest]\nfilterwarnings = error\npython_files = test_*.py\n",
    "tox.ini": "[pytest]\nfilterwarnings = error\npython_files = test_*.py\n",
    "setup.cfg": "[tool:pytest]\nfilterwarnings = error\npython_files = test_*.py\n",
}

_built: dict[str, Path | str] = {}  # version -> its Python, or why it could not be installed


def pytest_python(version: str) -> Path:
    """The Python of the virtualenv holding VERSIONS[version]; a test of a version that cannot be
    installed fails, saying why (once tried, not tried again in this process)."""
    if version not in _built:
        _built[version] = _build(version)
    found = _built[version]
    if isinstance(found, str):
        pytest.fail(found, pytrace=False)
    return found


def _build(version: str) -> Path | str:
    folder = CACHE / f"py{sys.version_info[0]}.{sys.version_info[1]}-pytest-{version}"
    python, ready = folder / "bin" / "python", folder / "ready"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the suite's other processes wait for this build; closing releases it
        if ready.exists() and python.exists() and time.time() - ready.stat().st_mtime < FRESH_FOR:
            return python
        shutil.rmtree(folder, ignore_errors=True)
        # No pip inside: the suite's own pip installs into it, the cheapest build measured.
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-cache-dir"]
            + ["--retries", "1", "--timeout", "30", VERSIONS[version]],
            capture_output=True,
            text=True,
        )
        if pip.returncode != 0:
            said = (pip.stdout + pip.stderr).splitlines()
            said = [line for line in said if "Location" not in line][-5:]  # not its notes on index folders it skips
            return f"could not install {VERSIONS[version]} from PyPI (pip exit {pip.returncode}): " + " | ".join(said)
        ready.touch()
    return python


def session(python: Path, project: Path, report: Path | None) -> tuple[int, str]:
    """A pytest session in `project` as a user starts it: its exit code and output (its duration
    left out), with ralph's plugin injected as ralph does when `report` is given."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PYTEST_", "PYTHON", "COV_"))}
    if report is not None:
        env = pytest_results.check_env(env, report)
    done = subprocess.run(
        [str(python), "-m", "pytest"], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )
    return done.returncode, re.sub(r" in [0-9.]+s\b", " in Ns", done.stdout + done.stderr)


def lines(report: Path) -> list:
    """The report's lines: a test's an array ([session, id, setup, call, teardown, xfail]), the rest objects."""
    return [json.loads(line) for line in report.read_text().splitlines()]


def objects(found: list) -> list[dict]:
    return [line for line in found if isinstance(line, dict)]


def calls(found: list) -> dict[str, str]:
    return {line[1]: line[3] for line in found if isinstance(line, list)}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("version", VERSIONS)
def test_a_session_under_filterwarnings_error_is_reported_and_left_as_it_was(tmp_path: Path, version, config):
    python = pytest_python(version)
    project = tmp_path / "project"
    write(project, {**PROJECT, config: CONFIGS[config]})
    report = tmp_path / "report.jsonl"

    alone = session(python, project, None)
    exit_code, output = session(python, project, report)

    assert (exit_code, output) == alone and exit_code == 1  # one test fails; nothing else changed
    assert not re.search(r"ralph|inicfg|Warning|INTERNALERROR", output), output
    found = lines(report)
    sessions = {line[0] if isinstance(line, list) else line["session"] for line in found}
    assert len(sessions) == 1 and "parent" in found[0]
    assert calls(found) == {"test_outcomes.py::test_passes": "passed", "test_outcomes.py::test_fails": "failed"}
    assert [line[2:] for line in found if isinstance(line, list)] == [
        ["passed", "passed", "passed", False],
        ["passed", "failed", "passed", False],
    ]  # one line a test, its three phases in it
    found = objects(found)
    assert sorted(line["collect_skip"] for line in found if "collect_skip" in line) == [
        "test_needs_module.py",
        "test_skipped.py",
    ]
    assert not [line for line in found if "plugin_error" in line or "collect_error" in line]
    (setup,) = [line["setup"] for line in found if "setup" in line]
    assert found[-1]["setup"] == setup  # the session's last line
    listed = "['{}']" if config == "pyproject.toml" else "{}"  # TOML's lists, as pytest holds them
    assert setup["config"] == config
    assert setup["values"] == {
        "filterwarnings": digest(listed.format("error")),
        "python_files": digest(listed.format("test_*.py")),
    }
    assert setup["plugins"]  # pytest's own parts at least

    results = pytest_results.read(report)  # and ralph reads the session
    assert results is not None and results.setup is not None and results.setup.config == config
    assert (results.passed_ids, results.failing_ids) == (
        ["test_outcomes.py::test_passes"],
        ["test_outcomes.py::test_fails"],
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_a_failure_inside_the_plugin_is_written_down_not_raised(tmp_path: Path, version):
    """The plugin digests every plugin's code with hashlib.sha256; this project's conftest takes
    that away, as a locked-down Python can. The session goes on as it would without ralph."""
    python = pytest_python(version)
    project = tmp_path / "project"
    conftest = """\
        import hashlib


        def refused(*args, **kwargs):
            raise ValueError("sha256 is refused here\\nand a second line")


        hashlib.sha256 = refused
    """
    write(project, {**PROJECT, "pytest.ini": CONFIGS["pytest.ini"], "conftest.py": conftest})
    report = tmp_path / "report.jsonl"

    alone = session(python, project, None)
    assert session(python, project, report) == alone and alone[0] == 1

    found = lines(report)
    assert calls(found) == {"test_outcomes.py::test_passes": "passed", "test_outcomes.py::test_fails": "failed"}
    found = objects(found)
    assert sorted(line["plugin_error"] for line in found if "plugin_error" in line) == [
        "pytest_plugin_registered: ValueError: sha256 is refused here",  # the conftest, as pytest loaded it
        "pytest_sessionfinish: ValueError: sha256 is refused here",  # so no setup line
    ]
    assert all(isinstance(line["session"], str) for line in found) and not [line for line in found if "setup" in line]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_report_that_cannot_be_written_leaves_the_session_as_it_was(tmp_path: Path, version):
    python = pytest_python(version)
    project = tmp_path / "project"
    write(project, {**PROJECT, "pytest.ini": CONFIGS["pytest.ini"]})
    folder = tmp_path / "report-is-a-folder"
    folder.mkdir()

    alone = session(python, project, None)
    assert session(python, project, folder) == alone and alone[0] == 1
    assert not list(folder.iterdir())


def test_the_plugin_parses_as_python_3_8():
    """It runs in the check's own Python, which may be as old as 3.8 (the rest of ralph needs 3.11):
    its syntax at least is checked here; the sessions above run in the suite's own Python."""
    source = (pytest_results.PLUGIN_DIR / f"{pytest_results.PLUGIN}.py").read_text()
    ast.parse(source, feature_version=(3, 8))
