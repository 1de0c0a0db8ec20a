"""The CLI's commands, one module each: cli.py declares them, each here returns an exit code.
Beside them: summary.py (a run's standing, which log, status, land and the end of a run say)
and crash_log.py (what a bug leaves behind, written at cli.py's edge)."""
