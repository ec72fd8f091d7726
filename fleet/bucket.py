"""The only module that talks to S3: a small typed client over boto3 for one ``s3://bucket/prefix``.

Every key given to :class:`Bucket` is relative to the URL's prefix. boto3 is imported when a Bucket is made (it is
the ``orinkit[fleet]`` extra), and finds its endpoint (``AWS_ENDPOINT_URL``) and credentials the standard way, so the
same code runs against AWS, MinIO or moto. Every botocore exception is turned into a fleet error through one table
(:data:`_ERRORS`): a command shows one line with a fix, never a botocore traceback. Runs on the device (Python 3.10).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from orinkit.core.errors import MissingExtraError
from orinkit.core.optional import require
from orinkit.fleet.errors import BucketError, BucketUnreachableError, StaleWriteError, VersionExistsError
from orinkit.fleet.layout import BucketURL

FLEET_HINT = "run: pip install 'orinkit[fleet]'"
# A HEAD (exists, and boto3's download before its GET) has no body: a missing key is a bare 404 there.
_ABSENT = ("NoSuchKey", "404")
_UNREACHABLE_HINT = ("check the network and the endpoint (--endpoint-url, or AWS_ENDPOINT_URL for MinIO and other "
                     "S3 stores); the agent retries by itself")
_CREDENTIALS_HINT = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile / instance role) for this "
                     "store")

# One table from what botocore raises to what orinkit says: (error class, message, hint). Keys are S3 error codes
# (ClientError) or botocore exception class names (matched along the exception's MRO, so subclasses map too).
# {bucket}, {endpoint} and {key} are filled in.
_ERRORS: dict[str, tuple[type[BucketError], str, str]] = {
    "NoSuchBucket": (BucketError, "the bucket '{bucket}' does not exist at {endpoint}",
                     "check the URL and --endpoint-url, or create it (aws s3 mb s3://{bucket})"),
    "AccessDenied": (BucketError, "access denied to s3://{bucket}/{key} at {endpoint}",
                     "give these credentials s3:GetObject, s3:PutObject and s3:ListBucket on the bucket (without "
                     "s3:ListBucket a missing key is answered with AccessDenied too)"),
    "403": (BucketError, "access denied to s3://{bucket}/{key} at {endpoint}",
            "give these credentials s3:GetObject and s3:ListBucket on the bucket, and check the clock"),
    "InvalidAccessKeyId": (BucketError, "the store at {endpoint} does not know this access key",
                           "check AWS_ACCESS_KEY_ID (or the profile) and that --endpoint-url names the right store"),
    "SignatureDoesNotMatch": (BucketError, "the store at {endpoint} rejected the request signature",
                              "check AWS_SECRET_ACCESS_KEY, the region (AWS_DEFAULT_REGION) and the device's clock"),
    "RequestTimeTooSkewed": (BucketError, "the device's clock is too far from the store's at {endpoint}",
                             "set the time (timedatectl set-ntp true)"),
    "404": (BucketError, "{endpoint} answered 404 Not Found for s3://{bucket}/{key}, with no S3 error code",
            "is --endpoint-url (or AWS_ENDPOINT_URL) an S3 store? A web server or proxy there answers like this"),
    "InvalidBucketName": (BucketError, "'{bucket}' is not a valid bucket name", "use 3-63 lowercase letters, "
                          "digits, dots and hyphens"),
    # Busy or failing stores: worth retrying later, like an endpoint that does not answer.
    "SlowDown": (BucketUnreachableError, "the store at {endpoint} is throttling requests", _UNREACHABLE_HINT),
    "ServiceUnavailable": (BucketUnreachableError, "the store at {endpoint} is unavailable", _UNREACHABLE_HINT),
    "InternalError": (BucketUnreachableError, "the store at {endpoint} failed internally", _UNREACHABLE_HINT),
    "NoCredentialsError": (BucketError, "no credentials for s3://{bucket}", _CREDENTIALS_HINT),
    "PartialCredentialsError": (BucketError, "incomplete credentials for s3://{bucket}", _CREDENTIALS_HINT),
    # Connection refused, DNS failure, connect or read timeout, connection reset: the endpoint does not answer.
    "ConnectionError": (BucketUnreachableError, "no answer from {endpoint} for s3://{bucket}", _UNREACHABLE_HINT),
    "HTTPClientError": (BucketUnreachableError, "no answer from {endpoint} for s3://{bucket}", _UNREACHABLE_HINT),
}


def _boto3():
    try:
        return require("boto3")
    except MissingExtraError as exc:
        raise MissingExtraError("boto3", hint=FLEET_HINT) from exc


class _Counter:
    """Counts HTTP requests as they are sent (retries included): the idle cost of an agent is measured in these."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, **_kwargs) -> None:
        self.count += 1  # must return None: a value returned from before-send replaces the HTTP response


class Bucket:
    """One ``s3://bucket/prefix``. ``timeout_s`` bounds the connect and the read timeouts, ``retries`` the retries
    after the first attempt, so a device with the store down fails within seconds and its agent retries itself."""

    def __init__(self, url: str | BucketURL, *, endpoint_url: str | None = None, client=None,
                 timeout_s: float = 10.0, retries: int = 2) -> None:
        self.url = url if isinstance(url, BucketURL) else BucketURL.parse(url)
        if client is None:
            client = _client(endpoint_url, timeout_s, retries)
        self._client = client
        self._counter = _Counter()
        client.meta.events.register("before-send.s3", self._counter)

    @property
    def requests(self) -> int:
        return self._counter.count

    @property
    def endpoint(self) -> str:
        return self._client.meta.endpoint_url

    def __repr__(self) -> str:
        return f"Bucket({str(self.url)!r}, endpoint={self.endpoint!r})"

    # -- reading -------------------------------------------------------------------------------------------------

    def read(self, key: str) -> bytes | None:
        """The object's bytes, or None when there is no such key."""
        return self.read_if_changed(key, None)[0]

    def read_if_changed(self, key: str, etag: str | None) -> tuple[bytes | None, str | None]:
        """A conditional GET: ``(bytes, etag)`` when changed since ``etag``, ``(None, etag)`` when not (an HTTP
        304: one request, no body), ``(None, None)`` when the key is absent."""
        extra = {"IfNoneMatch": etag} if etag else {}
        # Only S3's own NoSuchKey means absent here: a bare 404 comes from something that is not an S3 store.
        with self._mapped(key, absent=("NoSuchKey",), unchanged=("304", "NotModified")) as outcome:
            answer = self._client.get_object(Bucket=self.url.bucket, Key=self.url.key(key), **extra)
            return answer["Body"].read(), answer["ETag"]
        return None, (etag if outcome.answer == "unchanged" else None)

    def exists(self, key: str) -> bool:
        # A HEAD answers 404 for a missing key and a missing bucket alike (no body to tell them apart): a missing
        # bucket shows up at the first read, write or listing instead.
        with self._mapped(key, absent=_ABSENT):
            self._client.head_object(Bucket=self.url.bucket, Key=self.url.key(key))
            return True
        return False

    def keys(self, prefix: str = "", *, page_size: int = 1000) -> list[str]:
        """Every key under the folder ``prefix`` ("models/m" lists models/m/..., never models/m2/...), relative to
        the URL's prefix so that each can be given to :meth:`read`. Paginated (``page_size`` keys per request)."""
        folder = self._folder(prefix)
        paginator = self._client.get_paginator("list_objects_v2")
        found = []
        with self._mapped(prefix):
            for page in paginator.paginate(Bucket=self.url.bucket, Prefix=folder,
                                           PaginationConfig={"PageSize": page_size}):
                found += [self._relative(item["Key"]) for item in page.get("Contents", ())]
        return found

    def folders(self, prefix: str = "") -> list[str]:
        """The names of the sub-folders directly under ``prefix`` (e.g. ``folders("models")`` → model names)."""
        folder = self._folder(prefix)
        paginator = self._client.get_paginator("list_objects_v2")
        names = []
        with self._mapped(prefix):
            for page in paginator.paginate(Bucket=self.url.bucket, Prefix=folder, Delimiter="/"):
                names += [p["Prefix"][len(folder):].rstrip("/") for p in page.get("CommonPrefixes", ())]
        return names

    def download_file(self, key: str, path: Path) -> None:
        """Stream the object to ``path`` (boto3 writes a temporary file beside it and renames it into place)."""
        with self._mapped(key, absent=_ABSENT) as outcome:
            self._client.download_file(self.url.bucket, self.url.key(key), str(path))
        if outcome.answer == "absent":
            raise BucketError(f"{self.url}/{key} is not in the bucket",
                              hint="it was deleted after its manifest was read; push the version again")

    # -- writing -------------------------------------------------------------------------------------------------

    def write(self, key: str, data: bytes, *, if_absent: bool = False, if_match: str | None = None) -> str:
        """Put ``data`` at ``key`` and return its ETag. ``if_absent``: never overwrite; VersionExistsError when the
        key is there. ``if_match``: replace only the object with this ETag (compare-and-swap; StaleWriteError when
        another writer replaced it first; a store without conditional writes ignores it and the last writer wins)."""
        if if_match is not None:
            with self._mapped(key, stale=("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey")) as outcome:
                return self._client.put_object(Bucket=self.url.bucket, Key=self.url.key(key), Body=data,
                                               IfMatch=if_match)["ETag"]
            raise StaleWriteError(f"{self.url}/{key} was replaced by another writer since it was read",
                                  hint="read it again and redo the change")
        if not if_absent:
            with self._mapped(key):
                return self._client.put_object(Bucket=self.url.bucket, Key=self.url.key(key), Body=data)["ETag"]
        # HEAD first: some S3-compatible stores ignore If-None-Match on a PUT and would overwrite silently. Then a
        # conditional PUT (IfNoneMatch="*": AWS since 2024, recent MinIO, moto) closes the race between two writers
        # where the store honours it. Where it does not, two writers passing the HEAD at the same moment both
        # succeed and the later object wins: the race that remains on such stores.
        if self.exists(key):
            raise self._exists(key)
        with self._mapped(key, present=("PreconditionFailed", "ConditionalRequestConflict"),
                          unsupported=("NotImplemented",)) as outcome:
            return self._client.put_object(Bucket=self.url.bucket, Key=self.url.key(key), Body=data,
                                           IfNoneMatch="*")["ETag"]
        if outcome.answer == "present":  # another writer got there between the HEAD and this PUT
            raise self._exists(key)
        with self._mapped(key):  # the store refuses conditional writes: the HEAD above is all the check there is
            return self._client.put_object(Bucket=self.url.bucket, Key=self.url.key(key), Body=data)["ETag"]

    def upload_file(self, key: str, path: Path) -> None:
        """Stream a local file to ``key`` (multipart above boto3's threshold; never read whole into memory)."""
        with open(path, "rb") as stream:
            self.upload_fileobj(key, stream)

    def upload_fileobj(self, key: str, stream: BinaryIO) -> None:
        """Stream a readable binary object to ``key``; a non-seekable one is read strictly in order, once."""
        with self._mapped(key):
            self._client.upload_fileobj(stream, self.url.bucket, self.url.key(key))

    def delete(self, key: str) -> None:
        with self._mapped(key):
            self._client.delete_object(Bucket=self.url.bucket, Key=self.url.key(key))

    # -- helpers -------------------------------------------------------------------------------------------------

    def _folder(self, prefix: str) -> str:
        folder = self.url.key(prefix.strip("/"))
        return f"{folder}/" if folder else ""

    def _relative(self, full_key: str) -> str:
        return full_key[len(self.url.prefix) + 1:] if self.url.prefix else full_key

    def _exists(self, key: str) -> VersionExistsError:
        return VersionExistsError(f"{self.url}/{key} already exists and is never overwritten",
                                  hint="write under a new name (a new version number)")

    def _mapped(self, key: str, **answers: tuple[str, ...]) -> _Mapped:
        return _Mapped(self, key, answers)


class _Mapped:
    """A ``with`` block that turns botocore's exceptions into fleet errors. ``answers`` maps a name to S3 error
    codes that are answers, not errors (404 on a read: absent): the block's exception is swallowed and ``answer``
    holds that name."""

    def __init__(self, bucket: Bucket, key: str, answers: dict[str, tuple[str, ...]]) -> None:
        self.bucket, self.key, self.answers = bucket, key, answers
        self.answer: str | None = None

    def __enter__(self) -> _Mapped:
        return self

    def __exit__(self, kind, exc, _tb) -> bool:
        if exc is None or not isinstance(exc, Exception) or _is_fleet_error(exc):
            return False
        code = _error_code(exc)
        for name, codes in self.answers.items():
            if code is not None and code in codes:
                self.answer = name
                return True
        raise translate(exc, self.bucket, self.key) from exc


def _is_fleet_error(exc: BaseException) -> bool:
    from orinkit.core.errors import OrinkitError

    return isinstance(exc, OrinkitError)


def _error_code(exc: BaseException) -> str | None:
    # boto3's managed transfers wrap the ClientError (S3UploadFailedError, ...): look at the cause as well.
    for candidate in (exc, exc.__cause__, exc.__context__):
        response = getattr(candidate, "response", None)
        if isinstance(response, dict) and "Error" in response:
            return str(response["Error"].get("Code", ""))
    return None


def translate(exc: BaseException, bucket: Bucket, key: str = "") -> BucketError:
    """The fleet error for a botocore (or boto3 transfer) exception."""
    code = _error_code(exc)
    entry = _ERRORS.get(code) if code else None
    for cls in type(exc).__mro__:
        if entry is not None:
            break
        entry = _ERRORS.get(cls.__name__)
    fields = {"bucket": bucket.url.bucket, "key": bucket.url.key(key), "endpoint": bucket.endpoint}
    if entry is None:
        what = f"S3 error {code}" if code else type(exc).__name__
        detail = getattr(exc, "response", {}).get("Error", {}).get("Message", "") if code else str(exc)
        return BucketError(f"{what} on s3://{fields['bucket']}/{fields['key']} at {fields['endpoint']}"
                           + (f": {detail}" if detail else ""),
                           hint="check the bucket URL, --endpoint-url and the credentials")
    cls, message, hint = entry
    return cls(message.format(**fields), hint=hint.format(**fields))


def _client(endpoint_url: str | None, timeout_s: float, retries: int):
    boto3 = _boto3()
    from botocore.config import Config

    endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    options = {
        "connect_timeout": timeout_s, "read_timeout": timeout_s,
        "retries": {"total_max_attempts": 1 + max(retries, 0), "mode": "standard"},
        # MinIO and most S3-compatible stores serve buckets by path, not as a sub-domain of the endpoint.
        "s3": {"addressing_style": "path"} if endpoint_url else {},
    }
    # botocore >= 1.36 adds CRC checksums to every upload, which several S3-compatible stores reject; send and
    # check them only where the operation requires it (older botocore does not know the options).
    checksums = {"request_checksum_calculation": "when_required", "response_checksum_validation": "when_required"}
    try:
        config = Config(**options, **checksums)
    except TypeError:
        config = Config(**options)
    session = boto3.session.Session()
    try:
        return session.client("s3", endpoint_url=endpoint_url, config=config)
    except Exception as exc:  # a malformed endpoint URL, an unknown profile: botocore's own errors, told plainly
        raise BucketError(f"cannot set up an S3 client for {endpoint_url or 'AWS'}: {exc}",
                          hint="check --endpoint-url (http://HOST:PORT) and AWS_PROFILE") from exc
