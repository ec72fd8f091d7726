"""``edge-serve``: run tritonserver in the foreground, or print the command line orinkit would run."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from orinkit.cli.base import OrinkitGroup, url_option
from orinkit.jetson.triton import check_server_fits_device
from orinkit.server.command import CONTROL_MODES, ServerOptions, build_command
from orinkit.server.errors import InvalidServerOptionError, RepositoryCheckError, RepositoryNotFoundError
from orinkit.server.health import server_metadata
from orinkit.server.locate import HOME_ENV, locate_tritonserver
from orinkit.server.process import TritonProcess

# The machine edge-serve runs on; a test points it at a captured Jetson tree.
DEVICE_ROOT = Path("/")


class _Interrupted(Exception):
    """Raised from the SIGINT/SIGTERM handler so that every path out of ``run`` stops the server."""


def _server_options(func):
    decorators = [
        # Plain strings: a Path would fold s3://bucket into s3:/bucket.
        click.argument("repository_arg", metavar="[REPOSITORY]", required=False),
        click.option("--repository", "-r", default=None,
                     help="Model repository folder (one subfolder per model), or s3://[HOST:PORT/]BUCKET/PREFIX "
                          "for a server build that reads S3 (not Jetson's; explicit mode); or give it as the "
                          "argument."),
        click.option("--triton-home", type=click.Path(path_type=Path), default=None,
                     help=f"Triton release folder (bin/, lib/, backends/); default ${HOME_ENV}, "
                          "/opt/tritonserver, then the server bundled in nvidia-pytriton."),
        click.option("--address", default="127.0.0.1", show_default=True,
                     help="Address the HTTP, gRPC and metrics endpoints bind to (0.0.0.0 for every interface)."),
        click.option("--http-port", type=int, default=8000, show_default=True),
        click.option("--grpc-port", type=int, default=8001, show_default=True),
        click.option("--metrics-port", type=int, default=8002, show_default=True),
        click.option("--model-control-mode", type=click.Choice(CONTROL_MODES), default="none", show_default=True),
        click.option("--load-model", "load_models", multiple=True,
                     help="Model to load at start (repeatable; needs --model-control-mode explicit)."),
        click.option("--exit-timeout", "exit_timeout_s", type=int, default=30, show_default=True,
                     help="Seconds the server may take to finish in-flight requests when stopped."),
        click.option("--log-verbose", type=int, default=0, show_default=True),
        click.option("--grpc-tls-cert", type=click.Path(path_type=Path), default=None,
                     help="Serve gRPC over TLS with this certificate (PEM); needs --grpc-tls-key."),
        click.option("--grpc-tls-key", type=click.Path(path_type=Path), default=None,
                     help="The certificate's private key (PEM)."),
        click.option("--grpc-tls-root-cert", type=click.Path(path_type=Path), default=None,
                     help="The CA that signs client certificates (with --grpc-tls-verify-client)."),
        click.option("--grpc-tls-verify-client", is_flag=True,
                     help="Accept only clients presenting a certificate signed by --grpc-tls-root-cert."),
        click.option("--server-arg", "extra_args", multiple=True,
                     help="Another tritonserver flag, passed as it is (repeatable), e.g. --server-arg "
                          "--model-load-thread-count=2. Flags orinkit sets from its own options are refused."),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def _command(triton_home, *, repository_arg=None, backend_cache=None, assemble_backends=True, **options):
    given, option = repository_arg, options.pop("repository", None)
    if given is not None and option is not None and _same(given) != _same(option):
        raise InvalidServerOptionError(f"two repositories given: {given} and --repository {option}",
                                       hint="give one of them")
    if given is None and option is None:
        raise InvalidServerOptionError("no model repository given", hint="edge-serve run MODELS (or --repository)")
    install = locate_tritonserver(triton_home)
    # On a Jetson, a server built for another JetPack fails at load with a linker error: refuse it with the fix.
    check_server_fits_device(install.home, DEVICE_ROOT)
    return build_command(install, ServerOptions(repository=given or option, **options), backend_cache=backend_cache,
                         assemble_backends=assemble_backends)


def _same(repository: str) -> str | Path:
    return repository if repository.startswith("s3://") else Path(repository).resolve()


@click.group(cls=OrinkitGroup)
def main() -> None:
    """Run NVIDIA Triton Inference Server for a model repository."""


@main.command()
@_server_options
def command(triton_home, **options) -> None:
    """Print the server found and the exact command line and environment orinkit runs it with."""
    cmd = _command(triton_home, **options)
    click.echo(f"# tritonserver: {cmd.install.describe()}")
    for name, folders in cmd.prepend_env.items():
        click.echo(f"{name}={':'.join(folders)}${{{name}:+:${name}}} \\")
    click.echo(cmd.shell_line())


@main.command()
@_server_options
@click.option("--ready-timeout", type=float, default=300.0, show_default=True,
              help="Seconds to wait for every model to load before giving up.")
@click.option("--log-file", type=click.Path(path_type=Path), default=None,
              help="Write the server's log here instead of to standard error.")
@click.option("--no-check", is_flag=True, help="Start without edge-repo check's judgement of the repository.")
def run(triton_home, ready_timeout, log_file, no_check, **options) -> None:
    """Start tritonserver in the foreground; Ctrl-C or SIGTERM stops it and everything it started."""
    # Here, not at the top: orinkit.repo brings tritonclient.grpc and numpy, which `edge-serve ui` does without.
    from orinkit.repo.journal import prepare_start, record_loaded

    cmd = _command(triton_home, **options)
    remote = cmd.options.remote
    if remote and no_check:  # before the ports are looked at: a refused option does not depend on them
        raise InvalidServerOptionError("--no-check does not apply to an S3 repository: nothing is checked there",
                                       hint="drop --no-check (the server reports what fails at load)")
    process = TritonProcess(cmd, log=log_file or sys.stderr)
    process.preflight()
    if not remote:  # an S3 repository is the bucket's: no local journal to prepare, no folder to check
        for line in prepare_start(cmd.options.repository):
            click.echo(line, err=True)
        if not no_check:
            check_before_start(cmd)

    def interrupt(signum, frame):
        raise _Interrupted(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        process.start(ready_timeout_s=ready_timeout)
        version = server_metadata(cmd.http_url).get("version", "?")
        click.echo(f"tritonserver {version} ready (pid {process.pid}; {cmd.install.describe()})")
        click.echo(f"  gRPC     {cmd.grpc_url}" + (" (TLS)" if cmd.options.tls else ""))
        click.echo(f"  HTTP     {cmd.http_url}")
        click.echo(f"  metrics  {cmd.metrics_url}")
        click.echo(f"  models   {cmd.options.repository}")
        for line in ([] if remote else record_loaded(cmd.options.repository, cmd.http_url)):
            click.echo(line, err=True)
        click.echo("Ctrl-C or SIGTERM stops it.")
        while process.wait(timeout_s=2.0) is None:
            process.make_regions_private()  # models loaded later (explicit mode) make new regions
        process.raise_if_exited()
    except _Interrupted as exc:
        click.echo(f"{exc}: stopping tritonserver", err=True)
    finally:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        process.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo("tritonserver stopped", err=True)


def check_before_start(cmd) -> None:
    """edge-repo check with this server's backends and Python: every model the server would refuse, named at
    once, instead of the first failure after the server tried."""
    from orinkit.repo.check import check_repository

    python = Path(sys.prefix) / "bin" / "python3"
    findings = check_repository(cmd.options.repository, backend_directory=cmd.backend_directory,
                                python=str(python) if python.exists() else sys.executable)
    errors = [f for f in findings if f.severity == "error"]
    if cmd.options.load_models:
        errors = [f for f in errors if f.model in cmd.options.load_models or f.model == "-"]
    if errors:
        for finding in errors:
            click.echo(str(finding), err=True)
        models = sorted({f.model for f in errors})
        raise RepositoryCheckError(f"{len(models)} model(s) would fail to load: {', '.join(models)}",
                                   hint="fix what is listed above, or start anyway with --no-check")


def _uid(user: str) -> int | None:
    """The uid of ``user``; None (with a warning) where there is no such user: a start must not fail on it."""
    import pwd

    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        click.echo(f"warning: no user '{user}' on this machine: its shared memory is left as it is", err=True)
        return None


@main.command()
@click.option("--repository", "-r", required=True, type=click.Path(path_type=Path))
@click.option("--owner", default=None, help="The user the server runs as (default: this one): whose shared memory.")
def prepare(repository, owner) -> None:
    """Before a start (the unit's ExecStartPre): remove the shared memory of killed servers, and set aside the
    model versions no server has loaded, so they cannot fail the start."""
    from orinkit.repo.journal import prepare_start

    uid = None if owner is None else _uid(owner)
    if owner is not None and uid is None:
        uid = -1  # nobody's regions: leave them all
    if not Path(repository).is_dir():
        raise RepositoryNotFoundError(f"model repository '{repository}' does not exist",
                                      hint="pass --repository with the folder the unit serves")
    for line in prepare_start(Path(repository), owner=uid) or ["nothing to set aside"]:
        click.echo(line)


@main.command("wait-ready")
@url_option("http_url", default="http://127.0.0.1:8000", help="The server's HTTP address.")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds to wait.")
@click.option("--repository", "-r", type=click.Path(path_type=Path), default=None,
              help="Then record the versions the server loaded as proven (what the next start keeps).")
@click.option("--owner", default=None, help="Then make this user's Python-backend shared memory private (0600).")
def wait_ready(http_url, timeout, repository, owner) -> None:
    """Exit 0 once /v2/health/ready answers, 6 after --timeout (systemd's ExecStartPost)."""
    from orinkit.repo.journal import record_loaded
    from orinkit.server.errors import ServerStartError
    from orinkit.server.health import is_ready, wait_until
    from orinkit.server.regions import make_private

    if not wait_until(lambda: is_ready(http_url), timeout_s=timeout, interval_s=0.5):
        raise ServerStartError(f"{http_url} was not ready after {timeout:g} s",
                               hint="journalctl -u <unit> shows the server's log")
    uid = None if owner is None else _uid(owner)
    if uid is not None:
        make_private(owner=uid)
    if repository is not None:
        record_loaded(Path(repository), http_url)
    click.echo(f"{http_url} is ready")


@main.command("check-plans")
@click.option("--repository", "-r", required=True, type=click.Path(path_type=Path))
def check_plans(repository) -> None:
    """Fail when a TensorRT plan in the repository does not match this device and TensorRT (stale engines)."""
    from orinkit.convert.errors import StaleEngineError
    from orinkit.convert.verify import verify_engine

    if not Path(repository).is_dir():
        raise RepositoryNotFoundError(f"model repository '{repository}' does not exist",
                                      hint="pass --repository with the folder the server serves")
    plans = sorted(Path(repository).glob("*/*/model.plan"))
    stale = []
    for plan in plans:
        verdict = verify_engine(plan)
        click.echo(verdict.describe())
        if not verdict.matches:
            stale.append(plan)
    if stale:
        raise StaleEngineError(f"{len(stale)} of {len(plans)} plan(s) do not match this device",
                               hint="rebuild them with edge-convert --verify-engine PLAN MODEL.onnx")
    click.echo(f"{len(plans)} plan(s) match this device")


def _service_options(func):
    decorators = [
        click.option("--name", default="tritonserver", show_default=True, help="The unit's name."),
        click.option("--user", default="triton", show_default=True, help="The user it runs as (in group video)."),
        click.option("--pin-clocks", is_flag=True, help="ExecStartPre: nvpmodel -m MODE and jetson_clocks."),
        click.option("--nvpmodel-mode", type=int, default=0, show_default=True),
        click.option("--no-check-plans", is_flag=True, help="Skip the stale-plan check before the server starts."),
        click.option("--no-hardening", is_flag=True, help="Leave out the sandboxing settings."),
        click.option("--root", type=click.Path(path_type=Path), default=None,
                     help="Stage the files into this image tree instead of the running system."),
        click.option("--dry-run", is_flag=True, help="Print what would change and change nothing."),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def _service(name, user, pin_clocks=False, nvpmodel_mode=0, no_check_plans=False, no_hardening=False):
    from orinkit.systemd.unit import ServiceOptions

    return ServiceOptions(name=name, user=user, group=user, pin_clocks=pin_clocks, nvpmodel_mode=nvpmodel_mode,
                          check_plans=not no_check_plans, hardening=not no_hardening)


@main.command()
@_server_options
@_service_options
@click.option("--pinned-pool-mb", type=int, default=64, show_default=True,
              help="Triton's pinned memory pool; CPU and GPU share the Orin's DRAM, so keep it small.")
@click.option("--cuda-pool-mb", type=int, default=64, show_default=True)
@click.option("--ui", "with_ui", is_flag=True, help="Also install the device page (edge-serve ui) as its own service.")
@click.option("--ui-host", default=None, help="With --ui: the page's address (default 127.0.0.1; others need a token).")
@click.option("--ui-port", type=int, default=None, help="With --ui: the page's port (default 8080).")
@click.option("--ui-token-file", type=click.Path(path_type=Path), default=None,
              help="With --ui: the token file, handed to the page as a systemd credential (made, 0600, if missing).")
@click.option("--ui-allow-control", is_flag=True, help="With --ui: load/unload/rollback from the page.")
def install(triton_home, name, user, pin_clocks, nvpmodel_mode, no_check_plans, no_hardening, root, dry_run,
            pinned_pool_mb, cuda_pool_mb, with_ui, ui_host, ui_port, ui_token_file, ui_allow_control,
            **options) -> None:
    """Install tritonserver as a hardened systemd service (models loaded explicitly), or stage it with --root."""
    ui_given = {"--ui-host": ui_host, "--ui-port": ui_port, "--ui-token-file": ui_token_file,
                "--ui-allow-control": ui_allow_control or None}
    stray = [flag for flag, value in ui_given.items() if value is not None]
    if stray and not with_ui:
        raise click.UsageError(f"{', '.join(stray)} only apply with --ui")
    from orinkit.server.backends import backend_directory
    from orinkit.systemd import installer as installing
    from orinkit.systemd.target import Target
    from orinkit.systemd.unit import render_unit

    if options["model_control_mode"] == "none":
        options["model_control_mode"] = "explicit"
    if options.get("repository_arg") and not options.get("repository"):
        options["repository"], options["repository_arg"] = options["repository_arg"], None
    if not options.get("repository"):
        raise InvalidServerOptionError("no model repository given", hint="edge-serve install MODELS (or --repository)")
    if str(options["repository"]).startswith("s3://"):
        raise InvalidServerOptionError("the service is for an Orin, whose tritonserver cannot read s3:// repositories",
                                       hint="install with a local folder and let edge-fleet agent fill it from the "
                                            "bucket")
    # Paths given for the target system are looked up where they will be: under --root when staging an image.
    target = Target.of(root)
    repository = target.here(options["repository"], what="--repository")
    options["repository"] = str(repository)
    for key in ("grpc_tls_cert", "grpc_tls_key", "grpc_tls_root_cert"):
        if options[key] is not None:
            options[key] = target.here(options[key], what="--" + key.replace("_", "-"))
    if triton_home is not None:
        triton_home = target.here(triton_home, what="--triton-home")
    if options["model_control_mode"] == "explicit" and not options["load_models"]:
        options["load_models"] = tuple(sorted(p.name for p in repository.iterdir()
                                              if (p / "config.pbtxt").is_file())) if repository.is_dir() else ()
    # A backend folder orinkit assembles (the bundled server's) goes to the service's state folder: the service
    # user cannot read root's ~/.cache. Everything is checked and rendered before anything is written.
    cache = target.base / "var/lib" / name
    local = _command(triton_home, pinned_memory_pool_bytes=pinned_pool_mb << 20,
                     cuda_memory_pool_bytes=cuda_pool_mb << 20, backend_cache=cache, assemble_backends=False,
                     **options)
    local.options.check_repository()
    cmd = local.relocated(target.root) if target.root is not None else local
    service = _service(name, user, pin_clocks, nvpmodel_mode, no_check_plans, no_hardening)
    units = [(render_unit(cmd, service).render(), service)]
    token = None if ui_token_file is None else target.here(ui_token_file, what="--ui-token-file")
    if with_ui:
        page_options = _ui_options(options["grpc_port"], options["http_port"], ui_host, ui_port,
                                   None if token is None else target.there(token), ui_allow_control,
                                   cmd.options.repository)
        units.append(_ui_unit(page_options, service))
    if dry_run:
        for text, unit in units:
            plan = installing.install(text, unit, root=target.root, dry_run=True)
            click.echo(plan.describe())
            click.echo(f"would install {unit.unit_name}" + ("" if plan.changed else " (nothing changed)"))
        if token is not None and not token.exists():
            click.echo(f"would write a new page token to {token}")
        return
    if target.root is None:
        installing.require_systemd(f"installing {service.unit_name}", staging=True)
    touched = [local.backend_directory, *([token] if token is not None else [])]
    touched += [path for text, unit in units for path in installing.touched_paths(text, unit, root=target.root)]
    report = []
    # A failure or an interrupt at any step puts back every file as it was: nothing half-installed stays.
    with installing.undone_on_failure(touched):
        backend_directory(local.install, cache=cache)
        for text, unit in units:
            if unit is not service and token is not None:
                report += _ensure_token(token)
            plan = installing.install(text, unit, root=target.root)
            report += [plan.describe(), f"installed {unit.unit_name}" + ("" if plan.changed else " (nothing changed)")]
    for line in report:
        click.echo(line)


def _ui_options(grpc_port, http_port, host, port, token_file, allow_control, repository):
    """The page's options, pointed at the server's ports on loopback; refused before anything is written."""
    from orinkit.systemd.ui_unit import UiOptions

    return UiOptions(grpc_url=f"localhost:{grpc_port}", http_url=f"http://localhost:{http_port}",
                     host=host or "127.0.0.1", port=port or 8080,
                     repository=repository, allow_control=allow_control, token_file=token_file)


def _ui_unit(options, service):
    from orinkit.systemd.ui_unit import render_ui_unit, ui_service

    page = ui_service(service)
    return render_ui_unit(options, page, server_unit=service.unit_name).render(), page


def _ensure_token(path: Path) -> list[str]:
    """A token file that does not exist yet is made (random, 0600, root's): the page reads it as a credential."""
    import secrets

    from orinkit.core.files import atomic_write_text

    if path.exists():
        return []
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, secrets.token_urlsafe(32) + "\n", mode=0o600)
    return [f"wrote a new page token to {path} (open the page with ?token=<its content>)"]


@main.command()
@click.option("--name", default="tritonserver", show_default=True)
@click.option("--root", type=click.Path(path_type=Path), default=None)
@click.option("--dry-run", is_flag=True)
def uninstall(name, root, dry_run) -> None:
    """Disable and remove the service's unit (and the device page's, if installed); models and the user stay."""
    from orinkit.systemd import installer as installing
    from orinkit.systemd.target import Target
    from orinkit.systemd.ui_unit import ui_service

    service = _service(name, "triton")
    page = ui_service(service)
    target = Target.of(root)
    if (target.base / "etc/systemd/system" / page.unit_name).exists():
        click.echo(installing.uninstall(page, root=target.root, dry_run=dry_run).describe())
    plan = installing.uninstall(service, root=target.root, dry_run=dry_run)
    click.echo(plan.describe())


@main.command("ui")
@url_option(help="Triton's gRPC address (the try panel and control).")
@click.option("--http-url", default=None,
              help="Triton's HTTP address (the models panel); default: --url's host, on the --http-port of the "
                   "tritonserver listening on --url's port here, else on the port below --url's (8000 beside 8001).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address the page listens on; off loopback it needs a token (or use an SSH tunnel).")
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--token", default=None, help="Bearer token every /api request must carry (visible in ps: prefer "
                                            "--token-file).")
@click.option("--token-file", type=click.Path(path_type=Path), default=None, help="Read the token from this file.")
@click.option("--generate-token", is_flag=True, help="Make a random token and print the URL that carries it once.")
@click.option("--repository", "-r", type=click.Path(path_type=Path), default=None,
              help="The server's model repository: labels files, and the folder control acts on.")
@click.option("--allow-control", is_flag=True, help="Show load/unload/rollback (the rules of edge-repo).")
@click.option("--max-upload-bytes", type=int, default=None,
              help="Largest image the try panel takes (default: the image step's limit, 16 MiB).")
@click.option("--max-pixels", type=int, default=None, help="Most pixels an image may have (default: the image "
                                                             "step's limit).")
def ui(url, **options) -> None:
    """Serve the device page: models, board power and heat, and a panel to try a model on an image."""
    import logging

    from orinkit.ui import serve_ui

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    serve_ui(url, echo=click.echo, **options)


def _control(action):
    @click.option("--name", default="tritonserver", show_default=True)
    def command(name, **kwargs) -> None:
        from orinkit.systemd import installer as installing

        click.echo(installing.control(action, _service(name, "triton"), **kwargs), nl=False)

    command.__doc__ = f"systemctl {action} for the service." if action != "logs" else "The service's journal."
    if action == "logs":
        command = click.option("--lines", type=int, default=100, show_default=True)(command)
    return main.command(action)(command)


for _action in ("start", "stop", "restart", "status", "logs"):
    _control(_action)


if __name__ == "__main__":  # the systemd unit runs ``python -m orinkit.cli.serve``: the venv's own Python, no PATH
    main()
