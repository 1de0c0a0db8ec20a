"""The run and its laps: the loop, the lap's phases, fuses, parallel slots and remote workers."""
