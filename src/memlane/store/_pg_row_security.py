"""Isolation enforced by PostgreSQL itself: row-level security keyed to one role per agent.

The library's own isolation (``_scope.py``, ``_pool_access.py``) holds against agents that make
mistakes; an agent that connects with the store owner's credentials can read every table. For
agents that do not trust each other, the operator gives each one a database role of its own
(``StoreAdmin.create_agent_role``): the role is mapped to the agent in ``agent_roles`` and
the policies below let it see exactly what the library would — its own sessions and events,
and those of the pools it holds a grant on — and write only its own rows (into pools it may
write). The store's owner (who runs the migrations and ``StoreAdmin``) is not subject to them.

Enabling is opt-in and idempotent (:data:`ENABLE`); nothing changes for deployments that
connect as the owner. The helper functions are ``SECURITY DEFINER`` so that a policy can read
``agent_roles`` and ``pool_grants`` without the agent's role seeing them, and take the role
as an argument: inside such a function ``current_user`` is the definer, so the policy passes
its own ``current_user`` in.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ENABLE", "TABLES", "create_agent_role"]

#: the tables an agent's role reads and writes (row-level security on those with ``policy``)
TABLES = ("sessions", "events", "outbox", "vectors", "pool_grants", "deletions", "meta")

# Each helper is wrapped in a scalar subquery: PostgreSQL then evaluates it once per statement
# (an init plan) instead of once per row checked, and a SECURITY DEFINER function is never
# inlined. Measured with bench/pool_access.py: docs/benchmarks.md.
_ME = "(SELECT asm_agent_of(current_user::text))"
_READABLE = "SELECT asm_pools_of(current_user::text, ARRAY['owner', 'write', 'read'])"
_WRITABLE = "SELECT asm_pools_of(current_user::text, ARRAY['owner', 'write'])"
_OWNED = "SELECT asm_pools_of(current_user::text, ARRAY['owner'])"


def _own_rows(table: str) -> str:
    """The policies by which an agent updates and deletes only its own rows of ``table``."""
    return f"""
DROP POLICY IF EXISTS asm_update ON {table};
CREATE POLICY asm_update ON {table} FOR UPDATE
    USING (agent_id = {_ME}) WITH CHECK (agent_id = {_ME});
DROP POLICY IF EXISTS asm_delete ON {table};
CREATE POLICY asm_delete ON {table} FOR DELETE USING (agent_id = {_ME});"""


_OWN_ROWS = {table: _own_rows(table) for table in ("sessions", "events", "vectors")}

ENABLE = f"""
CREATE TABLE IF NOT EXISTS agent_roles (
    role_name TEXT PRIMARY KEY,
    agent_id  TEXT NOT NULL
);
CREATE OR REPLACE FUNCTION asm_agent_of(p_role TEXT) RETURNS TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
    SELECT agent_id FROM agent_roles WHERE role_name = p_role
$$;
CREATE OR REPLACE FUNCTION asm_pools_of(p_role TEXT, p_access TEXT[]) RETURNS SETOF TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
    SELECT g.pool FROM pool_grants g JOIN agent_roles r ON r.agent_id = g.agent_id
    WHERE r.role_name = p_role AND g.access = ANY (p_access)
$$;
ALTER TABLE agent_roles ENABLE ROW LEVEL SECURITY;
ALTER TABLE sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE events ENABLE ROW LEVEL SECURITY;
ALTER TABLE outbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE vectors ENABLE ROW LEVEL SECURITY;
ALTER TABLE pool_grants ENABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS asm_read ON sessions;
CREATE POLICY asm_read ON sessions FOR SELECT
    USING (agent_id = {_ME} OR shared_pool IN ({_READABLE}));
DROP POLICY IF EXISTS asm_insert ON sessions;
CREATE POLICY asm_insert ON sessions FOR INSERT
    WITH CHECK (agent_id = {_ME} AND (shared_pool IS NULL OR shared_pool IN ({_WRITABLE})));
{_OWN_ROWS["sessions"]}

DROP POLICY IF EXISTS asm_read ON events;
CREATE POLICY asm_read ON events FOR SELECT
    USING (agent_id = {_ME} OR partition IN (SELECT 'pool:' || p FROM ({_READABLE}) r (p)));
DROP POLICY IF EXISTS asm_insert ON events;
CREATE POLICY asm_insert ON events FOR INSERT WITH CHECK (
    agent_id = {_ME}
    AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = session_id AND s.agent_id = {_ME})
    AND (partition = 'agent:' || {_ME}
         OR partition IN (SELECT 'pool:' || p FROM ({_WRITABLE}) w (p)))
);
{_OWN_ROWS["events"]}

DROP POLICY IF EXISTS asm_own ON outbox;
CREATE POLICY asm_own ON outbox
    USING (EXISTS (SELECT 1 FROM events e WHERE e.seq = outbox.seq AND e.agent_id = {_ME}))
    WITH CHECK (EXISTS (SELECT 1 FROM events e WHERE e.seq = outbox.seq AND e.agent_id = {_ME}));

DROP POLICY IF EXISTS asm_read ON vectors;
CREATE POLICY asm_read ON vectors FOR SELECT
    USING (agent_id = {_ME} OR partition IN (SELECT 'pool:' || p FROM ({_READABLE}) r (p)));
DROP POLICY IF EXISTS asm_insert ON vectors;
CREATE POLICY asm_insert ON vectors FOR INSERT WITH CHECK (agent_id = {_ME});
{_OWN_ROWS["vectors"]}

-- an agent sees its own grants, every grant of the pools it owns, and who owns each pool
-- (what a refusal names); it creates a pool for itself and grants only on pools it owns
DROP POLICY IF EXISTS asm_read ON pool_grants;
CREATE POLICY asm_read ON pool_grants FOR SELECT
    USING (agent_id = {_ME} OR access = 'owner' OR pool IN ({_OWNED}));
DROP POLICY IF EXISTS asm_insert ON pool_grants;
CREATE POLICY asm_insert ON pool_grants FOR INSERT WITH CHECK (
    (access = 'owner' AND agent_id = {_ME}) OR (access <> 'owner' AND pool IN ({_OWNED}))
);
DROP POLICY IF EXISTS asm_update ON pool_grants;
CREATE POLICY asm_update ON pool_grants FOR UPDATE
    USING (pool IN ({_OWNED}) AND access <> 'owner')
    WITH CHECK (pool IN ({_OWNED}) AND access <> 'owner');
DROP POLICY IF EXISTS asm_delete ON pool_grants;
CREATE POLICY asm_delete ON pool_grants FOR DELETE
    USING (pool IN ({_OWNED}) AND access <> 'owner');
"""


#: the privileges an agent's role is given (besides its rows, which the policies choose)
_ROLE_GRANTS = (
    "GRANT USAGE ON SCHEMA {schema} TO {role}",
    "GRANT USAGE ON SCHEMA {extension} TO {role}",
    "GRANT SELECT ON {schema}.migrations TO {role}",
    *(
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {{schema}}.{table} TO {{role}}"
        for table in TABLES
    ),
    "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
)


def create_agent_role(store: Any, agent_id: str, role: str, password: str | None) -> str:
    """Enable row-level security on ``store`` (a ``PostgresStore`` opened by the schema's
    owner) if it is not yet, create the login role ``role`` unless it exists, give it the
    privileges an agent needs and map it to ``agent_id``; return ``role``. One transaction."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(store.conninfo, autocommit=True) as conn, conn.transaction():
        (extension,) = conn.execute(
            "SELECT n.nspname FROM pg_extension x JOIN pg_namespace n "
            "ON n.oid = x.extnamespace WHERE x.extname = 'vector'"
        ).fetchone() or ("public",)
        names = {
            "schema": sql.Identifier(store.schema),
            "extension": sql.Identifier(extension),
            "role": sql.Identifier(role),
        }
        conn.execute(sql.SQL("SET LOCAL search_path TO {schema}, {extension}").format(**names))
        conn.execute(ENABLE)
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        if exists is None:
            create = sql.SQL("CREATE ROLE {role} LOGIN").format(**names)
            if password is not None:
                create = sql.SQL("{} PASSWORD {}").format(create, sql.Literal(password))
            conn.execute(create)
        elif password is not None:
            conn.execute(
                sql.SQL("ALTER ROLE {role} PASSWORD {}").format(sql.Literal(password), **names)
            )
        for statement in _ROLE_GRANTS:
            conn.execute(sql.SQL(statement).format(**names))
        conn.execute(
            "INSERT INTO agent_roles (role_name, agent_id) VALUES (%s, %s) "
            "ON CONFLICT (role_name) DO UPDATE SET agent_id = excluded.agent_id",
            (role, agent_id),
        )
    return role
