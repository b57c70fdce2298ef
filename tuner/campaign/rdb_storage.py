"""An Optuna storage opened from its URL: Optuna's RDB storage (the one with heartbeats), on SQLite or a
server, and the URL as it may be shown (without its secrets). Which storage holds which campaign's study, and
where a results folder keeps them: tuner/campaign/study_storages.py."""

from __future__ import annotations

import re
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import optuna
import sqlalchemy

from tuner.errors import TunerError

HEARTBEAT_S = 10  # how often a measuring worker says it is alive
GRACE_S = 60  # silence after which its trial is retried by another worker (longer than any compile stall)
MAX_RETRY = 3
CREATE_TRIES = 5


def sqlite_path(url: str) -> str:
    """The file of a sqlite:/// URL (":memory:" for sqlite://)."""
    return url.split(":///", 1)[1] if ":///" in url else ":memory:"


def open_storage(url: str, heartbeat_s: int | None = None, grace_s: int | None = None) -> optuna.storages.RDBStorage:
    """Optuna's RDB storage (the one with heartbeats); stale trials are failed and enqueued again."""
    if not url.startswith(("sqlite:", "postgresql", "mysql")):
        raise TunerError(
            f"storage '{redact(url)}': give a database URL (sqlite:///path on one host, "
            "postgresql://user@host/db or mysql+pymysql://user@host/db across hosts); Optuna's heartbeat, which "
            "retries the trial of a dead worker, exists only in its RDB storage"
        )
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # its INFO line per study and trial drowns the campaign's own
    sqlite = url.startswith("sqlite")
    if not sqlite:
        _check_readable(url)
    engine_kwargs = {"creator": _sqlite_connector(url)} if sqlite else {"pool_pre_ping": True}
    for attempt in range(CREATE_TRIES):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                storage = (_SQLiteStorage if sqlite else optuna.storages.RDBStorage)(
                    url, engine_kwargs=engine_kwargs, **_heartbeat_options(heartbeat_s, grace_s)
                )
            break
        except ImportError as e:
            raise TunerError(f"storage '{redact(url)}' {missing_driver(url, e)}") from None
        except Exception as e:  # noqa: BLE001  (sqlalchemy's errors: no server, wrong password, no such database)
            if _creation_race(e) and attempt + 1 < CREATE_TRIES:
                time.sleep(0.1 * (attempt + 1))
                continue
            raise TunerError(f"cannot open storage '{redact(url)}': {scrub(str(e).splitlines()[0], url)}") from None
    if sqlite:
        # Optuna pops a queued trial by reading its state and then updating it. PostgreSQL locks the row
        # (SELECT ... FOR UPDATE); SQLite ignores that, so two workers could both pop the same trial,
        # unless every transaction that may write takes the write lock at its start. Reads of trials do
        # not: in WAL mode they run beside the writer instead of queueing for its lock.
        sqlalchemy.event.listen(
            storage.engine,
            "begin",
            lambda conn: conn.exec_driver_sql("BEGIN" if getattr(_reading, "on", False) else "BEGIN IMMEDIATE"),
        )
    return storage


def _check_readable(url: str) -> None:
    """A server's URL as SQLAlchemy reads it: it ends the user part at the first '@' and the host at a ':', so a
    password holding '@' or ':' as written is read as part of the host or port, and the error that follows (no such
    host, a port that is no number) quotes that part of the password."""
    try:
        host = sqlalchemy.engine.make_url(url).host
    except (ValueError, sqlalchemy.exc.ArgumentError):
        host = "@"
    if host is not None and "@" in host:
        raise TunerError(
            f"cannot read storage URL '{redact(url)}' as dialect://user:password@host[:port]/database: "
            "percent-encode a password holding '@', ':' or '/' (%40, %3A, %2F)"
        )


# the Python package of each SQLAlchemy driver of the databases Optuna's RDB storage supports, where the two differ
# in name; the extra installs psycopg, the default driver of postgresql:// URLs
DRIVER_PACKAGES = {
    "psycopg": "'gpu-tuner[distributed]'",
    "psycopg2": "psycopg2-binary",
    "mysqldb": "mysqlclient",
    "mysqlconnector": "mysql-connector-python",
}


def missing_driver(url: str, e: ImportError) -> str:
    """What to install for a storage URL whose database driver is missing (the rest of a line after the URL):
    the package of the driver the URL asks for, which SQLAlchemy's import error names (Optuna wraps it)."""
    cause = e.__cause__ if isinstance(e.__cause__, ImportError) else e
    module = cause.name or str(cause)
    try:
        driver = sqlalchemy.engine.make_url(url).get_driver_name()
    except Exception:  # noqa: BLE001  (a URL SQLAlchemy cannot parse, or whose dialect it lacks)
        driver = ""
    if url.startswith("mysql") and driver in ("mysqldb", ""):  # mysql:// asks for mysqlclient, which needs C headers
        return (
            f"needs a MySQL driver (no module {module}): pip install pymysql, and give the URL as "
            "mysql+pymysql://user:password@host/db; or PostgreSQL, the server campaigns are tested on: "
            "pip install 'gpu-tuner[distributed]', postgresql://user:password@host/db"
        )
    return (
        f"needs its database driver (no module {module}): pip install {DRIVER_PACKAGES.get(driver, driver or module)}"
    )


def _creation_race(e: Exception) -> bool:
    """Two processes that create one new database both write its tables and schema version: the loser
    finds them there (or the file locked), and opens the database the winner made when it tries again."""
    text = str(e)
    return isinstance(e, sqlalchemy.exc.IntegrityError) or (
        isinstance(e, sqlalchemy.exc.OperationalError) and ("already exists" in text or "database is locked" in text)
    )


_reading = threading.local()  # set while a _SQLiteStorage method that only reads runs (per thread: heartbeats)


class _SQLiteStorage(optuna.storages.RDBStorage):
    """Optuna's RDB storage whose pure reads of trials open plain (deferred) SQLite transactions."""

    def _get_trials(self, *args: Any, **kwargs: Any) -> Any:
        return self._read(super()._get_trials, *args, **kwargs)

    def get_trial(self, *args: Any, **kwargs: Any) -> Any:
        return self._read(super().get_trial, *args, **kwargs)

    @staticmethod
    def _read(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        _reading.on = True
        try:
            return method(*args, **kwargs)
        finally:
            _reading.on = False


def _heartbeat_options(heartbeat_s: int | None, grace_s: int | None) -> dict:
    if not heartbeat_s:
        return {}
    if hasattr(optuna.storages, "RetryHeartbeatStaleTrialCallback"):  # Optuna >= 4.9 names it so
        retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY)
        return {"heartbeat_interval": heartbeat_s, "grace_period": grace_s, "heartbeat_stale_trial_callback": retry}
    retry = optuna.storages.RetryFailedTrialCallback(max_retry=MAX_RETRY)
    return {"heartbeat_interval": heartbeat_s, "grace_period": grace_s, "failed_trial_callback": retry}


def _sqlite_connector(url: str) -> Callable[[], sqlite3.Connection]:
    """SQLite in WAL mode (cheap commits, readers beside the writer), with transactions that the
    engine's 'begin' hook starts IMMEDIATE (see open_storage)."""
    path = sqlite_path(url)

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=120, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    return connect


# query parameters that carry a secret (libpq's and SQLAlchemy drivers' spellings)
SECRET_PARAMS = ("password", "passwd", "pwd", "sslpassword", "secret", "token", "api_key", "apikey")
_SECRET_QUERY = re.compile(r"(?i)([?&;](?:" + "|".join(SECRET_PARAMS) + r")=)[^&;#]*")


def redact(url: str) -> str:
    """A storage URL without its secrets, for printing and logging: the password of its user part (up to
    the last '@', so that a password holding '@' or ':' is hidden whole; more is hidden rather than less)
    and every password-like query parameter (`?user=alice&password=...`). The one place this is done."""
    url = str(url)
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        userinfo, host = rest.rsplit("@", 1)
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}:***@{host}" if colon else f"{userinfo}@{host}"
    return _SECRET_QUERY.sub(r"\1***", f"{scheme}{sep}{rest}")


def scrub(text: str, url: str) -> str:
    """`text` (a driver's error, a log line) with every secret of `url` in it replaced by ***, and the URL
    itself by its redacted form."""
    text = str(text).replace(url, redact(url))
    scheme, sep, rest = url.partition("://")
    secrets = [m.group(0).split("=", 1)[1] for m in _SECRET_QUERY.finditer(url)]
    if sep and "@" in rest:
        password = rest.rsplit("@", 1)[0].partition(":")[2]
        secrets.append(password)
        # a driver that splits at the first '@' reads the rest of such a password as part of the host
        for i in range(1, password.count("@") + 1):
            tail = password.split("@", i)[-1]
            text = text.replace(f"'{tail}@", "'***@").replace(f" {tail}@", " ***@")
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
