"""The run's lifecycle hooks (`hooks:` in ralph.yaml): commands of the user's, told what happened.

They run in the user's repository through the one subprocess door, with the run's scrubbed
environment, a timeout, and RALPH_RUN, RALPH_LAP, RALPH_STATUS, RALPH_REASON (and RALPH_EXIT
when the run stops). A hook that fails is a warning: it never changes a lap or the run.
"""

from __future__ import annotations

from pathlib import Path

from ralph.config.sections import LifecycleHooks
from ralph.isolation import proc
from ralph.show import ui

VALUE_CAP = 4000  # characters of each RALPH_* value a hook gets


def fire(hooks: LifecycleHooks, event: str, top: Path, env: dict[str, str], **facts: object) -> None:
    """Run the hook for `event` (on_lap_end, on_done, on_stop), if there is one."""
    command = getattr(hooks, event)
    if not command:
        return
    # A reason can hold what a model or a lap wrote: no NUL (no environment can hold one) and
    # not so long that the kernel refuses to start the hook.
    told = {f"RALPH_{name.upper()}": str(value).replace("\0", "")[:VALUE_CAP] for name, value in facts.items()}
    # Your own command, not a lap's: your environment as ralph's git gets it, your git config too.
    yours = proc.clean_env() | {name: value for name, value in env.items() if name not in proc.LAP_GIT}
    done = proc.run(command, top, env=yours | told, timeout=hooks.timeout)
    if not done.ok:
        why = f"timed out after {hooks.timeout:g}s" if done.timed_out else f"exit {done.exit_code}"
        ui.warn(f"hooks.{event} `{command}` failed ({why}): {ui.one_line(done.tail(300), 200)}")
