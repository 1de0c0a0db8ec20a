"""The run and its laps: the loop, the lap's phases, fuses, parallel slots and remote workers,
and a run's standing as the commands and the run's end say it (summary)."""
