"""Long-term memory built on the write path: what the agent knows about its users, and
knowledge documents ingested as searchable chunks."""
