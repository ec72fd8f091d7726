"""``edge-repo``: lay out a Triton model repository, check it, deploy and roll back versions."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import click

from orinkit.cli.base import LOCAL_SERVER, OrinkitGroup, url_option
from orinkit.repo.add import add_model
from orinkit.repo.check import check_repository, findings_json, server_defaults
from orinkit.repo.configs import Runtime
from orinkit.repo.deploy import deploy_version, load_versions, rollback
from orinkit.repo.ensemble import EnsembleSpec, add_ensemble
from orinkit.repo.errors import CheckFailedError, RepoError, ServerAPIError, SignatureError
from orinkit.repo.options import (
    CORRELATION_TYPES,
    INSTANCE_KINDS,
    SEQUENCE_STRATEGIES,
    ModelOptions,
    SequenceBatching,
    VersionPolicy,
)
from orinkit.repo.server_api import RepositoryAPI
from orinkit.repo.signature import TensorSpec
from orinkit.repo.steps import ImagePreprocess, TopK, add_step

_REPO = click.option("--repo", "repository", required=True, type=click.Path(path_type=Path),
                     help="The model repository folder.")
_CREATE = click.option("--create", is_flag=True, help="Start a new repository if --repo does not exist yet.")


def _repository(path: Path, create: bool) -> Path:
    """A repository that exists, or that ``--create`` asks for: a typo in --repo must not start a new one."""
    if path.is_dir():
        return path
    if path.exists():
        raise RepoError(f"--repo {path} is a file", hint="name the folder that holds one subfolder per model")
    if not create:
        raise RepoError(f"the repository {path} does not exist",
                        hint="check the path, or pass --create to start a new repository there")
    return path  # made with its first model, so a failed first add leaves nothing
# Commands that only talk to a server default to the local one, as edge-bench and the Client do; deploy and
# rollback change files first and touch a server only when --url names one (no server: files only).
_SERVER = url_option("server", default=None,
                     help="gRPC address of a server in explicit model control mode to load the result on, e.g. "
                          f"{LOCAL_SERVER}. Without it only the repository's files change.")


def _local_server(help_text: str):
    return url_option("server", help=help_text)


@contextmanager
def _reaching(server: str):
    """A server that cannot be reached is named with the option that picks another: with the default, the user
    may not know which address was tried."""
    try:
        yield
    except ServerAPIError as exc:
        cause = exc.__cause__
        status = getattr(cause, "status", lambda: None)() or ""
        if not status.endswith("UNAVAILABLE"):
            raise
        raise ServerAPIError(exc.message, hint=f"is tritonserver running at {server} (its gRPC port)? Pass "
                                               "--url HOST:PORT to use another") from cause


def _echo(message: str) -> None:
    click.echo(message, err=True)


def _parameters(items: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SignatureError(f"--parameter '{item}' is not KEY=VALUE", hint="write e.g. --parameter top_k=4")
        pairs.append((key, value))
    return tuple(pairs)


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(","))


@click.group(cls=OrinkitGroup)
def main() -> None:
    """Build, check and deploy Triton model repositories."""


@main.command()
@click.argument("artifact", type=click.Path(path_type=Path))
@_REPO
@_CREATE
@click.option("--name", default=None, help="Model name (default: the file's stem).")
@click.option("--runtime", type=click.Choice(["auto", *(r.value for r in Runtime)]), default="auto",
              show_default=True, help="How the model runs; 'auto' decides ONNX by the server's backends.")
@click.option("--version", type=int, default=1, show_default=True)
@click.option("--max-batch-size", type=int, default=None, help="Default: 8 for a dynamic batch axis, else 0.")
@click.option("--input", "inputs", multiple=True, help="NAME:DTYPE:DIMS (Python, OneFlow, TorchScript models).")
@click.option("--output", "outputs", multiple=True, help="NAME:DTYPE:DIMS (Python, OneFlow, TorchScript models).")
@click.option("--instances", type=int, default=1, show_default=True)
@click.option("--instance-kind", type=click.Choice(INSTANCE_KINDS), default="auto", show_default=True)
@click.option("--dynamic-batching", is_flag=True)
@click.option("--preferred-batch-size", "preferred", type=int, multiple=True)
@click.option("--queue-delay-us", type=int, default=0, show_default=True)
@click.option("--version-policy", default=None, help="latest:N, all, or specific:1,2")
@click.option("--warmup", is_flag=True, help="Warm the model up with zeros while it loads.")
@click.option("--tensorrt-fp16", is_flag=True, help="onnxruntime_onnx on the Orin: TensorRT accelerator in FP16.")
@click.option("--execution-env", default=None, help="Python models: packed environment (EXECUTION_ENV_PATH).")
@click.option("--extra-file", "extra_files", multiple=True, type=click.Path(path_type=Path),
              help="Another file for the version folder (Python models' helpers, labels).")
@click.option("--parameter", "parameters", multiple=True, help="KEY=VALUE for the config's parameters (repeatable).")
@click.option("--decoupled", is_flag=True, help="Python models that send any number of responses per request.")
@click.option("--sequence", is_flag=True,
              help="A stateful model: a sequence batcher feeding START, END (INT32 0/1) and CORRID inputs.")
@click.option("--sequence-strategy", type=click.Choice(SEQUENCE_STRATEGIES), default=None,
              help="With --sequence (default direct).")
@click.option("--sequence-idle-us", type=int, default=None,
              help="With --sequence: drop a sequence idle this long (default 10 s).")
@click.option("--correlation-type", type=click.Choice(CORRELATION_TYPES), default=None,
              help="With --sequence: CORRID's type (default UINT64).")
def add(artifact, repository, create, name, runtime, version, max_batch_size, inputs, outputs, instances,
        instance_kind, dynamic_batching, preferred, queue_delay_us, version_policy, warmup, tensorrt_fp16,
        execution_env, extra_files, parameters, decoupled, sequence, sequence_strategy, sequence_idle_us,
        correlation_type) -> None:
    """Place ARTIFACT (.plan, .onnx, .pt, .py, or a OneFlow folder) as a new model, config derived from it."""
    repository = _repository(repository, create)
    options = ModelOptions(
        max_batch_size=max_batch_size, instance_count=instances, instance_kind=instance_kind,
        dynamic_batching=dynamic_batching, preferred_batch_sizes=preferred, max_queue_delay_us=queue_delay_us,
        version_policy=VersionPolicy.parse(version_policy) if version_policy else None, warmup=warmup,
        tensorrt_fp16=tensorrt_fp16, execution_env=execution_env, parameters=_parameters(parameters),
        decoupled=decoupled, sequence=_sequence(sequence, sequence_strategy, sequence_idle_us, correlation_type),
    )
    placed = add_model(
        repository, artifact, name=name, runtime=runtime, version=version, options=options,
        inputs=[TensorSpec.parse(t) for t in inputs] or None, outputs=[TensorSpec.parse(t) for t in outputs] or None,
        extra_files=extra_files,
    )
    click.echo(f"placed {placed.name} version {placed.version} as {placed.runtime.value} in {placed.path}")
    if placed.note:
        click.echo(f"runtime: {placed.note}")


@main.command("add-detector")
@click.argument("artifact", type=click.Path(path_type=Path))
@_REPO
@_CREATE
@click.option("--name", default="detection", show_default=True,
              help="The ensemble's name; its steps are NAME_preprocess, NAME_model and NAME_postprocess.")
@click.option("--labels", type=click.Path(path_type=Path), default=None,
              help="Class names: one a line, or a YAML/JSON list (default: the model's Ultralytics metadata).")
@click.option("--head", type=click.Choice(["yolov8", "yolov5", "end2end", "yolox", "efficient_nms", "detr"]),
              default=None, help="The head's kind where the graph cannot tell (default: recognized).")
@click.option("--conf", type=float, default=0.25, show_default=True, help="Score threshold.")
@click.option("--iou", type=float, default=0.7, show_default=True, help="NMS IoU threshold.")
@click.option("--max-det", type=int, default=300, show_default=True, help="Most boxes per image.")
@click.option("--agnostic", is_flag=True, help="NMS across classes (a box suppresses boxes of any class).")
@click.option("--runtime", type=click.Choice(["auto", *(r.value for r in Runtime)]), default="auto",
              show_default=True, help="How the model runs; 'auto' decides ONNX by the server's backends.")
@click.option("--max-batch-size", type=int, default=4, show_default=True)
def add_detector(artifact, repository, create, name, labels, head, conf, iou, max_det, agnostic, runtime,
                 max_batch_size) -> None:
    """Place the detector ARTIFACT (.onnx, or a .plan from edge-convert) with an image step that letterboxes as
    it was trained, a decode + NMS step and the ensemble NAME: encoded image in, boxes, scores, classes and count
    out (class names in its config). All four, or nothing."""
    from orinkit.detect.postprocess import NmsOptions
    from orinkit.detect.repository import build_detection_repository

    repository = _repository(repository, create)
    placed = build_detection_repository(
        repository, artifact, head=head, labels=labels, runtime=runtime, max_batch_size=max_batch_size, name=name,
        options=NmsOptions(conf=conf, iou=iou, max_det=max_det, agnostic=agnostic), progress=_echo)
    click.echo(f"placed the detection ensemble {name} ({placed['model'].runtime.value}) in {repository}")


def _sequence(wanted: bool, strategy, idle_us, correlation_type) -> SequenceBatching | None:
    given = {"--sequence-strategy": strategy, "--sequence-idle-us": idle_us, "--correlation-type": correlation_type}
    if not wanted:
        stray = [flag for flag, value in given.items() if value is not None]
        if stray:
            raise click.UsageError(f"{', '.join(stray)} only apply with --sequence")
        return None
    chosen = {"strategy": strategy, "max_idle_us": idle_us, "correlation_type": correlation_type}
    return SequenceBatching(**{k: v for k, v in chosen.items() if v is not None})


@main.group(cls=OrinkitGroup)
def step() -> None:
    """Add a reusable Python-backend pre/post-processing step."""


@step.command("image-preprocess")
@_REPO
@_CREATE
@click.option("--name", required=True)
@click.option("--width", type=int, default=224, show_default=True)
@click.option("--height", type=int, default=224, show_default=True)
@click.option("--color-order", type=click.Choice(["RGB", "BGR", "GRAY"]), default="RGB", show_default=True,
              help="GRAY: one channel (MNIST-style models).")
@click.option("--scale", type=float, default=1 / 255, show_default=True)
@click.option("--mean", default="0,0,0", show_default=True, help="Per channel (one value with GRAY).")
@click.option("--std", default="1,1,1", show_default=True, help="Per channel (one value with GRAY).")
@click.option("--dtype", type=click.Choice(["FP32", "FP16"]), default="FP32", show_default=True)
@click.option("--interpolation", type=click.Choice(["bilinear", "nearest", "bicubic"]), default="bilinear",
              show_default=True)
@click.option("--max-image-mb", type=float, default=16, show_default=True,
              help="Refuse encoded images larger than this before decoding.")
@click.option("--max-megapixels", type=float, default=25, show_default=True,
              help="Refuse images with more pixels than this, read from the header before decoding.")
@click.option("--max-batch-size", type=int, default=8, show_default=True)
def image_preprocess(repository, create, name, width, height, color_order, scale, mean, std, dtype, interpolation,
                     max_image_mb, max_megapixels, max_batch_size) -> None:
    """Encoded image bytes → resized, normalised CHW tensor (TENSOR) and the original size (ORIGINAL_SIZE)."""
    repository = _repository(repository, create)
    spec = ImagePreprocess(width=width, height=height, color_order=color_order, scale=scale, mean=_floats(mean),
                           std=_floats(std), dtype=dtype, interpolation=interpolation,
                           max_image_bytes=int(max_image_mb * 2**20), max_pixels=int(max_megapixels * 1e6))
    placed = add_step(repository, spec, name=name, max_batch_size=max_batch_size)
    click.echo(f"placed step {placed.name} (image-preprocess) in {placed.path}")


@step.command("topk")
@_REPO
@_CREATE
@click.option("--name", required=True)
@click.option("--k", type=int, default=5, show_default=True)
@click.option("--num-classes", type=int, default=-1, show_default=True)
@click.option("--no-softmax", is_flag=True, help="Rank raw logits instead of softmax probabilities.")
@click.option("--labels", type=click.Path(path_type=Path), default=None, help="One label per line.")
@click.option("--logits-dtype", type=click.Choice(["FP32", "FP16"]), default="FP32", show_default=True)
@click.option("--max-batch-size", type=int, default=8, show_default=True)
def topk(repository, create, name, k, num_classes, no_softmax, labels, logits_dtype, max_batch_size) -> None:
    """Classification logits (LOGITS) → SCORES and CLASS_IDS of the k best classes (and LABELS)."""
    repository = _repository(repository, create)
    spec = TopK(k=k, num_classes=num_classes, softmax=not no_softmax, labels=labels, logits_dtype=logits_dtype)
    placed = add_step(repository, spec, name=name, max_batch_size=max_batch_size)
    click.echo(f"placed step {placed.name} (topk) in {placed.path}")


@step.command("bls")
@click.argument("spec", type=click.Path(path_type=Path))
@_REPO
def bls(spec, repository) -> None:
    """A Python (BLS) model that calls the models of SPEC (an ensemble spec) in order; a step with
    `stop_if_empty: TENSOR` ends the chain when that output comes back empty."""
    from orinkit.repo.bls import BlsSpec, add_bls

    placed = add_bls(_repository(repository, False), BlsSpec.load(spec))
    steps = len(json.loads(placed.config.parameters["chain"].string_value)["steps"])
    click.echo(f"placed BLS model {placed.name} ({steps}"
               f" steps) in {placed.path}")


@main.command()
@click.argument("spec", type=click.Path(path_type=Path))
@_REPO
def ensemble(spec, repository) -> None:
    """Write the ensemble described by the YAML file SPEC, checked against its steps' configs."""
    repository = _repository(repository, False)
    path = add_ensemble(repository, EnsembleSpec.load(spec))
    click.echo(f"placed ensemble {path.name} in {path}")


def _positional_repository(given: Path | None, option: Path | None) -> Path:
    if given is not None and option is not None and given != option:
        raise RepoError(f"two repositories given: {given} and --repo {option}", hint="give one of them")
    repository = given or option
    if repository is None:
        raise RepoError("no repository given", hint="edge-repo check REPOSITORY (or --repo REPOSITORY)")
    return repository


@main.command()
@click.argument("repository_arg", metavar="[REPOSITORY]", required=False, type=click.Path(path_type=Path))
@click.option("--repo", "repository", type=click.Path(path_type=Path), default=None,
              help="The model repository folder (or give it as the argument).")
@click.option("--backend-directory", type=click.Path(path_type=Path), default=None,
              help="Check every model's backend against this folder (default: the server orinkit finds).")
@click.option("--python", default=None,
              help="Check Python models' imports for this interpreter (default: the one the server's stub runs).")
@click.option("--portable", is_flag=True,
              help="Judge only what holds on any server: skip this machine's backends and Python (a repository "
                   "made here for the Orin).")
@click.option("--disable-auto-complete-config", "no_auto_complete", is_flag=True,
              help="Judge as a server started with this flag: every model needs a complete config.pbtxt.")
@click.option("--json", "as_json", is_flag=True, help="Findings as JSON on standard output.")
def check(repository_arg, repository, backend_directory, python, portable, no_auto_complete, as_json) -> None:
    """Find what tritonserver would refuse, without starting one. Exits 4 when there are errors."""
    repository = _positional_repository(repository_arg, repository)
    if not repository.is_dir():
        raise RepoError(f"the repository folder {repository} does not exist", hint="check the path")
    if portable and (backend_directory or python):
        raise RepoError("--portable skips the backend and Python checks that --backend-directory/--python ask for",
                        hint="give one or the other")
    if not portable and (backend_directory is None or python is None):
        found_backends, found_python, note = server_defaults()
        backend_directory = backend_directory or found_backends
        python = python or found_python
        if note:
            _echo(note)
    findings = check_repository(repository, backend_directory=backend_directory, python=python,
                                auto_complete=not no_auto_complete)
    if as_json:
        click.echo(findings_json(findings))
    else:
        for finding in findings:
            click.echo(str(finding))
    errors = sum(f.severity == "error" for f in findings)
    warnings = sum(f.severity == "warning" for f in findings)
    notes = len(findings) - errors - warnings
    summary = (f"{errors} error(s), {warnings} warning(s)" + (f", {notes} note(s)" if notes else "")
               + f" in {repository}")
    if errors:
        raise CheckFailedError(summary, findings=findings, hint="fix the errors listed above")
    _echo(summary)


@main.command()
@click.argument("name")
@click.argument("artifact", type=click.Path(path_type=Path))
@_REPO
@_SERVER
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds to wait for READY.")
def deploy(name, artifact, repository, server, timeout) -> None:
    """Add ARTIFACT as the next version of NAME; with --url, load it and wait until it is READY."""
    with _reaching(server):
        result = deploy_version(repository, name, artifact, server=server, timeout_s=timeout, progress=_echo)
    click.echo(f"deployed {result.name} version {result.version}"
               + (f"; serving {list(result.serving)}" if server else ""))


@main.command("rollback")
@click.argument("name")
@_REPO
@_SERVER
@click.option("--timeout", type=float, default=300.0, show_default=True)
def rollback_command(name, repository, server, timeout) -> None:
    """Take NAME's latest version out of service so that the previous one serves again."""
    with _reaching(server):
        result = rollback(repository, name, server=server, timeout_s=timeout, progress=_echo)
    click.echo(f"rolled {result.name} back from version {result.rolled_back} to {result.now_latest}")


@main.command("load")
@click.argument("name")
@_REPO
@_local_server("gRPC address of a server in --model-control-mode explicit.")
@click.option("--timeout", type=float, default=300.0, show_default=True)
def load_command(name, repository, server, timeout) -> None:
    """Load NAME on the server, putting back versions a start set aside; what loads is recorded as serving."""
    with _reaching(server):
        result = load_versions(repository, name, server=server, timeout_s=timeout, progress=_echo)
    click.echo(f"{result.name}: serving {list(result.serving)}"
               + (f"; put back {list(result.reinstated)}" if result.reinstated else "")
               + (f"; set aside again {list(result.refused)}" if result.refused else ""))


@main.command("unload")
@click.argument("name")
@_local_server("gRPC address of a server in --model-control-mode explicit.")
def unload_command(name, server) -> None:
    """Unload NAME from the server (its files stay; edge-repo load brings it back)."""
    with _reaching(server), RepositoryAPI(server) as api:
        api.unload(name)
        api.wait_unloaded(name, 60.0)
    click.echo(f"unloaded {name} from {server}")


@main.command("index")
@_local_server("gRPC address of the server.")
@click.option("--json", "as_json", is_flag=True)
def index_command(server, as_json) -> None:
    """Every model the server's repository holds, with its versions' states (loaded or not)."""
    _print_states(server, as_json)


def _print_states(server, as_json, *, counts: bool = False) -> None:
    with _reaching(server), RepositoryAPI(server) as api:
        states = api.index()
        # Read after the index: a version loaded in between has counts and no state, and is left out.
        statistics = api.statistics() if counts else {}
    rows = []
    for s in states:
        row = asdict(s)
        if counts:
            stats = statistics.get((s.name, s.version))
            row.update({key: getattr(stats, key) if stats else None for key in _COUNTS})
        rows.append(row)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        line = f"{row['name']:24} {row['version'] or '-':>7}  {row['state'] or 'NOT LOADED':12}"
        if counts:
            line += (f" {row['success_count']:>9} ok {row['failure_count']:>7} failed {row['inference_count']:>9} "
                     "inferences" if row["success_count"] is not None else f" {'':45}")
        click.echo(f"{line} {row['reason']}".rstrip())


# Cumulative since each version loaded: edge-bench, or Client.statistics(), measures a change over a run.
_COUNTS = ("success_count", "failure_count", "inference_count", "execution_count")


@main.command()
@_local_server("gRPC address of the server.")
@click.option("--json", "as_json", is_flag=True)
def status(server, as_json) -> None:
    """Models, versions and their states on a running server, with each loaded version's successful and failed
    requests and inferences since it loaded."""
    _print_states(server, as_json, counts=True)


def _gates(items: tuple[str, ...], rtol: float, atol: float) -> dict:
    from orinkit.fleet.push import GateFile

    gates = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise RepoError(f"--gate '{item}' is not NAME=FILE.npz", hint="write e.g. --gate net=golden.npz")
        gates[name] = GateFile(Path(path), rtol=rtol, atol=atol)
    return gates


@main.command("push")
@click.argument("repository", type=click.Path(path_type=Path))
@click.argument("url", metavar="s3://BUCKET/PREFIX")
@click.option("--model", "models", multiple=True, help="Push only this model (repeatable; default: every model).")
@click.option("--version", "version", type=int, default=None, help="Push only this version of each model.")
@click.option("--endpoint-url", default=None,
              help="The S3 endpoint, e.g. http://minio:9000 (default: AWS_ENDPOINT_URL, else AWS).")
@click.option("--gate", "gates", multiple=True, metavar="NAME=FILE.npz",
              help="A health gate for model NAME: an .npz with arrays 'input:<INPUT>' (the golden input) and "
                   "'output:<OUTPUT>' (the answer expected); each device checks it before serving the version.")
@click.option("--rtol", type=float, default=1e-3, show_default=True, help="The gates' relative tolerance.")
@click.option("--atol", type=float, default=1e-5, show_default=True, help="The gates' absolute tolerance.")
@click.option("--unproven", is_flag=True,
              help="Also push versions no server has loaded here (by default only versions edge-repo deploy "
                   "--url or edge-repo load have loaded READY are pushed).")
def push(repository, url, models, version, endpoint_url, gates, rtol, atol, unproven) -> None:
    """Upload model versions of REPOSITORY to the bucket, immutably: files first (sha256 as they stream), the
    manifest last. A version already there is never overwritten (the same files again: nothing to do; other
    files: exit 4, push a new version number instead). Credentials come from boto3's standard configuration
    (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, or a profile)."""
    from orinkit.fleet.bucket import Bucket
    from orinkit.fleet.push import push_repository

    bucket = Bucket(url, endpoint_url=endpoint_url)
    manifests = push_repository(repository, bucket, models=models or None,
                                versions=[version] if version is not None else None,
                                gates=_gates(gates, rtol, atol), unproven=unproven, progress=_echo)
    for manifest in manifests:
        gate = " with gate" if manifest.gate else ""
        click.echo(f"{manifest.model} version {manifest.version}: {len(manifest.files)} files{gate} in {bucket.url}")


if __name__ == "__main__":
    main()
