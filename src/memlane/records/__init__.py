"""What a record must be before it is stored: validated, its JSON canonical, redacted."""
