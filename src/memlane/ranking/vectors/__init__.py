"""Exact vector search over per-partition matrices held in memory, with an 8- or 4-bit
first pass over big partitions."""
