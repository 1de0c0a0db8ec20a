"""Agents and their roles: the agent kinds behind one small interface (`base.Agent`, made by
`kinds.make_agent`), and the one conversation loop (`conversation`) that the built-in agent,
the planner and the judge each configure."""
