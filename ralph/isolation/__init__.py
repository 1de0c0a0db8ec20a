"""Where lap code runs and how it is kept in: processes, the sandbox, the workspace."""
