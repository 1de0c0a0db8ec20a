"""The CLI's commands, one module each: cli.py declares them, each here returns an exit code."""
