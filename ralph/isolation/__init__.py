"""Where code runs and how it is kept in: processes, the jail and the sandbox, toolchains, the
crash points. Git-free: the workspace that git makes is ralph.workspace."""
