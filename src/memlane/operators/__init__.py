"""The operator's store-wide parts behind :class:`~memlane.admin.StoreAdmin`: what it
reports (sessions with their sizes, store statistics, what a prune removed) and how it
prunes, erases and applies retention across every agent."""
