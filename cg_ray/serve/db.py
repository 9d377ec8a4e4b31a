"""Upload / analysis / API-key metadata in a SQL database (SQLite by default, any SQLAlchemy URL).

Artifacts live on the filesystem; the database holds only small metadata rows, so restarting the
service loses nothing. Every query is scoped by the owning key: a key never sees another key's rows.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Integer, String, Text, create_engine, event, select
from sqlalchemy.engine import Engine
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


ACTIVE_STATUSES = ("queued", "running")
DELETED = "deleted"  # a deleted analysis keeps its row (marked), answers 404 and is never listed


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

        Base.metadata.create_all(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self._sessions() as session, session.begin():
            yield session

    def get_owned(self, model: type[Upload] | type[Analysis], owner: str, item_id: str) -> Any:
        """The row if it exists AND belongs to `owner`; None otherwise (callers answer 404 either way)."""
        query = select(model).where(model.id == item_id, model.owner == owner)
        if model is Analysis:
            query = query.where(Analysis.status != DELETED)
        with self.session() as s:
            return s.scalar(query)

    def get_owned_any(self, model: type[Upload] | type[Analysis], item_id: str) -> Any:
        """Internal lookups by id only (background work); never used to answer a request."""
        with self.session() as s:
            return s.get(model, item_id)

    def list_owned(self, model: type[Upload] | type[Analysis], owner: str) -> list[Any]:
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
