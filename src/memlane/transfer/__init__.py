"""Moving memory in and out: the JSON Lines export format and its import, YAML, Markdown."""
