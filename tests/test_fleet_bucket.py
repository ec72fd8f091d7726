"""orinkit.fleet.bucket against a real S3 API (moto's server mode): reads, conditional reads, immutable writes,
listings, streaming, and every failure as a typed fleet error."""

from __future__ import annotations

import hashlib
import socket
import time
from pathlib import Path

import pytest
from conftest import run_python

from orinkit.core.errors import MissingExtraError
from orinkit.fleet.bucket import Bucket
from orinkit.fleet.errors import BucketError, BucketUnreachableError, VersionExistsError
from orinkit.fleet.layout import BucketURL

# moto_server (session), s3_env and bucket (per test): see tests/fleet_fixtures.py.
pytest_plugins = ["fleet_fixtures"]


def test_write_then_read_and_absent_key_is_none(bucket):
    etag = bucket.write("rings/canary.json", b'{"ring": "canary"}')
    assert etag.strip('"')
    assert bucket.read("rings/canary.json") == b'{"ring": "canary"}'
    assert bucket.read("rings/missing.json") is None
    assert bucket.exists("rings/canary.json") and not bucket.exists("rings/missing.json")


def test_keys_are_relative_to_the_url_prefix(bucket, moto_server):
    bucket.write("models/m/1/MANIFEST.json", b"{}")
    other = Bucket(BucketURL(bucket.url.bucket, ""))  # the same bucket from its root
    assert other.read("fleet/models/m/1/MANIFEST.json") == b"{}"
    assert bucket.keys("models/m") == ["models/m/1/MANIFEST.json"]
    assert other.keys("fleet") == ["fleet/models/m/1/MANIFEST.json"]


def test_conditional_read_costs_one_request_and_no_body_when_unchanged(bucket):
    first_etag = bucket.write("rings/prod.json", b"generation 1")
    data, etag = bucket.read_if_changed("rings/prod.json", None)
    assert (data, etag) == (b"generation 1", first_etag)
    before = bucket.requests
    assert bucket.read_if_changed("rings/prod.json", etag) == (None, etag)
    assert bucket.requests - before == 1  # an HTTP 304: the idle agent's whole cost per poll
    bucket.write("rings/prod.json", b"generation 2")
    data, new_etag = bucket.read_if_changed("rings/prod.json", etag)
    assert data == b"generation 2" and new_etag != etag
    assert bucket.read_if_changed("rings/nothing.json", etag) == (None, None)


def test_if_absent_never_overwrites(bucket):
    bucket.write("models/m/1/MANIFEST.json", b"first", if_absent=True)
    with pytest.raises(VersionExistsError) as info:
        bucket.write("models/m/1/MANIFEST.json", b"second", if_absent=True)
    assert "never overwritten" in str(info.value) and info.value.exit_code == 4
    assert bucket.read("models/m/1/MANIFEST.json") == b"first"


def test_if_absent_loses_a_race_to_the_store_conditional_write(bucket, monkeypatch):
    # Another writer puts the key between our HEAD and our PUT: the store's If-None-Match refuses our PUT.
    monkeypatch.setattr(bucket, "exists", lambda key: False)
    bucket.write("models/m/1/MANIFEST.json", b"theirs")
    with pytest.raises(VersionExistsError):
        bucket.write("models/m/1/MANIFEST.json", b"ours", if_absent=True)
    assert bucket.read("models/m/1/MANIFEST.json") == b"theirs"


def test_keys_paginate_and_folders_list_one_level(bucket):
    names = [f"models/m/{v}/version/f{i}" for v in (1, 2, 3) for i in range(5)]
    for name in names:
        bucket.write(name, b"x")
    bucket.write("models/m2/1/MANIFEST.json", b"{}")  # "models/m" must not match "models/m2"
    before = bucket.requests
    assert sorted(bucket.keys("models/m", page_size=4)) == sorted(names)
    assert bucket.requests - before == 4  # 15 keys, 4 a page
    assert sorted(bucket.folders("models")) == ["m", "m2"]
    assert sorted(bucket.folders("models/m")) == ["1", "2", "3"]


def test_files_stream_both_ways(bucket, tmp_path):
    source = tmp_path / "big.bin"
    payload = bytes(range(256)) * 40_000  # 10 MB: above boto3's multipart threshold
    source.write_bytes(payload)
    bucket.upload_file("models/m/1/version/model.onnx", source)
    target = tmp_path / "copy.bin"
    bucket.download_file("models/m/1/version/model.onnx", target)
    assert hashlib.sha256(target.read_bytes()).digest() == hashlib.sha256(payload).digest()
    bucket.delete("models/m/1/version/model.onnx")
    assert not bucket.exists("models/m/1/version/model.onnx")
    with pytest.raises(BucketError, match="not in the bucket"):
        bucket.download_file("models/m/1/version/model.onnx", tmp_path / "gone.bin")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_endpoint_fails_fast_with_a_typed_error(s3_env):
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    down = Bucket("s3://fleet-bucket/p", endpoint_url=endpoint)
    started = time.monotonic()
    with pytest.raises(BucketUnreachableError) as info:
        down.read("rings/canary.json")
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert endpoint in message and "fleet-bucket" in message and "--endpoint-url" in message
    assert info.value.exit_code == 6
    assert isinstance(info.value.__cause__, Exception)  # botocore's error is kept as the cause, never shown raw


def test_missing_bucket_is_named_with_a_fix(s3_env, moto_server):
    missing = Bucket("s3://no-such-bucket-here/p")
    with pytest.raises(BucketError) as info:
        missing.read("rings/canary.json")
    assert "no-such-bucket-here" in str(info.value) and "does not exist" in str(info.value)
    assert "aws s3 mb" in info.value.hint and not isinstance(info.value, BucketUnreachableError)
    with pytest.raises(BucketError, match="does not exist"):
        missing.keys("models")


def test_wrong_credentials_are_told_apart(moto_server, monkeypatch, s3_env):
    # moto checks signatures only with authentication on; the mapping is the same table either way.
    from botocore.exceptions import ClientError

    from orinkit.fleet.bucket import translate

    b = Bucket("s3://any-bucket/p")
    for code, words in (("InvalidAccessKeyId", "access key"), ("SignatureDoesNotMatch", "signature"),
                        ("AccessDenied", "access denied")):
        error = translate(ClientError({"Error": {"Code": code, "Message": "m"}}, "GetObject"), b, "k")
        assert type(error) is BucketError and words in error.message and error.hint
    odd = translate(ClientError({"Error": {"Code": "Weird", "Message": "strange"}}, "GetObject"), b, "k")
    assert "Weird" in odd.message and "strange" in odd.message


def test_no_credentials_is_a_bucket_error(bucket_name, monkeypatch, s3_env):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(BucketError, match="no credentials") as info:
        Bucket(f"s3://{bucket_name}/p").read("x")
    assert "AWS_ACCESS_KEY_ID" in info.value.hint


def test_missing_boto3_names_the_fleet_extra(monkeypatch):
    import orinkit.fleet.bucket as module

    def absent(name):
        raise MissingExtraError(name, hint="run: pip install boto3")

    monkeypatch.setattr(module, "require", absent)
    with pytest.raises(MissingExtraError) as info:
        Bucket("s3://b/p")
    assert "orinkit[fleet]" in info.value.hint and info.value.exit_code == 3


def test_bucket_module_runs_on_python_310(source_tree, moto_server, bucket_name):
    """Device-side code: compiled and used under Python 3.10 against the moto server (boto3 from this venv's
    site-packages, pure Python), when a 3.10 interpreter is here."""
    from test_packaging import _python310

    python = _python310()
    if python is None:
        pytest.skip("no Python 3.10 interpreter here")
    import botocore

    site = str(Path(botocore.__file__).parent.parent)
    code = (
        "import os\n"
        f"os.environ.update(AWS_ACCESS_KEY_ID='t', AWS_SECRET_ACCESS_KEY='t', AWS_DEFAULT_REGION='us-east-1',"
        f" AWS_ENDPOINT_URL={moto_server!r})\n"
        "from orinkit.fleet.bucket import Bucket\n"
        f"b = Bucket('s3://{bucket_name}/p')\n"
        "etag = b.write('k', b'v', if_absent=True)\n"
        "print(b.read_if_changed('k', etag), b.read('k'))\n"
    )
    result = run_python(code, python=python, pythonpath=f"{source_tree}:{site}")
    if "ModuleNotFoundError" in result.stderr and "orinkit" not in result.stderr:
        pytest.skip(f"a dependency of boto3 does not import under 3.10: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0, result.stderr
    assert "(None, '" in result.stdout and "b'v'" in result.stdout


def test_a_web_server_that_is_not_s3_is_not_taken_for_an_empty_bucket(s3_env):
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the handler's protocol
            self.send_response(404)
            self.send_header("Content-Length", "9")
            self.end_headers()
            self.wfile.write(b"not found")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(BucketError, match="no S3 error code") as info:
            Bucket("s3://fleet-bucket/p", endpoint_url=endpoint).read("rings/canary.json")
        assert "--endpoint-url" in info.value.hint
    finally:
        server.shutdown()
        server.server_close()


def test_an_endpoint_that_never_answers_times_out_within_the_bound(s3_env):
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(BucketUnreachableError, match="no answer"):
            Bucket("s3://fleet-bucket/p", endpoint_url=endpoint, timeout_s=0.5, retries=1).read("k")
        assert time.monotonic() - started < 5  # two attempts of 0.5 s, plus standard-mode backoff
