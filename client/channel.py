"""A tritonclient gRPC connection with orinkit's options: TLS, keepalive, and channel options merged over
tritonclient's large-message defaults (passing channel_args to tritonclient replaces them all)."""

from __future__ import annotations

import functools
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from orinkit.client.errors import ClientError, InvalidInputError

# tritonclient's defaults: without them gRPC's 4 MB receive limit silently comes back.
INT32_MAX = 2**31 - 1
DEFAULT_CHANNEL_OPTIONS = (
    ("grpc.max_send_message_length", INT32_MAX),
    ("grpc.max_receive_message_length", INT32_MAX),
    # gRPC waits 1 s, then up to 120 s, before it tries a lost connection again, and fails calls meanwhile; a
    # restarted tritonserver would stay unreachable long after it is back. With a 1 s cap, the wait for the next
    # try was most of what a call spent after the server's return (benchmarks/faults.py: 0.53-0.84 s median of
    # 0.58-0.92 s); a refused try costs next to nothing, so they come at most 0.25 s apart.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 250),
    # Despite its name, the shortest time gRPC gives one connection attempt (TCP and TLS handshakes); it does
    # not space the tries. 100 ms would cut off a TLS handshake over a slow link.
    ("grpc.min_reconnect_backoff_ms", 5000),
)
# gRPC's own target schemes (its name resolvers): "dns:///host:port" works; any other scheme (http://, grpc://,
# put there by habit) would fail only after the whole ready wait, as "Misformatted domain name".
GRPC_TARGET_SCHEMES = ("dns", "ipv4", "ipv6", "unix", "unix-abstract", "vsock")


@dataclass(frozen=True)
class TLS:
    """TLS as tritonclient spells it: the three file paths, plus ``insecure`` to skip verifying the server's
    certificate (gRPC cannot; orinkit trusts the certificate the server presents and its name instead)."""

    root_certificates: str | None = None
    private_key: str | None = None
    certificate_chain: str | None = None
    insecure: bool = False


def merged_channel_options(extra: Sequence[tuple[str, object]] = ()) -> list[tuple[str, object]]:
    options = dict(DEFAULT_CHANNEL_OPTIONS)
    options.update(dict(extra))
    return list(options.items())


def _presented_certificate(url: str) -> tuple[str, str]:
    """The server's certificate (PEM, saved to a file) and a name from it that gRPC can verify against."""
    from orinkit.core.optional import require

    host, _, port = url.rpartition(":")
    pem = ssl.get_server_certificate((host.strip("[]"), int(port)))
    x509 = require("cryptography.x509")
    certificate = x509.load_pem_x509_certificate(pem.encode())
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        name = (names.get_values_for_type(x509.DNSName) or [None])[0]
    except x509.ExtensionNotFound:
        name = None
    if name is None:
        common = certificate.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)
        name = common[0].value if common else host
    handle, path = tempfile.mkstemp(prefix="orinkit-server-cert-", suffix=".pem")
    with os.fdopen(handle, "w") as out:
        out.write(pem)
    return path, name


def check_url(url: str) -> str:
    """Refuse, at once, a scheme in front of host:port that gRPC would only fail on later."""
    scheme, separator, rest = url.partition("://")
    if separator and scheme.lower() not in GRPC_TARGET_SCHEMES:
        hint = f"give host:port, without {scheme}:// (e.g. '{rest or 'localhost:8001'}')"
        if scheme.lower() in ("http", "https"):
            hint += "; the client speaks gRPC: Triton's gRPC port is 8001 by default, HTTP's 8000"
        if scheme.lower() in ("https", "grpcs"):
            hint += "; for TLS pass ssl=True"
        raise InvalidInputError(f"the server address '{url}' has a scheme ({scheme}://)", hint=hint)
    return url


def connect(url: str, *, tls: TLS | None, keepalive=None, channel_options: Sequence[tuple[str, object]] = ()):
    """A tritonclient.grpc.InferenceServerClient for ``url`` (host:port)."""
    check_url(url)
    options = merged_channel_options(channel_options)
    kwargs = {}
    presented = None
    if tls is not None:
        root = tls.root_certificates
        if tls.insecure:
            try:
                root, name = presented = _presented_certificate(url)
            except (OSError, ValueError) as exc:
                raise ClientError(f"cannot read the certificate the server at {url} presents: {exc}",
                                  hint="is the server started with --grpc-use-ssl=true?") from exc
            options.append(("grpc.ssl_target_name_override", name))
        kwargs = dict(ssl=True, root_certificates=root, private_key=tls.private_key,
                      certificate_chain=tls.certificate_chain)
    if keepalive is not None:
        kwargs["keepalive_options"] = keepalive
    try:
        return _client_class()(url, channel_args=options, **kwargs)
    finally:
        if presented is not None:  # tritonclient has read it into the channel's credentials
            os.unlink(presented[0])


@functools.cache
def _client_class():
    """tritonclient's client whose ``__del__`` survives an ``__init__`` cut short (Ctrl-C or SIGTERM while it
    connects): the original then prints a traceback at exit about a missing ``_stream``."""
    import tritonclient.grpc as grpcclient

    class SafeClient(grpcclient.InferenceServerClient):
        def __del__(self):
            if "_stream" in self.__dict__:
                super().__del__()

    return SafeClient
