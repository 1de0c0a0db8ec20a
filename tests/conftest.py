"""Fixtures and hooks only: an isolated HOME for every test, the slowest tests started first and
marked `slow`. What tests share besides is in helpers/ (repositories, running ralph)."""

from __future__ import annotations

import pytest
from helpers.repos import IDENTITY


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """Never read or write the developer's HOME or global git config."""
    home = tmp_path_factory.mktemp("home")
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n[user]\n\tname = Test\n\temail = t@example.com\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return home


# The longest tests (`--durations`), started first: one started last would alone set the
# suite's wall time on two cores. They are the `slow` ones: `-m "not slow"` leaves them out.
LONGEST = (
    "test_agent_clis.py",  # the real agent CLIs: the first of each installs it (1.9 GB in all)
    "test_bench_scripts.py",  # every bench script in its tiny mode: a few seconds to a minute each
    "test_the_jobs_are_listed_built_from_pinned_sdists_and_cut",
    "test_both_modes_run_offline_scored_written_and_drawn",
    "test_a_check_that_imports_the_users_checkout",
    "test_a_lap_that_changes_how_pytest_judges_is_red",
    "test_the_files_that_define_how_a_check_runs_are_protected",
    "test_a_type_checker_or_linter_a_check_runs_keeps_its_settings",
    "test_long_run",
    "test_a_sandboxed_laps_daemons_do_not_outlive_its_phase",  # its stragglers wait 4 s, then it 5
    "test_git_remote.py",
    "test_the_real_mini_swe_agent_does_a_lap",
    "test_what_an_agent_prints_cannot_crash_the_run",
    "test_ralphs_hooks_install_the_way_pre_commit_users_install_hooks",
    "test_commands_demo.py",
    "test_a_ralph_killed_mid_run_is_resumed",
    "test_a_fifo_planted_after_a_finish_that_changed_nothing_does_not_stall_ralphs_git",
    "test_a_nested_repositorys_ref_linked_to_proc_self_mem_neither_crashes_ralph_nor_its_resume",
)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks given here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(name in item.nodeid for name in LONGEST):
            item.add_marker(pytest.mark.slow)
    # The longest first, in LONGEST's order, so xdist spreads them: the agent CLIs' installs and the
    # bench builds first of all, since the other tests of each wait on them.
    items.sort(key=lambda item: next((at for at, name in enumerate(LONGEST) if name in item.nodeid), len(LONGEST)))
