"""The CLI's commands, one module each: cli.py declares them, each here returns an exit code.
Beside them: crash_log.py (what a bug leaves behind, written at cli.py's edge) and answers.py
(status, log and show answered from what they printed before, while nothing they printed from has
changed). A run's standing, which log, status, land and the end of a run all say, is
ralph/run/summary.py: below the commands, where the run can say it too."""
