"""One ingress replica's side of the analysis leases (the rows are `db.Lease`).

Several ingress replicas share one store. An in-service analysis runs only on the replica that claimed its
lease (`Store.claim`: exactly one claimer wins). While it runs, the replica renews the lease every
`poll_s`; a lease it can no longer renew (the analysis was cancelled or deleted through another replica,
or the lease expired and was taken over) stops the local work. Every `poll_s` the replica also claims
analyses that no live lease holds: work queued by a replica that died before claiming it, or held by one
that died while running it (after its `ttl_s`). A replica that stops cleanly releases its leases, so
another replica (or its own restart) resumes that work at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from cg_ray.serve.db import Store

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class LeasePolicy:
    ttl_s: float = 15.0  # a dead replica's work is taken over this long after its last renewal
    poll_s: float = 2.0  # renew held leases and look for claimable work this often (well under ttl_s)


def replica_name(prefix: str = "") -> str:
    """Unique per replica process and start: `prefix` (a Serve replica's id), host, pid and a random suffix."""
    name = f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    return f"{prefix[:30]}:{name}" if prefix else name


class LeaseKeeper:
    def __init__(self, store: Store, policy: LeasePolicy | None = None, name: str | None = None) -> None:
        self.store = store
        self.policy = policy or LeasePolicy()
        self.name = name or replica_name()
        self.held: dict[str, asyncio.Task[None]] = {}
        self._won: set[str] = set()  # claimed by the lease loop (in a thread), not started yet

    def start(self, analysis_id: str, work: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
        """Run `work` as a task if this replica wins the analysis' lease; otherwise drop it (None)."""
        won = analysis_id in self._won
        self._won.discard(analysis_id)
        if analysis_id in self.held or not (won or self.store.claim(analysis_id, self.name, self.policy.ttl_s)):
            work.close()
            return None
        task = asyncio.get_running_loop().create_task(self._leased(analysis_id, work))
        self.held[analysis_id] = task
        return task

    async def _leased(self, analysis_id: str, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        finally:
            self.held.pop(analysis_id, None)
            try:
                self.store.release(analysis_id, self.name)
            except Exception:  # the lease then expires by itself
                log.warning("could not release the lease of analysis %s", analysis_id, exc_info=True)

    async def renew(self) -> None:
        """Extend every held lease; stop the work whose lease is lost or whose analysis is no longer active."""
        for analysis_id, task in list(self.held.items()):
            if not await asyncio.to_thread(self.store.renew, analysis_id, self.name, self.policy.ttl_s):
                log.info("analysis %s: lease lost or analysis withdrawn; stopping it here", analysis_id)
                task.cancel()

    async def claim_orphans(self, start: Callable[[str], object]) -> None:
        """Claim every analysis no live lease holds (another replica may win some first) and `start(id)` the
        ones won. The claims run in a thread: a hundred of them must not hold up the event loop."""
        for analysis_id in await asyncio.to_thread(self.store.claimable):
            if analysis_id in self.held:
                continue
            if await asyncio.to_thread(self.store.claim, analysis_id, self.name, self.policy.ttl_s):
                self._won.add(analysis_id)
                start(analysis_id)

    async def keep(self, start: Callable[[str], object]) -> None:
        """The replica's lease loop, until cancelled: claim what is claimable now, then renew and claim every
        `poll_s`. An error (the database briefly unreachable) is logged and the loop goes on."""
        while True:
            try:
                await self.renew()
                await self.claim_orphans(start)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("lease loop of replica %s", self.name, exc_info=True)
            await asyncio.sleep(self.policy.poll_s)

    def stop(self) -> None:
        """Cancel the held work (its leases are released as each task ends)."""
        for task in list(self.held.values()):
            task.cancel()
