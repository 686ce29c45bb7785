"""The one write path under :class:`~memlane.SessionManager`, and its ``record_*`` conveniences."""
