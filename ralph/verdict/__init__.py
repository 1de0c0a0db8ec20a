"""What decides a lap: the repository's checks, the ratchet, the guard, the hooks and the judge."""
