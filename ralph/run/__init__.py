"""The run around its laps: the loop, the run's mode, fuses, parallel slots, best-of rounds,
remote workers and claims, and a run's standing as the commands and the run's end say it (summary)."""
