"""`ralph tell`: a message for a run's next lap."""

from __future__ import annotations

from pathlib import Path

from ralph import git
from ralph.errors import Exit, RalphError
from ralph.git.remote import Remote
from ralph.git.store import RefStore
from ralph.records import ledger
from ralph.run import workers
from ralph.show import ui


def tell(cwd: Path, message: str, run: str | None, remote: str | None = None) -> Exit:
    if not message.strip():
        raise RalphError("the message is empty — say what the next lap should know")
    top = git.open_repo(cwd).top
    if remote is not None:  # the message goes where every worker of the run looks: the remote
        run = workers.fetch_runs(top, remote, run)
    state = ledger.resolve(top, run)
    if state.record.on_remote and remote is None:
        raise RalphError(
            f"run {state.name} is kept on a git remote, whose refs replace this clone's: "
            "tell it there with `ralph tell --remote REMOTE`"
        )
    store = RefStore(top, Remote.keeping(remote, [state.name]) if remote else None)
    ledger.tell(store, state.name, message.strip())
    ui.say(f"told run [bold]{state.name}[/]: its next lap will see it (once), running now or resumed later")
    return Exit.DONE
