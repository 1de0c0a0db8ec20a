"""One lap, as its phases (phases.py runs them): prepare the workspace, run the agent, commit its
slice (hooks), run the checks, decide the verdict, record it, advance the green line; the split
and planned laps, and the context every phase reads."""
