"""The in-memory search engines beneath the stores: BM25 keyword ranking (``keyword/``) and
exact vector search with a quantized first pass (``vectors/``), with their snapshots."""
