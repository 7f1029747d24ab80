"""The process's settings: the HTTP server, storage, live operations and telephony."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr

from config.group import SettingsGroup


class ServerSettings(SettingsGroup):
    """The HTTP service: where it listens, what it accepts, how many calls it carries."""

    host: str = "127.0.0.1"
    port: int = Field(default=7860, ge=1, le=65535)
    public_url: str | None = Field(
        default=None,
        description="Public base URL Twilio reaches (https://…); used for signature "
        "validation and the media stream URL. Unset: derived from the request.",
    )
    log_level: str = "INFO"
    api_rate_limit_per_minute: int = Field(
        default=600, ge=1,
        description="Requests one API key may make per minute (per pod; a burst of a tenth "
        "of it at once).",
    )
    api_auth_failures_per_minute: int = Field(
        default=20, ge=1, le=10_000,
        description="Failed API-key authentications one client address may make per minute "
        "(HTTP and observer sockets, per pod); past it, only keys that address has already "
        "proven are checked, others get 429 / close 1008.",
    )
    api_max_body_bytes: int = Field(default=1 << 20, ge=1024)
    forwarded_allow_ips: str | None = Field(
        default=None,
        description="Reverse proxies (comma-separated addresses or CIDR ranges, or *) whose "
        "X-Forwarded-For/-Proto are trusted, so the failed-auth throttle and the logs see the "
        "real client address. Unset: uvicorn's default, the local host only.",
    )
    transcript_verify_timeout_s: float = Field(
        default=300.0, gt=0, le=3600,
        description="Longest a recording's re-transcription (verify-transcript) may take.",
    )
    max_concurrent_calls: int | None = Field(
        default=None, ge=1,
        description="Calls this machine carries at once, counted across its worker "
        "processes; one more is told the lines are busy. Past its capacity a machine falls "
        "behind real time and callers would hear silence. Unset: what a 2-vCPU machine was "
        "measured to carry with the chosen voices "
        "(pipeline/providers.ProviderPlan.call_capacity, docs/PERFORMANCE.md).",
    )
    workers: int | None = Field(
        default=None, ge=1, le=256,
        description="Worker processes serving calls behind the one port (each runs calls, "
        "webhooks and the API on its own CPU). Unset: one per CPU the process may use "
        "(its container's CPU quota counted). 1: a single process, as before.",
    )
    allow_open_eval_sessions: bool = Field(
        default=False,
        description="Let `pipecat eval` open text sessions on /ws without a call created "
        "by a signed /voice/answer. Development only.",
    )
    shutdown_drain_s: float = Field(
        default=15.0, gt=0, le=120,
        description="On SIGTERM, how long live calls get to finish their turn and hear "
        "that the call must end before the process exits (new calls are turned away "
        "meanwhile, and /health says draining).",
    )
    instance_heartbeat_s: float = Field(
        default=10.0, ge=1, le=300,
        description="How often this process tells the database it is alive, so other pods "
        "leave its calls alone.",
    )
    instance_stale_after_s: float = Field(
        default=60.0, ge=3, le=3600,
        description="A process on another machine whose heartbeat is older than this is "
        "gone: its open calls are closed as server_crash (keep it several heartbeats long).",
    )
    job_worker_enabled: bool = Field(
        default=True,
        description="Run the durable job queue's jobs (dialling, practice-system pushes, "
        "post-call work, reminder sweeps) in this process. False: this process only "
        "queues them, and another process of the same database must run them.",
    )
    call_sweep_interval_s: float = Field(
        default=5.0, ge=0.5, le=600,
        description="How often calls no one will close are looked for: those of a process "
        "that is gone, and answered calls whose media stream never came.",
    )
    never_streamed_after_s: float = Field(
        default=15.0, ge=1, le=600,
        description="An answered call whose media stream has not started this long after "
        "the answer is closed as never_streamed, and its capacity freed.",
    )


class StorageSettings(SettingsGroup):
    """Where calls are kept: the data directory and the database."""

    data_dir: Path = Path(".data")
    database_url: SecretStr | None = Field(
        default=None, description="PostgreSQL with pgvector. Unset: embedded PostgreSQL 16."
    )
    db_write_retries: int = Field(default=5, ge=0)
    db_write_timeout_s: float = Field(default=5.0, gt=0)
    db_request_timeout_s: float = Field(
        default=1.5, gt=0, le=30,
        description="Longest a webhook, the health check, an API request or a caller's turn "
        "waits on the database before answering without it (webhooks must answer within 2 s).",
    )
    db_statement_timeout_s: float = Field(
        default=30.0, gt=0, le=3600,
        description="Longest any one statement may run: the server cancels it (statement_timeout) "
        "and the client stops waiting for it (asyncpg command_timeout), so no background task "
        "waits on a stalled database for ever.",
    )
    db_connect_timeout_s: float = Field(default=5.0, gt=0, le=120)
    db_cleanup_timeout_s: float = Field(
        default=5.0, gt=0, le=120,
        description="How long database work abandoned at its deadline may take to unwind in "
        "the background before it is reported as stuck.",
    )
    db_check_interval_s: float = Field(
        default=1.0, gt=0, le=60,
        description="How often the database supervisor pings the database while it is healthy.",
    )
    db_ping_timeout_s: float = Field(default=1.0, gt=0, le=30)
    db_reconnect_max_backoff_s: float = Field(
        default=30.0, gt=0, le=600,
        description="Longest wait between two reconnection attempts (or embedded restarts) "
        "while the database is down; the wait doubles from the check interval up to it.",
    )
    db_restart_timeout_s: float = Field(
        default=30.0, gt=0, le=300,
        description="Longest one restart of the embedded PostgreSQL may take.",
    )

    @property
    def recordings_dir(self) -> Path:
        return self.data_dir / "recordings"

    @property
    def embedded_db_dir(self) -> Path:
        return self.data_dir / "pg"


class OpsSettings(SettingsGroup):
    """Live operations across pods: the call registry and the sockets that observe calls."""

    redis_url: SecretStr | None = Field(
        default=None,
        description="Redis (or Valkey) shared by several pods: observer events, the active "
        "call registry, operator actions. Unset: in-process (one pod).",
    )
    call_registry_ttl_s: float = Field(
        default=30.0, ge=3, le=600,
        description="An active call drops out of the registry this long after its pod's last "
        "heartbeat (pods beat every third of it).",
    )
    observer_replay_events: int = Field(
        default=200, ge=0, le=5000,
        description="Recent events of a call replayed to an observer that joins late.",
    )
    observer_queue_events: int = Field(
        default=500, ge=10, le=100_000,
        description="Events waiting for one observer; past it the observer is sent a notice "
        "of what it missed (it never slows the call).",
    )
    observer_ping_s: float = Field(default=30.0, gt=0, le=300)
    observer_auth_timeout_s: float = Field(
        default=5.0, gt=0, le=60,
        description="How long an observer socket may take to present its API key.",
    )
    observer_max_per_workspace: int = Field(
        default=50, ge=1, le=10_000,
        description="Observer sockets one workspace may hold open on one pod; past it a new "
        "one is closed with 1013 (try again later) once authenticated.",
    )


class TelephonySettings(SettingsGroup):
    """The phone side: Twilio, Daily rooms, the media stream's limits, the transfer number."""

    twilio_account_sid: str | None = None
    twilio_auth_token: SecretStr | None = None
    twilio_api_base_url: str | None = Field(
        default=None, description="Override Twilio's REST base URL (tests use a local fake)."
    )
    twilio_validate_signature: bool = Field(
        default=True, description="Disabling accepts unsigned webhooks; logs a warning."
    )
    twilio_messaging_service_sid: str | None = Field(
        default=None, pattern=r"^MG[0-9a-fA-F]{32}$",
        description="Texts go through this Messaging Service (it picks the sender). Unset: "
        "from the clinic's number on the call.",
    )
    daily_api_key: SecretStr | None = None
    human_transfer_number: str | None = Field(
        default=None, pattern=r"^\+[1-9][0-9]{6,14}$",
        description="Where a call the safety monitor hands to a human is put through "
        "(E.164). Unset: the call is held for an operator.",
    )
    unknown_number_fallback: str | None = Field(
        default=None, pattern=r"^\+[1-9][0-9]{6,14}$",
        description="A number some clinic owns (E.164): calls to a number no clinic owns "
        "are answered as that clinic. Unset: answered only when the deployment has exactly "
        "one clinic, else the caller hears the number is not in service.",
    )
    start_message_timeout_s: float = Field(default=10.0, gt=0)
    ws_max_message_bytes: int = Field(default=64 * 1024, ge=1024)
    ws_max_bad_messages: int = Field(default=50, ge=1)
