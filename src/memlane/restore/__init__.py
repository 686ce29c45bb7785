"""What ``restore()`` hands a fresh process: the context within a token budget, and why.

``result`` holds the public types (the budget's shares, the candidates, the restored
context and its report); ``plan`` is the pure budgeted packer; ``packer`` claims
the budget one event at a time; ``text`` and ``chat`` write events for a model; ``gather``
reads the candidates from the store; ``summaries`` writes the rolling summaries that stand in
for spans that do not fit.
"""

from .chat import MESSAGE_OVERHEAD
from .packer import MIN_USEFUL_TOKENS, SUMMARY_SHARE, ReportItem, SectionShare
from .plan import pack
from .result import BudgetShares, RestoreCandidates, RestoredContext, RestoreReport, rank_score
from .text import PAYLOAD_PREFIX, json_fragments

__all__ = [
    "MESSAGE_OVERHEAD",
    "MIN_USEFUL_TOKENS",
    "PAYLOAD_PREFIX",
    "SUMMARY_SHARE",
    "BudgetShares",
    "ReportItem",
    "RestoreCandidates",
    "RestoreReport",
    "RestoredContext",
    "SectionShare",
    "json_fragments",
    "pack",
    "rank_score",
]
