"""Isolation enforced by PostgreSQL itself: row-level security keyed to one role per agent.

The library's own isolation (``core/scope.py``, ``privacy/pool_access.py``) holds against
agents that make mistakes; an agent that connects with the store owner's credentials can read
every table. For agents that do not trust each other, the operator gives each one a database
role of its own (``StoreAdmin.create_agent_role``): the role is mapped to the agent in
``agent_roles`` and the policies below let it see exactly what the library would — its own
sessions and events, and those of the pools it holds a grant on — and write only its own rows
(into pools it may write). The store's owner (who runs the migrations and ``StoreAdmin``) is
not subject to them.

Enabling is opt-in and idempotent (:data:`ENABLE`); nothing changes for deployments that
connect as the owner. The helper functions are ``SECURITY DEFINER`` so that a policy can read
``agent_roles`` and ``pool_grants`` without the agent's role seeing them, and take the role
as an argument: inside such a function ``current_user`` is the definer, so the policy passes
its own ``current_user`` in. They answer only for a role the session's login role is a member
of (itself, or one it may ``SET ROLE`` to), so no role learns another's agent or pools.

Rows never move. A role may update only the columns the library's own
statements update (:data:`UPDATABLE`): never who wrote a row, its session, partition or pool,
nor what was said. The policies' ``WITH CHECK`` hold every row where the library would put it
— an event in a session of its agent and in that session's partition, a queued event and a
vector in their event's partition — so even a wider grant could not move a row into another
agent's session or a pool. Whether a pool may be written is checked when a session or event
is inserted: the library lets an agent whose grant was revoked still close its sessions, mark
its events and count their recalls, and so does the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._pg_feed import DELETIONS_KEPT_SECONDS

__all__ = ["ENABLE", "REGRANT", "TABLES", "UPDATABLE", "create_agent_role"]

#: the tables an agent's role reads and writes (row-level security on all but ``meta``)
TABLES = ("sessions", "events", "outbox", "vectors", "pool_grants", "deletions", "meta")

#: The columns an agent's role may UPDATE, by table (a table of :data:`TABLES` not listed:
#: none): exactly those the library's own statements update. A statement of the library that
#: updates another column needs it added here, and a migration that runs :data:`REGRANT`.
UPDATABLE: Mapping[str, tuple[str, ...]] = {
    "sessions": ("status", "updated_us"),
    "events": (
        "status",
        "metadata",
        "recall_count",
        "token_count",
        "payload_preview",
        "deferred",
        "search_text",
    ),
    "outbox": ("claimed_until", "claimed_by"),
    "pool_grants": ("access", "granted_us", "granted_by"),
    "meta": ("value",),
}

# Each helper is wrapped in a scalar subquery: PostgreSQL then evaluates it once per statement
# (an init plan) instead of once per row checked, and a SECURITY DEFINER function is never
# inlined. Measured with bench/pool_access.py: docs/decisions/
# 2026-11-24-pool-grants-and-row-security.md.
_ME = "(SELECT asm_agent_of(current_user::text))"
_READABLE = "SELECT asm_pools_of(current_user::text, ARRAY['owner', 'write', 'read'])"
_WRITABLE = "SELECT asm_pools_of(current_user::text, ARRAY['owner', 'write'])"
_OWNED = "SELECT asm_pools_of(current_user::text, ARRAY['owner'])"


# An event sits in a session of its agent, in that session's partition (_scope.partition_of).
_PLACED = f"""EXISTS (
        SELECT 1 FROM sessions s WHERE s.id = events.session_id AND s.agent_id = {_ME}
        AND events.partition = CASE WHEN coalesce(s.shared_pool, '') = ''
                                    THEN 'agent:' || s.agent_id
                                    ELSE 'pool:' || s.shared_pool END)"""
# A queued event and a vector are the agent's own event's, in that event's partition.
_OWN_EVENT = """EXISTS (
        SELECT 1 FROM events e WHERE e.seq = {table}.seq AND e.agent_id = {me}
        AND e.partition = {table}.partition)"""


def _own_rows(table: str, check: str) -> str:
    """The policies by which an agent updates and deletes only its own rows of ``table``,
    an updated row still passing ``check``."""
    return f"""
DROP POLICY IF EXISTS asm_update ON {table};
CREATE POLICY asm_update ON {table} FOR UPDATE
    USING (agent_id = {_ME}) WITH CHECK ({check});
DROP POLICY IF EXISTS asm_delete ON {table};
CREATE POLICY asm_delete ON {table} FOR DELETE USING (agent_id = {_ME});"""


_VECTOR_CHECK = f"agent_id = {_ME} AND {_OWN_EVENT.format(table='vectors', me=_ME)}"
_OWN_ROWS = {
    "sessions": _own_rows("sessions", f"agent_id = {_ME}"),
    "events": _own_rows("events", f"agent_id = {_ME} AND {_PLACED}"),
    "vectors": _own_rows("vectors", _VECTOR_CHECK),
}

ENABLE = f"""
CREATE TABLE IF NOT EXISTS agent_roles (
    role_name TEXT PRIMARY KEY,
    agent_id  TEXT NOT NULL
);
-- (session_user: inside a SECURITY DEFINER function current_user is the definer, while the
-- session's login role stays the caller's)
CREATE OR REPLACE FUNCTION asm_agent_of(p_role TEXT) RETURNS TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
    SELECT r.agent_id FROM agent_roles r JOIN pg_catalog.pg_roles o ON o.rolname = r.role_name
    WHERE r.role_name = p_role AND pg_catalog.pg_has_role(session_user, o.oid, 'MEMBER')
$$;
CREATE OR REPLACE FUNCTION asm_pools_of(p_role TEXT, p_access TEXT[]) RETURNS SETOF TEXT
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
    SELECT g.pool FROM pool_grants g JOIN agent_roles r ON r.agent_id = g.agent_id
    JOIN pg_catalog.pg_roles o ON o.rolname = r.role_name
    WHERE r.role_name = p_role AND g.access = ANY (p_access)
    AND pg_catalog.pg_has_role(session_user, o.oid, 'MEMBER')
$$;
ALTER TABLE agent_roles ENABLE ROW LEVEL SECURITY;
ALTER TABLE sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE events ENABLE ROW LEVEL SECURITY;
ALTER TABLE outbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE vectors ENABLE ROW LEVEL SECURITY;
ALTER TABLE pool_grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE deletions ENABLE ROW LEVEL SECURITY;

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
    AND {_PLACED}
    AND (partition = 'agent:' || {_ME}
         OR partition IN (SELECT 'pool:' || p FROM ({_WRITABLE}) w (p)))
);
{_OWN_ROWS["events"]}

DROP POLICY IF EXISTS asm_own ON outbox;
CREATE POLICY asm_own ON outbox
    USING (EXISTS (SELECT 1 FROM events e WHERE e.seq = outbox.seq AND e.agent_id = {_ME}))
    WITH CHECK ({_OWN_EVENT.format(table="outbox", me=_ME)});

DROP POLICY IF EXISTS asm_read ON vectors;
CREATE POLICY asm_read ON vectors FOR SELECT
    USING (agent_id = {_ME} OR partition IN (SELECT 'pool:' || p FROM ({_READABLE}) r (p)));
DROP POLICY IF EXISTS asm_insert ON vectors;
CREATE POLICY asm_insert ON vectors FOR INSERT WITH CHECK ({_VECTOR_CHECK});
{_OWN_ROWS["vectors"]}

-- which partitions lost rows (store/_pg_feed.py): every agent's deletes add rows, every
-- agent's worker prunes those older than the caches keep; none is rewritten or forgotten early
DROP POLICY IF EXISTS asm_read ON deletions;
CREATE POLICY asm_read ON deletions FOR SELECT USING (TRUE);
DROP POLICY IF EXISTS asm_insert ON deletions;
CREATE POLICY asm_insert ON deletions FOR INSERT WITH CHECK (TRUE);
DROP POLICY IF EXISTS asm_delete ON deletions;
CREATE POLICY asm_delete ON deletions FOR DELETE
    USING (deleted_at < now() - make_interval(secs => {DELETIONS_KEPT_SECONDS}));

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


def _update_grants(table: str) -> tuple[str, ...]:
    """Statements (``{role}`` and ``{schema}`` to fill) leaving the role UPDATE on exactly
    the :data:`UPDATABLE` columns of ``table``: revoking UPDATE on a table revokes it on
    its columns too, so a role granted more by an older version is narrowed as well."""
    columns = UPDATABLE.get(table, ())
    return (
        f"REVOKE UPDATE ON {{schema}}.{table} FROM {{role}}",
        *(
            [f"GRANT UPDATE ({', '.join(columns)}) ON {{schema}}.{table} TO {{role}}"]
            * bool(columns)
        ),
    )


#: the privileges an agent's role is given (besides its rows, which the policies choose)
_ROLE_GRANTS = (
    "GRANT USAGE ON SCHEMA {schema} TO {role}",
    "GRANT USAGE ON SCHEMA {extension} TO {role}",
    "GRANT SELECT ON {schema}.migrations TO {role}",
    *(f"GRANT SELECT, INSERT, DELETE ON {{schema}}.{table} TO {{role}}" for table in TABLES),
    *(statement for table in TABLES for statement in _update_grants(table)),
    "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
)


def _sql_literal(text: str) -> str:
    """``text`` as a string literal in SQL (quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


_REGRANT_EACH = "".join(
    f"        EXECUTE format({_sql_literal(statement.format(schema='%1$I', role='%2$I'))}, "
    "current_schema(), mapped.role_name);\n"
    for table in TABLES
    for statement in _update_grants(table)
)

#: When row-level security is enabled on the store (``agent_roles`` exists): apply
#: :data:`ENABLE` again — the functions and policies of this version — and narrow every mapped
#: role's UPDATE to :data:`UPDATABLE`; nothing on a store without agent roles. Run after the
#: migrations whenever an open applied any (``PostgresStore._migrate``), with the store's
#: schema first on the search path: so the policies of a store upgraded across versions are
#: this version's, made on the schema they were written for.
REGRANT = f"""
DO $regrant$
DECLARE
    mapped RECORD;
BEGIN
    IF to_regclass(format('%I.agent_roles', current_schema())) IS NULL THEN
        RETURN;
    END IF;
    EXECUTE $enable${ENABLE}$enable$;
    FOR mapped IN SELECT r.role_name FROM agent_roles r
                  JOIN pg_catalog.pg_roles o ON o.rolname = r.role_name LOOP
{_REGRANT_EACH}    END LOOP;
END $regrant$;
"""


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
