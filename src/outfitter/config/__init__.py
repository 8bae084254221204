"""One typed settings class, read from OUTFITTER_* environment variables (the database URL's own
rules are in `config.database_url`)."""

from __future__ import annotations

import base64
import binascii
import re
from functools import lru_cache
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from outfitter.config.database_url import default_database_url, normalise_database_url

# Settings whose value may hold a password or a secret: an error about them never repeats the value.
SECRET_SETTINGS = frozenset(
    {
        "database_url",
        "redis_url",
        "sandbox_webhook_secret",
        "flutterwave_secret_key",
        "flutterwave_webhook_hash",
        "metrics_token",
        "secret_keys",
    }
)


# Development-only secrets, documented in docs/operations.md (published here, so refused in
# production).
DEVELOPMENT_SANDBOX_SECRET = "whsec_b3V0Zml0dGVyLWVtYmVkZGVkLWRldmVsb3BtZW50LW9ubHk="
DEVELOPMENT_CURSOR_SECRET = "outfitter-cursor-development-key"
MIN_CURSOR_SECRET = 32  # characters of an HMAC key worth the name (openssl rand -hex 32 gives 64)
DEVELOPMENT_SECRET_KEY = "outfitter-secrets-at-rest-development-key"
MIN_SECRET_KEY = 32


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OUTFITTER_", extra="ignore")

    # "embedded" allows the documented development defaults; "production" refuses to start without
    # real secrets, so no deployment runs on a value that is published in this repository.
    environment: Literal["embedded", "production"] = "embedded"

    database_url: str = Field(default_factory=default_database_url)
    public_url: str = "http://127.0.0.1:8000"
    redis_url: str | None = None
    # Per token: a burst up to the first window's amount, a sustained rate up to the second's
    # (docs/api.md, "Rate limits"); tokens of the `scim` scope have a budget of their own.
    rate_limit: str = "100/second;3000/minute"
    scim_rate_limit: str = "300/second;6000/minute"
    # The largest request body; below 1 KiB not even a small create fits.
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    # Connections each server process may hold, and so the requests it runs at once (the worker
    # threads are as many). PostgreSQL's default max_connections is 100: keep
    # server processes x (pool_size + pool_max_overflow), plus CLI commands, below it.
    db_pool_size: int = Field(default=10, ge=1, le=100)
    db_pool_max_overflow: int = Field(default=0, ge=0, le=100)
    # PostgreSQL only: asyncpg connections for the read-only hot paths (db.reads), per process;
    # as many as the requests a process runs at once elsewhere, so that a burst of reads queues in
    # the database (which schedules them) rather than in the pool.
    db_read_pool_size: int = Field(default=10, ge=1, le=100)
    # Seconds a request waits for a free connection before it is answered 503.
    db_pool_timeout: float = Field(default=5.0, gt=0, le=60)

    gateway: Literal["sandbox", "flutterwave"] = "sandbox"
    sandbox_webhooks: Literal["on", "off"] = "on"
    # Secret shared with the sandbox gateway for Standard Webhooks signatures ("whsec_" + base64).
    sandbox_webhook_secret: str | None = None
    flutterwave_base_url: str = "https://api.flutterwave.com/v3"
    flutterwave_secret_key: str | None = None
    flutterwave_webhook_hash: str | None = None

    # Signs the lists' cursors (db.keyset), so that an altered one is refused with a clear
    # 422. A cursor only positions a client within its own company's list, so this guards
    # integrity, not secrecy; production still needs its own (a published key is no signature).
    cursor_secret: str | None = None
    # Seal the secrets kept at rest (console users' TOTP keys: core.sealing), comma-separated:
    # the first seals, every one unseals (a new key goes first while the old one is still listed).
    secret_keys: Annotated[list[str], NoDecode] = []

    transaction_ttl_hours: int = Field(default=24, ge=1)
    idempotency_ttl_hours: int = Field(default=24, ge=1)

    # Outgoing webhooks (docs/webhooks.md). None means "the environment's default": http:// is
    # allowed in the embedded environment (a developer's laptop), refused in production.
    webhook_allow_http: bool | None = None
    # Receivers on loopback, private, link-local or reserved addresses: local development and tests.
    webhook_allow_private: bool = False
    # Seconds after the first attempt at which each attempt is due (the first is normally 0).
    webhook_retry_schedule: Annotated[list[float], NoDecode] = [0, 5, 300, 1800, 7200, 18000, 36000, 36000]
    # The whole of one delivery attempt (resolving, connecting, sending, the answer's head).
    webhook_timeout_seconds: float = Field(default=15.0, gt=0, le=120)
    # How long a worker holds a claimed delivery or job: longer than a send can take, so a live
    # worker never loses its claim, and short enough that a dead worker's work resumes soon. A
    # delivery's lease is never shorter than two webhook timeouts (webhooks.dispatch.lease_seconds).
    worker_lease_seconds: float = Field(default=60.0, gt=0, le=3600)
    # Sends at once per worker (on one event loop: cheap); a company gets half, an endpoint a quarter.
    worker_concurrency: int = Field(default=32, ge=1, le=64)
    worker_poll_seconds: float = Field(default=1.0, gt=0, le=60)
    # How often the worker expires Pending transactions past their time to live, and asks the
    # gateway about Pending card payments.
    worker_expire_interval_seconds: float = Field(default=60.0, gt=0)
    worker_reconcile_interval_seconds: float = Field(default=600.0, gt=0)
    # How often the worker folds the activity log's count deltas (events.counts): the unfolded ones
    # are summed by each unfiltered page of the log, so they are kept few.
    worker_fold_event_counts_interval_seconds: float = Field(default=10.0, gt=0)
    # `outfitter serve` runs one worker in-process unless this is false.
    embedded_worker: bool = True
    # Browser origins allowed to call the API (CORS), separated by commas; none by default.
    cors_origins: Annotated[list[str], NoDecode] = []

    # Operations (docs/operations.md): /metrics is served, and metrics kept, only with a token, which
    # the scraper sends as a bearer token; the directory the processes share their counts in
    # (prometheus-client's multiprocess mode; `serve` makes a temporary one when unset).
    metrics_token: str | None = Field(default=None, min_length=16)
    metrics_dir: str | None = None
    # `json`: one JSON object per log line, and one line per request (core.logs).
    log_format: Literal["text", "json"] = "text"
    # /readyz and `outfitter status` say the worker is behind when a due delivery has waited longer.
    worker_lag_threshold_seconds: float = Field(default=120.0, gt=0)

    @field_validator("database_url")
    @classmethod
    def _normalise_database_url(cls, value: str) -> str:
        return normalise_database_url(value)

    @field_validator("public_url")
    @classmethod
    def _check_public_url(cls, value: str) -> str:
        if not value.lower().startswith(("http://", "https://")) or len(value.split("://", 1)[1]) == 0:
            raise ValueError("expected an http:// or https:// URL")
        return value

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.lower().startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("expected a redis://, rediss:// or unix:// URL")
        # As the client will read it, now rather than at the first request: a bad port stopped
        # every server process after it had bound its socket, an option the client does not take
        # (?foo=bar) made every request a 500, and a database that is no number (which redis-py
        # ignores) would silently be database 0. A connection is made, not opened, to try them.
        # The reason is said, not the part of the URL at fault, which might hold the password;
        # an option is named, never its value.
        from redis import ConnectionPool as RedisConnectionPool  # only when one is set: CLI start-up

        try:
            RedisConnectionPool.from_url(value).make_connection()
            database = urlsplit(value).path.strip("/") if not value.lower().startswith("unix") else ""
        except TypeError as exc:
            unknown = re.search(r"argument '(\w+)'", str(exc))
            raise ValueError(
                f"the Redis client takes no option {unknown.group(1) if unknown else ''!r} after '?'"
            ) from None
        except ValueError as exc:
            unreadable = re.match(r"Invalid value for '(\w+)'", str(exc))
            if unreadable:
                raise ValueError(
                    f"the Redis client cannot read the value of {unreadable.group(1)!r}"
                ) from None
            database = "?"
        if database and not database.isdigit():
            raise ValueError(
                "expected a URL such as redis://host:6379/0: a port from 1 to 65535 if one is given, "
                "and a database number if one is given"
            )
        return value

    @field_validator("rate_limit", "scim_rate_limit")
    @classmethod
    def _check_rate_limit(cls, value: str) -> str:
        from limits import parse_many as parse_rate_limits  # only when one is set: CLI start-up

        if value.strip().lower() != "off":
            try:
                allowed = min(item.amount for item in parse_rate_limits(value))
            except ValueError:
                allowed = 0
            if allowed < 1:  # 0/minute would refuse every request
                raise ValueError(
                    "expected 'off' or numbers (at least 1) of requests per period, separated by ';', "
                    "e.g. 100/second;3000/minute or 120/minute"
                )
        return value

    @field_validator("secret_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("webhook_retry_schedule", mode="before")
    @classmethod
    def _parse_schedule(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                value = [float(part) for part in value.split(",") if part.strip()]
            except ValueError:
                raise ValueError("expected seconds separated by commas, e.g. 0,5,300") from None
        if isinstance(value, list) and (
            not value or any(not isinstance(s, int | float) or s < 0 for s in value) or value != sorted(value)
        ):
            raise ValueError("expected one or more non-negative seconds, in increasing order")
        return value

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _parse_origins(cls, value: object) -> object:
        if isinstance(value, str):
            value = [part.strip().rstrip("/") for part in value.split(",") if part.strip()]
        for origin in value if isinstance(value, list) else []:
            if not isinstance(origin, str) or not re.fullmatch(r"https?://[^/\s]+", origin):
                raise ValueError(
                    "expected origins such as https://app.example.com, separated by commas: "
                    f"{origin!r} is not one"
                )
        return value

    @field_validator("sandbox_webhook_secret")
    @classmethod
    def _standard_webhooks_secret(cls, value: str | None) -> str | None:
        """`whsec_` and 24 to 64 bytes in base64, as the Standard Webhooks specification has them:
        a copied half or a password would sign every notice with a guessable key."""
        if value is None:
            return None
        try:
            key = base64.b64decode(value.removeprefix("whsec_"), validate=True)
        except binascii.Error:
            key = b""
        if not value.startswith("whsec_") or not 24 <= len(key) <= 64:
            raise ValueError(
                "expected a Standard Webhooks secret: whsec_ then 24 to 64 random bytes in base64 "
                "(echo whsec_$(openssl rand -base64 32) makes one)"
            )
        return value

    @model_validator(mode="after")
    def _production_needs_secrets(self) -> Settings:
        if self.environment != "production":
            if self.sandbox_webhook_secret is None:
                self.sandbox_webhook_secret = DEVELOPMENT_SANDBOX_SECRET
            if self.cursor_secret is None:
                self.cursor_secret = DEVELOPMENT_CURSOR_SECRET
            if not self.secret_keys:
                self.secret_keys = [DEVELOPMENT_SECRET_KEY]
            return self
        missing, weak = [], []
        if self.database_url.startswith("sqlite"):
            missing.append("OUTFITTER_DATABASE_URL (a postgresql:// URL)")
        if not self.cursor_secret:
            missing.append("OUTFITTER_CURSOR_SECRET")
        elif len(self.cursor_secret) < MIN_CURSOR_SECRET or self.cursor_secret == DEVELOPMENT_CURSOR_SECRET:
            weak.append(
                f"OUTFITTER_CURSOR_SECRET (at least {MIN_CURSOR_SECRET} characters, not the published "
                "development key: openssl rand -hex 32 makes one)"
            )
        if not self.secret_keys:
            missing.append("OUTFITTER_SECRET_KEYS")
        elif any(len(key) < MIN_SECRET_KEY or key == DEVELOPMENT_SECRET_KEY for key in self.secret_keys):
            weak.append(
                f"OUTFITTER_SECRET_KEYS (each at least {MIN_SECRET_KEY} characters, not the published "
                "development key: openssl rand -hex 32 makes one)"
            )
        refused = []
        if self.gateway == "sandbox":  # the default: production must name its real gateway
            refused.append(
                "OUTFITTER_GATEWAY=sandbox (the sandbox takes no money and its checkout page lets "
                "anyone mark a payment paid: set OUTFITTER_GATEWAY=flutterwave and its secrets)"
            )
        elif not (self.flutterwave_secret_key and self.flutterwave_webhook_hash):
            missing.append("OUTFITTER_FLUTTERWAVE_SECRET_KEY and OUTFITTER_FLUTTERWAVE_WEBHOOK_HASH")
        problems = [
            f"{what}: {', '.join(names)}"
            for what, names in (("missing", missing), ("too weak", weak), ("not allowed", refused))
            if names
        ]
        if problems:
            raise ValueError("production configuration is " + "; ".join(problems))
        return self

    @property
    def sandbox_gateway_served(self) -> bool:
        """Whether the sandbox gateway (its checkout pages and its webhook) is served: never in
        production, which refuses it as its gateway too."""
        return self.environment != "production"

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def webhooks_allow_http(self) -> bool:
        if self.webhook_allow_http is not None:
            return self.webhook_allow_http
        return self.environment == "embedded"


@lru_cache
def get_settings() -> Settings:
    return Settings()


# What each kind of pydantic error means for a value read from the environment.
_ACCEPTED = {
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_parsing": "expected a number",
    "bool_parsing": "expected true or false",
    "greater_than": "expected a number greater than {gt:g}",
    "greater_than_equal": "expected a number of at least {ge:g}",
    "less_than": "expected a number less than {lt:g}",
    "less_than_equal": "expected a number of at most {le:g}",
    "string_too_short": "expected at least {min_length} characters",
}


def setting_errors(exc: ValidationError) -> list[str]:
    """One line per bad setting: `OUTFITTER_NAME: what is accepted; got 'value'` (never the value of a
    setting that may hold a secret)."""
    lines = []
    for error in exc.errors():
        name = "_".join(str(part) for part in error.get("loc", ()))
        message = _accepted(error, name)
        lines.append(f"OUTFITTER_{name.upper()}: {message}" if name else message)
    return lines


def _accepted(error: Any, name: str) -> str:
    kind = str(error.get("type", ""))
    if kind in _ACCEPTED:
        message = _ACCEPTED[kind].format(**error.get("ctx", {}))
    elif kind == "literal_error":
        message = "expected " + str(error.get("ctx", {}).get("expected", "one of the documented values"))
    else:
        message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    given = error.get("input")
    if name and name not in SECRET_SETTINGS and isinstance(given, str):
        message += f"; got {given!r}"
    return message
