"""A real S3 API server for the fleet tests: moto's server mode on a free port of 127.0.0.1.

Load them in a test module (pytest registers the plugin once per session, whichever module names it first)::

    pytest_plugins = ["fleet_fixtures"]

``moto_server`` (session) is the endpoint URL; ``s3_env`` (per test) points boto3's standard configuration at it
with fake credentials through monkeypatch, so nothing leaks into other tests' environment; ``bucket`` (per test) is
a fresh, empty bucket as a :class:`orinkit.fleet.bucket.Bucket` on ``s3://<unique>/fleet``.
"""

from __future__ import annotations

import functools
import logging
import uuid

import pytest

REGION = "us-east-1"
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}


@pytest.fixture(scope="session")
def moto_server():
    """The endpoint URL (http://127.0.0.1:PORT) of a moto S3 server shared by the session."""
    pytest.importorskip("boto3")
    server_module = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def environment(endpoint: str) -> dict[str, str]:
    """The variables a process (an agent, edge-repo push) needs to reach ``endpoint`` with fake credentials."""
    return {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}


@pytest.fixture
def s3_env(moto_server, monkeypatch, tmp_path_factory) -> dict[str, str]:
    """boto3's standard configuration pointed at the moto server for this test only (monkeypatch restores it)."""
    env = environment(moto_server)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    # No ~/.aws files of whoever runs the tests: their profiles and endpoints must not change what is tested.
    nowhere = tmp_path_factory.getbasetemp() / "no-aws-config"
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = str(nowhere)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def create_bucket(endpoint: str, name: str | None = None) -> str:
    """Make a bucket on ``endpoint`` (explicit fake credentials: works without s3_env) and return its name."""
    name = name or f"fleet-{uuid.uuid4().hex[:16]}"
    _admin(endpoint).create_bucket(Bucket=name)
    return name


@functools.cache
def _admin(endpoint: str):
    import boto3  # a client takes a second to make: one per endpoint for the session

    return boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="testing",
                        aws_secret_access_key="testing")


@pytest.fixture
def bucket(s3_env, moto_server):
    """A fresh, empty bucket on the moto server, as ``Bucket("s3://<name>/fleet")``."""
    from orinkit.fleet.bucket import Bucket

    return Bucket(f"s3://{create_bucket(moto_server)}/fleet", timeout_s=5.0)


@pytest.fixture
def bucket_name(moto_server) -> str:
    """The name of a fresh, empty bucket on the moto server (for a Bucket made another way, or another process)."""
    return create_bucket(moto_server)
