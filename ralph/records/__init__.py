"""What ralph stores and reads back: the run's record and each lap's note, versioned
(formats.py), and the run's state rebuilt from refs and notes (ledger.py)."""
