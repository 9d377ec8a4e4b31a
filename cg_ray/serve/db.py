"""Upload / analysis / API-key metadata in a SQL database (SQLite by default, any SQLAlchemy URL).

Artifacts live on the filesystem; the database holds only small metadata rows, so restarting the
service loses nothing. Every query is scoped by the owning key: a key never sees another key's rows.

In-service analyses are run under a lease (`analysis_leases`: owner replica, expiry, every owner so far):
several ingress replicas share one store, and exactly one of them runs each analysis; a replica that dies
stops renewing, and another takes its work over once the lease has expired.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    create_engine,
    event,
    exists,
    insert,
    select,
    update,
)
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


class Base(DeclarativeBase):
    pass


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(16), unique=True, index=True)  # public part, for lookup
    key_hash: Mapped[str] = mapped_column(String(128))  # sha256 of the whole key; the key is never stored
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_now)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Upload(Base):
    __tablename__ = "uploads"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner: Mapped[str] = mapped_column(ForeignKey("api_keys.id"), index=True)
    name: Mapped[str] = mapped_column(String(300))
    n_rows: Mapped[int] = mapped_column(Integer)
    benchmarks: Mapped[list[str]] = mapped_column(JSON)
    fields: Mapped[dict[str, Any]] = mapped_column(JSON)  # detected fields and the mapping used
    has_scores: Mapped[bool] = mapped_column(default=False)
    path: Mapped[str] = mapped_column(Text)  # server-side, never taken from a client
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_now)


class Analysis(Base):
    __tablename__ = "analyses"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner: Mapped[str] = mapped_column(ForeignKey("api_keys.id"), index=True)
    upload_ids: Mapped[list[str]] = mapped_column(JSON)
    mode: Mapped[str] = mapped_column(String(20))
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(
        String(20), default="queued"
    )  # queued|running|succeeded|failed|cancelled|deleted
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    run_dir: Mapped[str | None] = mapped_column(Text, nullable=True)
    job_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_now)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_now, onupdate=_now)


class Lease(Base):
    """Who runs an in-service analysis, until when; `owners` lists every replica that ever claimed it."""

    __tablename__ = "analysis_leases"

    analysis_id: Mapped[str] = mapped_column(ForeignKey("analyses.id"), primary_key=True)
    owner: Mapped[str | None] = mapped_column(String(80), nullable=True)
    expires_at: Mapped[float] = mapped_column(Float, default=0.0)  # unix seconds: comparable on every backend
    owners: Mapped[list[str]] = mapped_column(JSON, default=list)


ACTIVE_STATUSES = ("queued", "running")
JOB_MODES = ("generate", "arena")  # always Ray jobs: never claimed for an in-service run
DELETED = "deleted"  # a deleted analysis keeps its row (marked), answers 404 and is never listed


Row = TypeVar("Row", Upload, Analysis)  # the owned tables the lookups below serve


class Store:
    """Sessions over one engine; tables are created on first use."""

    def __init__(self, url: str) -> None:
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.engine: Engine = create_engine(url, future=True)
        if url.startswith("sqlite"):
            # Concurrent readers while an analysis thread writes; enforce foreign keys.
            @event.listens_for(self.engine, "connect")
            def _pragmas(conn: Any, _record: Any) -> None:
                cur = conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA foreign_keys=ON")
                cur.close()

        self.postgres = self.engine.dialect.name == "postgresql"
        for attempt in range(3):  # replicas starting together race to create the tables: the loser looks again
            try:
                Base.metadata.create_all(self.engine)
                break
            except (OperationalError, ProgrammingError, IntegrityError):
                if attempt == 2:
                    raise
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self._sessions() as session, session.begin():
            yield session

    def get_owned(self, model: type[Row], owner: str, item_id: str) -> Row | None:
        """The row if it exists AND belongs to `owner`; None otherwise (callers answer 404 either way)."""
        query = select(model).where(model.id == item_id, model.owner == owner)
        if model is Analysis:
            query = query.where(Analysis.status != DELETED)
        with self.session() as s:
            return s.scalar(query)

    def get_owned_any(self, model: type[Row], item_id: str) -> Row | None:
        """Internal lookups by id only (background work); never used to answer a request."""
        with self.session() as s:
            return s.get(model, item_id)

    def list_owned(self, model: type[Row], owner: str) -> list[Row]:
        query = select(model).where(model.owner == owner)
        if model is Analysis:
            query = query.where(Analysis.status != DELETED)
        with self.session() as s:
            return list(s.scalars(query.order_by(model.created_at.desc())))

    def update_analysis(self, analysis_id: str, **values: Any) -> None:
        with self.session() as s:
            row = s.get(Analysis, analysis_id)
            if row is not None:
                for key, value in values.items():
                    setattr(row, key, value)

    # ---------------------------------------------------------------- leases

    def claimable(self, limit: int = 100) -> list[str]:
        """In-service analyses (queued or running, no Ray job) that no live lease holds, oldest first.
        On PostgreSQL the rows another replica is claiming right now are skipped (FOR UPDATE SKIP LOCKED)."""
        live = exists().where(Lease.analysis_id == Analysis.id, Lease.expires_at >= time.time())
        query = (
            select(Analysis.id)
            .where(
                Analysis.status.in_(ACTIVE_STATUSES),
                Analysis.job_id.is_(None),
                Analysis.mode.not_in(JOB_MODES),
                ~live,
            )
            .order_by(Analysis.created_at)
            .limit(limit)
        )
        if self.postgres:
            query = query.with_for_update(skip_locked=True, of=Analysis)
        with self.session() as s:
            return list(s.scalars(query))

    def claim(self, analysis_id: str, owner: str, ttl_s: float) -> bool:
        """Take the lease of an active in-service analysis for `ttl_s` seconds: True for exactly one claimer
        while the lease lives (its holder may claim again: a renewal), and again once it has expired.

        One compare-and-set UPDATE decides: PostgreSQL first locks the analysis row with FOR UPDATE SKIP
        LOCKED (a concurrent claimer moves on at once), and re-checks the UPDATE's condition on the row it
        updates; SQLite runs each statement under its single writer lock, so two UPDATEs never interleave."""
        self._lease_row(analysis_id)
        now = time.time()
        active = exists().where(
            Analysis.id == analysis_id, Analysis.status.in_(ACTIVE_STATUSES), Analysis.job_id.is_(None)
        )
        with self.session() as s:
            if self.postgres:
                locked = select(Analysis.id).where(Analysis.id == analysis_id).with_for_update(skip_locked=True)
                if s.scalar(locked) is None:
                    return False
            won = cast(
                CursorResult[Any],
                s.execute(
                    update(Lease)
                    .where(
                        Lease.analysis_id == analysis_id,
                        (Lease.expires_at < now) | (Lease.owner == owner),
                        active,
                    )
                    .values(owner=owner, expires_at=now + ttl_s)
                    .execution_options(synchronize_session=False)
                ),
            )
            if won.rowcount != 1:
                return False
            lease = s.get(Lease, analysis_id, populate_existing=True)
            if lease is not None and (not lease.owners or lease.owners[-1] != owner):
                lease.owners = [*lease.owners, owner]
            return True

    def _lease_row(self, analysis_id: str) -> None:
        """The analysis' lease row, added unheld if it has none (two replicas adding it: one insert wins)."""
        with self.session() as s:
            if s.get(Lease, analysis_id) is not None:
                return
        try:
            with self.session() as s:
                s.execute(insert(Lease).values(analysis_id=analysis_id, owner=None, expires_at=0.0, owners=[]))
        except IntegrityError:  # inserted by another replica first (or no such analysis: the claim fails)
            pass

    def renew(self, analysis_id: str, owner: str, ttl_s: float) -> bool:
        """Extend `owner`'s lease; False when it is no longer `owner`'s or the analysis is no longer active
        (cancelled, deleted, finished): the holder then stops its work."""
        active = exists().where(Analysis.id == analysis_id, Analysis.status.in_(ACTIVE_STATUSES))
        with self.session() as s:
            done = cast(
                CursorResult[Any],
                s.execute(
                    update(Lease)
                    .where(Lease.analysis_id == analysis_id, Lease.owner == owner, active)
                    .values(expires_at=time.time() + ttl_s)
                    .execution_options(synchronize_session=False)
                ),
            )
            return bool(done.rowcount == 1)

    def release(self, analysis_id: str, owner: str) -> None:
        """`owner` is done with the analysis (whatever the outcome): its lease ends now."""
        with self.session() as s:
            s.execute(
                update(Lease)
                .where(Lease.analysis_id == analysis_id, Lease.owner == owner)
                .values(expires_at=0.0)
                .execution_options(synchronize_session=False)
            )

    def lease_owners(self) -> dict[str, list[str]]:
        """Every leased analysis and the replicas that claimed it, in order (the record of who ran what)."""
        with self.session() as s:
            return {lease.analysis_id: list(lease.owners) for lease in s.scalars(select(Lease))}
