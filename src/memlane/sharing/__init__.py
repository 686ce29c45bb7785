"""Sharing pools across agents: the manager's side (grant, revoke, list) and the operator's."""
