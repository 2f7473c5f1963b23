"""A real PostgreSQL server for the session: ``initdb`` and ``pg_ctl start`` on a temporary folder and a free
loopback port, stopped at the end. ``initdb`` refuses to run as root, so as root the server runs as the
``postgres`` user (``runuser``) in a folder that user owns. Tests that take ``postgres_dsn`` are skipped, with the
reason, only where no server binary exists or the ADBC driver is not installed (the ``postgres`` extra)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Where Debian keeps the server binaries when they are not on PATH.
_DEBIAN = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
USER, PASSWORD = "privrelease", "s3cret-pw"


def _binary(name: str) -> str | None:
    """The path of server binary ``name``: on PATH, else in Debian's newest ``/usr/lib/postgresql/*/bin``."""
    found = shutil.which(name)
    return found or next((str(b / name) for b in _DEBIAN if (b / name).exists()), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URI of the session's server, as ``USER`` (a superuser with password ``PASSWORD``), database
    ``privrelease``."""
    pytest.importorskip("adbc_driver_postgresql", reason="the postgres extra (adbc-driver-postgresql) is missing")
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("no PostgreSQL server binary (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin")
    root = os.geteuid() == 0
    run_as = ["runuser", "-u", "postgres", "--"] if root else []
    folder = Path(tempfile.mkdtemp(prefix="privrelease-pg-"))
    (folder / "pw").write_text(PASSWORD)
    if root:
        shutil.chown(folder, "postgres")
        shutil.chown(folder / "pw", "postgres")
    data, port = folder / "data", _free_port()
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
    try:
        subprocess.run([*run_as, initdb, "-D", str(data), "-U", USER, f"--pwfile={folder / 'pw'}", "-E", "UTF8",
                        "--no-locale", "--auth-local=trust", "--auth-host=scram-sha-256"],
                       check=True, capture_output=True)
        subprocess.run([*run_as, pg_ctl, "start", "-D", str(data), "-w", "-l", str(folder / "log"), "-o", options],
                       check=True, capture_output=True)
        from adbc_driver_postgresql import dbapi

        with dbapi.connect(f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}/postgres", autocommit=True) as con, \
                con.cursor() as cur:
            cur.execute("CREATE DATABASE privrelease")
        yield f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}/privrelease"
    finally:
        subprocess.run([*run_as, pg_ctl, "stop", "-D", str(data), "-m", "immediate"], check=False,
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_schema(postgres_server: str) -> Iterator[str]:
    """A fresh schema of the session's database for one test (dropped after it), e.g. ``t_1a2b3c4d``."""
    from adbc_driver_postgresql import dbapi

    schema = f"t_{uuid.uuid4().hex[:8]}"
    with dbapi.connect(postgres_server, autocommit=True) as con, con.cursor() as cur:
        cur.execute(f"CREATE SCHEMA {schema}")
    yield schema
    with dbapi.connect(postgres_server, autocommit=True) as con, con.cursor() as cur:
        cur.execute(f"DROP SCHEMA {schema} CASCADE")
