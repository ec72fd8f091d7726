"""The tritonserver command line and environment: the one source for ``edge-serve run``, the tests' fixture and
the systemd unit's ExecStart."""

from __future__ import annotations

import copy
import dataclasses
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orinkit.server.backends import backend_directory
from orinkit.server.errors import InvalidServerOptionError, RepositoryNotFoundError
from orinkit.server.locate import TritonInstall

CONTROL_MODES = ("none", "poll", "explicit")
# tritonserver flags orinkit writes itself: passing them again would contradict (or silently override) an option.
MANAGED_FLAGS = {
    "--model-repository": "--repository", "--model-store": "--repository", "--backend-directory": "--triton-home",
    "--http-address": "--address", "--grpc-address": "--address", "--metrics-address": "--address",
    "--http-port": "--http-port", "--grpc-port": "--grpc-port", "--metrics-port": "--metrics-port",
    "--model-control-mode": "--model-control-mode", "--load-model": "--load-model",
    "--exit-timeout-secs": "--exit-timeout", "--log-verbose": "--log-verbose", "--grpc-use-ssl": "--grpc-tls-cert",
    "--grpc-server-cert": "--grpc-tls-cert", "--grpc-server-key": "--grpc-tls-key",
    "--grpc-root-cert": "--grpc-tls-root-cert", "--grpc-use-ssl-mutual": "--grpc-tls-verify-client",
}


@dataclass(frozen=True, kw_only=True)
class ServerOptions:
    """What a tritonserver is started with. Every field has the default a device needs; none is dropped silently:
    an option that cannot work raises :class:`InvalidServerOptionError` when the object is made."""

    repository: Path | str  # a folder, or s3://[HOST:PORT/]BUCKET/PREFIX for builds that read S3 (not Jetson's)
    address: str = "127.0.0.1"
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    model_control_mode: str = "none"
    load_models: tuple[str, ...] = ()
    exit_timeout_s: int = 30
    log_verbose: int = 0
    # None keeps Triton's defaults (256 MiB pinned, 64 MiB CUDA); a shared-memory board wants them smaller.
    pinned_memory_pool_bytes: int | None = None
    cuda_memory_pool_bytes: int | None = None
    # gRPC over TLS: the server's certificate and key (PEM); with verify_client, clients must present a certificate
    # signed by grpc_tls_root_cert.
    grpc_tls_cert: Path | None = None
    grpc_tls_key: Path | None = None
    grpc_tls_root_cert: Path | None = None
    grpc_tls_verify_client: bool = False
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.remote:
            object.__setattr__(self, "repository", Path(self.repository).expanduser().resolve())
        self._check_tls()
        object.__setattr__(self, "load_models", tuple(self.load_models))
        object.__setattr__(self, "extra_args", tuple(self.extra_args))
        for arg in self.extra_args:
            flag = arg.split("=", 1)[0]
            if flag in MANAGED_FLAGS:
                raise InvalidServerOptionError(
                    f"the server argument {flag} is set by orinkit from its own option",
                    hint=f"use {MANAGED_FLAGS[flag]} instead of --server-arg {arg}")
            if not flag.startswith("--"):
                raise InvalidServerOptionError(f"the server argument '{arg}' is not a --flag",
                                               hint="write it as tritonserver takes it, e.g. --server-arg "
                                                    "--model-load-thread-count=2")
        ports = {"http_port": self.http_port, "grpc_port": self.grpc_port, "metrics_port": self.metrics_port}
        for name, port in ports.items():
            if not isinstance(port, int) or not 1 <= port <= 65535:
                raise InvalidServerOptionError(f"{name} {port!r} is not a port", hint="use a number from 1 to 65535")
        if len(set(ports.values())) != len(ports):
            raise InvalidServerOptionError(
                f"HTTP, gRPC and metrics ports must differ (got {self.http_port}, {self.grpc_port}, "
                f"{self.metrics_port})",
                hint="give each its own port",
            )
        if self.model_control_mode not in CONTROL_MODES:
            raise InvalidServerOptionError(
                f"model control mode '{self.model_control_mode}' is unknown",
                hint=f"use one of {', '.join(CONTROL_MODES)}",
            )
        if self.load_models and self.model_control_mode != "explicit":
            raise InvalidServerOptionError(
                "models to load are only honoured with model control mode 'explicit'",
                hint="add --model-control-mode explicit, or drop --load-model to load every model",
            )
        if self.remote:
            self._check_remote()
        if self.exit_timeout_s < 0:
            raise InvalidServerOptionError(f"exit timeout {self.exit_timeout_s} is negative", hint="use 0 or more")
        for name in ("pinned_memory_pool_bytes", "cuda_memory_pool_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InvalidServerOptionError(f"{name} {value} is negative", hint="use 0 or more bytes")

    @property
    def remote(self) -> bool:
        """The repository is in S3, read by tritonserver itself (x86 and SBSA builds; Jetson builds cannot)."""
        return isinstance(self.repository, str) and self.repository.startswith("s3://")

    def _check_remote(self) -> None:
        # Measured against an S3 API server: poll mode makes 14-26 requests a second per idle server and never
        # notices a deletion; explicit mode makes none until a load. Loading everything at start ("none") would
        # make the start depend on the bucket, and a server whose bucket is down exits after about 52 s.
        if self.model_control_mode != "explicit":
            raise InvalidServerOptionError(
                f"an S3 repository is served in explicit model control mode, not '{self.model_control_mode}'",
                hint="add --model-control-mode explicit and load models with --load-model or edge-repo load")
        if any(a.split("=", 1)[0] == "--repository-poll-secs" for a in self.extra_args):
            raise InvalidServerOptionError("polling an S3 repository costs requests every second and misses deletions",
                                           hint="drop --server-arg --repository-poll-secs; load explicitly")

    @property
    def tls(self) -> bool:
        return self.grpc_tls_cert is not None

    def _check_tls(self) -> None:
        for name in ("grpc_tls_cert", "grpc_tls_key", "grpc_tls_root_cert"):
            value = getattr(self, name)
            if value is not None:
                path = Path(value).expanduser().resolve()
                object.__setattr__(self, name, path)
                if not path.is_file():
                    raise InvalidServerOptionError(f"--{name.replace('_', '-')} {path} is not a file",
                                                   hint="give the PEM file's path")
        if (self.grpc_tls_cert is None) != (self.grpc_tls_key is None):
            raise InvalidServerOptionError("TLS needs both the server's certificate and its private key",
                                           hint="give --grpc-tls-cert and --grpc-tls-key together")
        if self.grpc_tls_root_cert is not None and not self.tls:
            raise InvalidServerOptionError("--grpc-tls-root-cert applies to a server with TLS",
                                           hint="add --grpc-tls-cert and --grpc-tls-key, or drop it")
        if self.grpc_tls_verify_client and self.grpc_tls_root_cert is None:
            raise InvalidServerOptionError("verifying client certificates needs the CA that signs them",
                                           hint="add --grpc-tls-root-cert CA.pem")

    def check_repository(self) -> None:
        if self.remote:
            return  # only the server can read it (with its own credentials); it says what fails at load
        if not self.repository.is_dir():
            raise RepositoryNotFoundError(
                f"model repository '{self.repository}' does not exist or is not a folder",
                hint="pass --repository with the folder that holds one subfolder per model",
            )
        unknown = [name for name in self.load_models if not (self.repository / name).is_dir()]
        if unknown:
            present = sorted(p.name for p in self.repository.iterdir() if p.is_dir() and not p.name.startswith("."))
            raise InvalidServerOptionError(
                f"--load-model names {', '.join(unknown)}, which {'is' if len(unknown) == 1 else 'are'} not in "
                f"{self.repository}", hint=f"the repository holds {', '.join(present) or 'no model'}")


@dataclass(frozen=True)
class ServerCommand:
    """A ready-to-run tritonserver: ``argv`` plus the folders to prepend to ``PATH``/``LD_LIBRARY_PATH``."""

    argv: tuple[str, ...]
    options: ServerOptions
    install: TritonInstall
    backend_directory: Path
    prepend_env: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def relocated(self, root: Path) -> ServerCommand:
        """The same command as it runs inside the image tree ``root``: every path under ``root`` loses that prefix
        (the command line, the backend folder, the server's home, the environment, the options' files)."""
        prefix = str(Path(root).resolve()).rstrip("/")

        def strip(value: str) -> str:
            head, sep, path = value.partition("=") if value.startswith("--") else ("", "", value)
            if path.startswith(prefix + "/"):
                path = path[len(prefix):]
            return f"{head}{sep}{path}"

        options = copy.copy(self.options)  # as it is: its checks looked at the files under root, where they are
        for name in ("repository", "grpc_tls_cert", "grpc_tls_key", "grpc_tls_root_cert"):
            value = getattr(options, name)
            if isinstance(value, Path):
                object.__setattr__(options, name, Path(strip(str(value))))
        install = dataclasses.replace(self.install, home=Path(strip(str(self.install.home))))
        environment = {name: tuple(strip(folder) for folder in folders) for name, folders in self.prepend_env.items()}
        return ServerCommand(tuple(strip(a) for a in self.argv), options, install,
                             Path(strip(str(self.backend_directory))), environment)

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        for name, folders in self.prepend_env.items():
            env[name] = os.pathsep.join([*folders, *filter(None, [env.get(name)])])
        return env

    def shell_line(self) -> str:
        return shlex.join(self.argv)

    @property
    def _host(self) -> str:
        address = self.options.address
        if address in ("0.0.0.0", "::"):
            return "127.0.0.1"
        return f"[{address}]" if ":" in address else address

    @property
    def http_url(self) -> str:
        return f"http://{self._host}:{self.options.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self._host}:{self.options.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self._host}:{self.options.metrics_port}/metrics"


def _tls_args(o: ServerOptions) -> list[str]:
    if not o.tls:
        return []
    args = ["--grpc-use-ssl=true", f"--grpc-server-cert={o.grpc_tls_cert}", f"--grpc-server-key={o.grpc_tls_key}"]
    if o.grpc_tls_root_cert is not None:
        args.append(f"--grpc-root-cert={o.grpc_tls_root_cert}")
    if o.grpc_tls_verify_client:
        args.append("--grpc-use-ssl-mutual=true")
    return args


def build_command(
    install: TritonInstall,
    options: ServerOptions,
    *,
    python_prefix: str | os.PathLike[str] | None = None,
    python_version: str | None = None,
    backend_cache: str | os.PathLike[str] | None = None,
    assemble_backends: bool = True,
) -> ServerCommand:
    """The command line that starts ``install`` with ``options``.

    ``python_prefix`` is the environment (a venv) whose packages the Python-backend models import; it defaults
    to the running interpreter's. The stub finds that environment through the ``python3`` first on ``PATH``.
    ``backend_cache`` is where a backend directory that must be assembled goes (default: orinkit's cache folder;
    a service puts it where its own user can read it).
    """
    backends = backend_directory(install, python_version=python_version,
                                 cache=None if backend_cache is None else Path(backend_cache),
                                 assemble=assemble_backends)
    o = options
    argv = [
        str(install.binary),
        f"--model-repository={o.repository}",
        f"--backend-directory={backends}",
        f"--http-address={o.address}",
        f"--http-port={o.http_port}",
        f"--grpc-address={o.address}",
        f"--grpc-port={o.grpc_port}",
        # --metrics-address exists from Triton 2.34; without it metrics listen on 0.0.0.0.
        f"--metrics-address={o.address}",
        f"--metrics-port={o.metrics_port}",
        f"--model-control-mode={o.model_control_mode}",
        *(f"--load-model={name}" for name in o.load_models),
        f"--exit-timeout-secs={o.exit_timeout_s}",
        f"--log-verbose={o.log_verbose}",
        *([f"--pinned-memory-pool-byte-size={o.pinned_memory_pool_bytes}"]
          if o.pinned_memory_pool_bytes is not None else []),
        *([f"--cuda-memory-pool-byte-size=0:{o.cuda_memory_pool_bytes}"]
          if o.cuda_memory_pool_bytes is not None else []),
        *_tls_args(o),
        *o.extra_args,
    ]
    prefix = Path(python_prefix) if python_prefix is not None else Path(sys.prefix)
    prepend = {
        "LD_LIBRARY_PATH": tuple(str(p) for p in install.library_dirs),
        "PATH": (str(prefix / "bin"),),
    }
    return ServerCommand(
        argv=tuple(argv),
        options=options,
        install=install,
        backend_directory=backends,
        prepend_env={k: v for k, v in prepend.items() if v},
    )
