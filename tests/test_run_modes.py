"""The run's mode (lap/modes.py), decided once from `ralph run`'s options and environment
(options.mode_of): each combination of options either one mode or refused, with the words the
CLI tests pin."""

from __future__ import annotations

from pathlib import Path

import pytest

from ralph.errors import RalphError
from ralph.lap.modes import PARENT_VAR, ROUND_VAR, Candidate, Parallel, Plain, Round, Rounds, Slot, Worker
from ralph.run.options import RunOptions, mode_of

SLOT_ENV = {PARENT_VAR: "4242"}
ROUND = Round(green="abc", item="Write a.txt", first_lap=3, of=2)


def options(**given) -> RunOptions:
    return RunOptions(cwd=Path("."), **given)


@pytest.mark.parametrize(
    ("given", "environ", "mode"),
    [
        ({}, {}, Plain()),
        ({"parallel": 3, "items_per_lap": 2}, {}, Parallel(slots=3, items_per_lap=2)),
        ({"name": "p", "slot": 2, "items_per_lap": 2}, SLOT_ENV, Slot(number=2, items_per_lap=2, parent_pid=4242)),
        (
            {"name": "b", "slot": 1},
            {**SLOT_ENV, **ROUND.env(4)},
            Candidate(number=1, items_per_lap=1, parent_pid=4242, round=ROUND, lap=4),
        ),
        ({"best_of": 3}, {}, Rounds(of=3)),
        ({"remote": "origin", "name": "r"}, {}, Worker(remote="origin", items_per_lap=1)),
        ({"best_of": 2}, SLOT_ENV, Rounds(of=2)),  # the coordinator's own variable, inherited: no slot without --slot
    ],
)
def test_each_mode_is_one_value(given: dict, environ: dict, mode):
    assert mode_of(options(**given), environ) == mode


@pytest.mark.parametrize(
    ("given", "environ", "refused"),
    [
        ({"items_per_lap": 2}, {}, "--items-per-lap is for --parallel runs"),
        ({"best_of": 2, "items_per_lap": 2}, {}, "--items-per-lap is for --parallel runs"),
        ({"best_of": 2, "parallel": 2}, {}, "use --best-of or --parallel, not both"),
        ({"best_of": 2, "remote": "origin", "name": "r"}, {}, "use --best-of or --remote, not both"),
        ({"remote": "origin"}, {}, "--remote needs --name"),
        ({"remote": "origin", "name": "r", "parallel": 2}, {}, "one worker per clone"),
        ({"name": "p", "slot": 1}, {}, "--slot is for the slots a `ralph run --parallel` of p starts itself"),
        ({"name": "p", "slot": 1}, {PARENT_VAR: "me"}, "--slot is for the slots a `ralph run --parallel` of p"),
        ({"slot": 1}, SLOT_ENV, "--slot is for the slots a `ralph run --parallel` starts itself"),
        ({"name": "p", "slot": 1, "parallel": 2}, SLOT_ENV, "--slot is for the slots"),
        ({"name": "p", "slot": 1, "best_of": 2}, SLOT_ENV, "--slot is for the slots"),
        ({"name": "p", "slot": 1, "remote": "origin"}, SLOT_ENV, "--slot is for the slots"),
        ({"name": "b", "slot": 1}, {**SLOT_ENV, ROUND_VAR: "{"}, f"{ROUND_VAR} does not read"),
        ({"name": "b", "slot": 1}, {**SLOT_ENV, ROUND_VAR: '{"lap": 1}'}, f"{ROUND_VAR} does not read"),
    ],
)
def test_what_cannot_go_together_is_refused_before_anything_starts(given: dict, environ: dict, refused: str):
    with pytest.raises(RalphError) as raised:
        mode_of(options(**given), environ)
    assert refused in str(raised.value) and raised.value.exit_code == 1


def test_what_differs_between_modes_is_asked_of_the_mode(tmp_path: Path):
    slot = Slot(number=2, items_per_lap=1, parent_pid=1)
    candidate = Candidate(number=3, items_per_lap=1, parent_pid=1, round=ROUND, lap=4)
    worker = Worker(remote="origin", items_per_lap=1)
    coordinators = [Parallel(slots=2, items_per_lap=1), Rounds(of=2)]
    holding, slots = [Plain(), worker, *coordinators], [slot, candidate]
    assert [mode.coordinates for mode in (Plain(), worker, *slots, *coordinators)] == [False] * 4 + [True] * 2
    assert [mode.holds_the_run for mode in (*holding, *slots)] == [True] * 4 + [False] * 2
    assert [mode.slot_number for mode in (Plain(), worker, *slots)] == [None, None, 2, 3]
    assert (slot.lock_dir(tmp_path), Plain().lock_dir(tmp_path)) == (tmp_path / "slot-2", tmp_path)
    assert (candidate.workspace_name("b"), worker.workspace_name("b")) == ("b.slot-3", "b")
    assert (worker.on_remote, worker.worker, Plain().worker) == (True, worker.name, None) and worker.name
    assert Plain().needs_sandbox is None and all(mode.needs_sandbox for mode in (*slots, worker, *coordinators))
