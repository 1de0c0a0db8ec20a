"""What users see: printed lines, events, the live view."""
