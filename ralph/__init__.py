"""ralph: long coding jobs as a series of fresh agent laps, judged by the repository's checks."""

__version__ = "0.1.0"
