"""Text for a model: token counting, shrinking text and JSON to a budget without an LLM,
and documents cut into chunks the embedder reads whole."""
