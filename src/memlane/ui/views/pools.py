"""Pools and grants: who may read, write or own each shared pool, who granted it and when;
and one pool's log (every grant, revocation and change of owner)."""

from __future__ import annotations

from itertools import groupby

from starlette.requests import Request
from starlette.responses import Response

from ..templates import templates
from .forms import source, text

__all__ = ["pools_page"]


def pools_page(request: Request) -> Response:
    src = source(request)
    pool = text(request, "pool")
    grants = src.pools()
    by_pool = [(name, list(rows)) for name, rows in groupby(grants, key=lambda g: g.pool)]
    log = src.pool_log(pool) if pool is not None else None
    return templates.TemplateResponse(
        request, "pools.html", {"by_pool": by_pool, "pool": pool or "", "log": log}
    )
