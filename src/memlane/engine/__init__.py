"""The machine under every façade: the opened log store and vector index (``storage``), the
worker that embeds the outbox (``indexer``), and the engine that holds them with a searcher."""
