"""API keys: `cgr_<prefix>_<secret>`. Only a SHA-256 of the whole key is stored (keys are 190 random
bits, so a fast hash is enough: there is nothing to brute-force); lookup is by the public prefix and the
comparison is constant-time."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets

from sqlalchemy import select

from cg_ray.errors import CgRayError
from cg_ray.serve.db import ApiKey, Store, new_id

KEY_PREFIX = "cgr"


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(store: Store, name: str) -> tuple[str, str]:
    """Create a key; returns (key id, the key itself — shown once, never stored)."""
    prefix = secrets.token_hex(6)
    key = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(24)}"
    key_id = new_id("key")
    with store.session() as s:
        s.add(ApiKey(id=key_id, name=name, prefix=prefix, key_hash=_hash(key)))
    return key_id, key


def verify_key(store: Store, key: str) -> str | None:
    """The key id for a valid, unrevoked key; None otherwise."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX:
        return None
    with store.session() as s:
        row = s.scalar(select(ApiKey).where(ApiKey.prefix == parts[1]))
        if row is None or row.revoked_at is not None:
            return None
        return row.id if hmac.compare_digest(row.key_hash, _hash(key)) else None


def revoke_key(store: Store, key_id: str) -> None:
    with store.session() as s:
        row = s.get(ApiKey, key_id)
        if row is None:
            raise CgRayError(f"no API key {key_id!r}")
        if row.revoked_at is None:
            row.revoked_at = dt.datetime.now(dt.UTC)


def list_keys(store: Store) -> list[dict[str, str | None]]:
    with store.session() as s:
        return [
            {
                "id": k.id,
                "name": k.name,
                "created_at": k.created_at.isoformat(),
                "revoked_at": k.revoked_at.isoformat() if k.revoked_at else None,
            }
            for k in s.scalars(select(ApiKey).order_by(ApiKey.created_at))
        ]
