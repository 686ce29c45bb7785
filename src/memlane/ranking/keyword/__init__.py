"""BM25 keyword ranking over per-partition postings held in memory, scored by numpy."""
