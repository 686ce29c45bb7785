"""Search over one agent's scope: the searcher, rank fusion, time expressions in queries,
recency as a ranked list, and the recall counts every search writes."""
