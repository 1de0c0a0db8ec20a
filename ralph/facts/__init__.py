"""What ralph.yaml is checked against: the agent CLIs' presets and the logins they need, the check
files a repository may hold, and where each test runner writes its per-test results (JUnit XML,
pytest's own plugin). Small readers with no state, below the config that names them."""
