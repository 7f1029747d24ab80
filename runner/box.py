"""The machine's part of the service: what is done once per machine before its worker
processes start, and where one worker process stands among them.

With several worker processes (`WORKERS`) the supervisor (`api/workers.py`) does the
once-per-machine work first: it starts (and holds) the embedded PostgreSQL when there is
no `DATABASE_URL`, applies the migrations, creates the demo workspace on an empty
embedded database, keeps the development API key and webhook token, and sizes each
worker's connection pool to the server's `max_connections`. Each worker then joins
that database and starts its runtime without doing any of it again. A single process
(`WORKERS=1`) does the same work itself at its start, as it always has.
"""

from __future__ import annotations

from dataclasses import dataclass

from loguru import logger

from config import Settings
from db import repositories as repo
from db.embedded import EmbeddedPostgres
from db.migrations import apply_migrations
from db.pool import POOL_SIZE, Database, pool_size_per_process
from db.seed import fill_demo_clinic, is_empty, seed_demo
from lib.shared_slots import SharedSlots
from lib.worker_processes import available_cpus
from runner import dev_credentials


@dataclass(frozen=True)
class WorkerPlace:
    """One worker process's place on its machine (the default: the only process)."""

    index: int = 0
    count: int = 1
    # The machine's shared line counts (None: this process makes its own).
    slots: SharedSlots | None = None
    prepared: bool = False  # the once-per-machine work is already done
    db_pool_size: int = POOL_SIZE

    @property
    def alone(self) -> bool:
        return self.count == 1

    def label(self) -> str:
        return f"worker {self.index + 1}/{self.count}"


def worker_count(settings: Settings) -> int:
    """How many worker processes serve the machine: `WORKERS`, else one per CPU this
    process may use (a container's CPU quota counted)."""
    return settings.server.workers or available_cpus()


async def prepare_database(db: Database) -> None:
    """Migrations, and on an embedded database the demo workspace when it is empty (its
    clinic filled in when an older start left it without locations)."""
    applied = await apply_migrations(db.pool)
    if applied:
        logger.info(f"database migrations applied: {applied}")
    if db.embedded and await is_empty(db.pool):
        await seed_demo(db.pool)
        logger.info("empty embedded database: demo workspace created")
    elif db.embedded and await fill_demo_clinic(db.pool):
        logger.info("demo clinic: locations, practitioners and bookings added")


async def ensure_dev_api_key(settings: Settings, db: Database) -> None:
    """Embedded development database: keep a working API key for the simulator."""
    existing = dev_credentials.read_dev_api_key(settings)
    if existing and await repo.verify_api_key(db.pool, existing):
        return
    workspace = await repo.get_workspace_by_name(db.pool, "demo")
    if workspace is None:
        return
    key = await repo.create_api_key(db.pool, workspace["id"], "development (simulator)",
                                    role="admin")
    dev_credentials.write_dev_api_key(settings, key)
    logger.info(f"development API key written to {dev_credentials.dev_api_key_path(settings)}")


def ensure_dev_webhook_token(settings: Settings) -> None:
    """Say how webhooks are checked; without TWILIO_AUTH_TOKEN, create the local
    development token now, for the simulator."""
    if not settings.telephony.twilio_validate_signature:
        logger.warning("TWILIO_VALIDATE_SIGNATURE=false: webhooks are NOT authenticated")
    elif dev_credentials.uses_dev_twilio_token(settings):
        dev_credentials.twilio_auth_token(settings)
        logger.info("TWILIO_AUTH_TOKEN not set: webhooks use the local development token")


@dataclass
class PreparedMachine:
    """The database the workers join, held by the supervisor while they run."""

    embedded: EmbeddedPostgres | None
    db_pool_size: int

    async def release(self) -> None:
        """Let go of the embedded server (it stops once no worker holds it either)."""
        if self.embedded is not None:
            await self.embedded.stop()


async def prepare_machine(settings: Settings, workers: int) -> PreparedMachine:
    """The once-per-machine work before `workers` worker processes start (see above)."""
    embedded = None
    if settings.storage.database_url is None:
        embedded = EmbeddedPostgres(settings.storage.embedded_db_dir)
        await embedded.start()  # held until the supervisor exits
    try:
        db = await Database.connect(settings, max_size=2)
        try:
            await prepare_database(db)
            if db.embedded:
                await ensure_dev_api_key(settings, db)
            max_connections = int(await db.pool.fetchval("SHOW max_connections"))
        finally:
            await db.close()
        ensure_dev_webhook_token(settings)
    except BaseException:
        if embedded is not None:
            await embedded.stop()
        raise
    size = pool_size_per_process(max_connections, workers)
    if size < POOL_SIZE:
        logger.warning(f"{workers} worker processes share the database's {max_connections} "
                       f"connections: {size} pooled connections each")
    return PreparedMachine(embedded, size)
