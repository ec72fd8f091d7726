"""``edge-repo check``: what tritonserver would refuse, found without a server.

Each :class:`Finding` names its severity, model, file, the problem and the fix. Codes are stable (tests and
scripts match on them).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from orinkit.repo import autocomplete
from orinkit.repo.artifacts import oneflow_layout_problem
from orinkit.repo.check_io import check_declared_dims, check_io
from orinkit.repo.configs import Runtime, runtime_of, signature_of
from orinkit.repo.ensemble import EnsembleSpec, EnsembleStep, build_ensemble_config
from orinkit.repo.errors import EnsembleError, RepoError, SignatureError
from orinkit.repo.journal import QUARANTINED_PREFIX, read_journal, to_set_aside
from orinkit.repo.layout import model_dirs, version_folders
from orinkit.repo.pbtxt import CONFIG_NAME, read_config
from orinkit.repo.signature import dims_compatible

ROLLED_BACK_PREFIX = "rolled-back-"


@dataclass(frozen=True)
class Finding:
    # "error": the server would refuse or misbehave; "warning": likely a mistake; "info": what the server will
    # complete or decide by itself (nothing to fix)
    severity: str
    code: str
    model: str
    file: str  # relative to the repository
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.severity:7} {self.model}: {self.file}: {self.problem} (fix: {self.fix})"


class _Report:
    def __init__(self, repository: Path) -> None:
        self.repository = repository
        self.findings: list[Finding] = []

    def add(self, severity: str, code: str, model: str, path: Path, problem: str, fix: str) -> None:
        try:
            file = str(path.relative_to(self.repository))
        except ValueError:
            file = str(path)
        self.findings.append(Finding(severity, code, model, file, problem, fix))

    def error(self, *args) -> None:
        self.add("error", *args)

    def warning(self, *args) -> None:
        self.add("warning", *args)

    def info(self, *args) -> None:
        self.add("info", *args)


def server_defaults() -> tuple[Path | None, str | None, str]:
    """The backend folder and the Python of the server orinkit finds (``edge-serve``'s own choice), for a check
    that judges by what that server will do; (None, None, why) when there is no server here."""
    import sys

    from orinkit.core.errors import OrinkitError

    python = Path(sys.prefix) / "bin" / "python3"  # the stub runs the first python3 on PATH: the venv's
    try:
        from orinkit.server import backend_directory, locate_tritonserver

        backends = backend_directory(locate_tritonserver())
    except OrinkitError as exc:
        return None, str(python) if python.exists() else sys.executable, (
            f"backends not checked: {exc.message}")
    return backends, str(python) if python.exists() else sys.executable, ""


def check_repository(
    repository: str | os.PathLike[str],
    *,
    backend_directory: str | os.PathLike[str] | None = None,
    python: str | None = None,
    auto_complete: bool = True,
) -> list[Finding]:
    """Every finding for ``repository``. ``backend_directory``: check each model's backend is there.
    ``python``: check that Python models' imports resolve for that interpreter (the stub's).
    ``auto_complete``: judge as a server that completes configurations (its default); False for one started with
    ``--disable-auto-complete-config`` (or ``--strict-model-config=true``)."""
    repository = Path(repository)
    report = _Report(repository)
    if not repository.is_dir():
        report.error("no-repository", "-", repository, "the repository folder does not exist",
                     "create it or fix the path")
        return report.findings
    configs: dict[str, mc.ModelConfig] = {}
    unreadable: set[str] = set()
    # Models whose inputs/outputs the backend completes at load time in a way check cannot read: an ensemble over
    # them is not judged (it would only guess).
    io_unknown: set[str] = set()
    for folder in model_dirs(repository):
        config = _check_config(report, folder, auto_complete)
        if config is not None:
            configs[folder.name] = config
        else:
            unreadable.add(folder.name)
    for name, config in configs.items():
        if auto_complete and not _complete_io(report, repository / name, config):
            io_unknown.add(name)
    for name, config in configs.items():
        folder = repository / name
        check_declared_dims(report, folder, config)
        _check_versions(report, folder, config)
        runtime = runtime_of(config)
        if config.platform == "ensemble":
            # A step whose own config is broken is reported there; judging the flow without it would only echo.
            steps = {s.model_name for s in config.ensemble_scheduling.step}
            if steps & io_unknown and not steps & unreadable:
                report.info("ensemble-unchecked", name, folder / CONFIG_NAME,
                            f"the flow is not checked: {', '.join(sorted(steps & io_unknown))} get their inputs "
                            "and outputs at load time", "none needed; load it on a server to be sure")
            elif not steps & unreadable:
                _check_ensemble(report, folder, config, configs)
            continue
        if runtime is None:
            if config.backend and backend_directory is not None:
                if not (Path(backend_directory) / config.backend).is_dir():
                    report.error("backend-missing", name, folder / CONFIG_NAME,
                                 f"the backend '{config.backend}' is not in {backend_directory}",
                                 "install that backend, or fix the config's backend")
                continue  # a backend orinkit does not know, but the server has: it judges the files itself
            report.error("unknown-runtime", name, folder / CONFIG_NAME, "the config names no platform or backend "
                         "orinkit knows", "set backend (python, onnxruntime, tensorrt, pytorch) or platform")
            continue
        _check_model_files(report, folder, config, runtime, auto_complete)
        _check_labels(report, folder, config)
        if backend_directory is not None and not (Path(backend_directory) / runtime.backend).is_dir():
            report.error("backend-missing", name, folder / CONFIG_NAME,
                         f"the backend '{runtime.backend}' is not in {backend_directory}",
                         "install that backend, or place the model with a runtime the server has")
        if runtime.backend == "python":
            _check_python_models(report, folder, config, python)
    return report.findings


def _label_count(path: Path) -> int:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return len(lines)


def _check_labels(report: _Report, folder: Path, config: mc.ModelConfig) -> None:
    """Labels files against the class counts they name: Triton's label_filename, and a topk step's labels.txt."""
    for output in config.output:
        if not output.label_filename:
            continue
        path = folder / output.label_filename
        if not path.is_file():
            report.error("labels-missing", folder.name, folder / CONFIG_NAME,
                         f"output '{output.name}' names label_filename '{output.label_filename}', which is not in "
                         "the model folder", f"put {output.label_filename} beside config.pbtxt")
        elif output.dims and output.dims[-1] > 0 and _label_count(path) != output.dims[-1]:
            report.error("labels-count", folder.name, path, f"{_label_count(path)} labels for output "
                         f"'{output.name}' of {output.dims[-1]} classes", "give one label per class, in order")
    logits = next((t for t in config.input if t.name == "LOGITS"), None)
    if logits is None or not logits.dims or logits.dims[-1] <= 0:
        return
    for _, version in sorted(version_folders(folder).items()):
        labels = version / "labels.txt"
        if labels.is_file() and _label_count(labels) != logits.dims[-1]:
            report.error("labels-count", folder.name, labels, f"{_label_count(labels)} labels for LOGITS of "
                         f"{logits.dims[-1]} classes", "give one label per class, in class-id order")


def _check_config(report: _Report, folder: Path, auto_complete: bool) -> mc.ModelConfig | None:
    """The config as the server completes it before loading (name, backend, platform, default_model_filename)."""
    path = folder / CONFIG_NAME
    if not path.is_file() and not auto_complete:
        report.error("config-missing", folder.name, path, "no config.pbtxt, and the server completes none "
                     "(--disable-auto-complete-config)", "write one (edge-repo add derives it from the model file)")
        return None
    try:
        config = read_config(path) if path.is_file() else mc.ModelConfig()
    except RepoError as exc:
        report.error("config-invalid", folder.name, path, exc.message, exc.hint or "fix the config")
        return None
    if config.name and config.name != folder.name:
        report.error("name-mismatch", folder.name, path, f"the config names the model '{config.name}'",
                     f"set name: \"{folder.name}\" or rename the folder")
    problem = autocomplete.complete_backend_fields(config, folder)
    if problem is not None:
        if path.is_file():
            report.error("unknown-runtime", folder.name, path, problem,
                         "set backend (python, onnxruntime, tensorrt, pytorch) or platform")
        else:
            report.error("config-missing", folder.name, path, f"no config.pbtxt, and {problem}",
                         "write one (edge-repo add derives it from the model file), or put the model file in "
                         "version 1 under its usual name")
        return None
    if not path.is_file():
        report.info("config-completed", folder.name, folder, f"no config.pbtxt: the server completes one "
                    f"(backend '{config.backend or config.platform}', from {config.default_model_filename})",
                    "none needed; write one to pin inputs, outputs and batching")
    return config


def _complete_io(report: _Report, folder: Path, config: mc.ModelConfig) -> bool:
    """Complete ``config`` as its backend will at load time; False where check cannot know the result."""
    if config.backend == "python":
        return _complete_python(report, folder, config)
    if config.backend in autocomplete.IO_FROM_MODEL_FILE and not (config.input and config.output):
        report.info("io-completed", folder.name, folder / CONFIG_NAME, f"the {config.backend} backend completes "
                    f"the missing inputs/outputs (and max_batch_size) from {config.default_model_filename}",
                    "none needed; declare them to pin names and shapes")
        return False
    return True


def _complete_python(report: _Report, folder: Path, config: mc.ModelConfig) -> bool:
    versions = version_folders(folder)
    model = versions[max(versions)] / config.default_model_filename if versions else None
    try:
        tree = ast.parse(model.read_text(encoding="utf-8")) if model is not None and model.is_file() else None
    except (SyntaxError, ValueError, OSError):
        tree = None  # _check_python_models reports it
    found = autocomplete.python_auto_complete(tree) if tree is not None else None
    if found is None:
        return True
    for problem in autocomplete.apply_python_auto_complete(config, found):
        report.error("python-auto-complete", folder.name, model, problem,
                     "make the config agree with auto_complete_config, or leave the field out of the config")
    report.info("io-completed", folder.name, model, "auto_complete_config completes the config at load time" +
                ("" if found.resolved else " (with values check cannot read)"),
                "none needed; run the server without --disable-auto-complete-config")
    return found.resolved


def _check_versions(report: _Report, folder: Path, config: mc.ModelConfig) -> None:
    versions = version_folders(folder)
    if not versions:
        ensemble = config.platform == "ensemble"
        what = "an ensemble needs an (empty) version folder too" if ensemble else "Triton loads none"
        report.error("no-version", folder.name, folder, f"no numeric version folder: {what}",
                     f"create {folder.name}/1/" + ("" if config.platform == "ensemble" else " with the model file"))
    for path in folder.iterdir():
        if path.is_dir() and not path.name.isdigit() and not path.name.startswith(
                (".", ROLLED_BACK_PREFIX, QUARANTINED_PREFIX)):
            report.warning("non-numeric-version", folder.name, path, f"folder '{path.name}' is not a number, so "
                           "Triton ignores it", "rename it to a version number, or move it out of the model folder")
    journal = read_journal(folder)
    for number in to_set_aside(folder, journal):
        report.warning("version-unproven", folder.name, versions[number],
                       f"version {number} was placed but no server has loaded it; the next start of the server "
                       "sets it aside while a loaded version remains",
                       f"load it now: edge-repo load {folder.name} --url URL (or deploy with --url)")
    for number, why in sorted(journal.quarantined.items()):
        report.warning("version-quarantined", folder.name, folder / f"{QUARANTINED_PREFIX}{number}",
                       f"version {number} is set aside: {why}",
                       f"edge-repo load {folder.name} --url URL tries it again; delete the folder to drop it")
    if config.version_policy.HasField("specific"):
        missing = [v for v in config.version_policy.specific.versions if v not in versions]
        if missing:
            report.error("policy-version-missing", folder.name, folder / CONFIG_NAME,
                         f"version_policy names versions {missing} that have no folder",
                         "create those folders or fix the policy")


def _check_model_files(report: _Report, folder: Path, config: mc.ModelConfig, runtime: Runtime,
                       auto_complete: bool = False) -> None:
    for number, version in sorted(version_folders(folder).items()):
        _check_version(report, folder, config, runtime, version, label=f"version {number}",
                       auto_complete=auto_complete)


def _check_version(report, folder, config, runtime, version: Path, *, label: str, auto_complete=False) -> None:
    default = config.default_model_filename or runtime.model_file
    required = [default] + {Runtime.PYTHON_ONNXRUNTIME: ["model.onnx"],
                            Runtime.PYTHON_TORCHSCRIPT: ["model.pt"]}.get(runtime, [])
    missing = [name for name in required if not (version / name).exists()]
    if missing:
        named = " (the config's default_model_filename)" if missing[0] == config.default_model_filename != \
            runtime.model_file else ""
        report.error("model-file-missing", folder.name, version, f"{label} lacks {', '.join(missing)}{named}",
                     f"put the model there as {missing[0]}" + (" (OneFlow: a folder)" if runtime is
                                                                Runtime.ONEFLOW else ""))
        return
    if runtime is Runtime.ONEFLOW:
        _check_oneflow_folder(report, folder, version / default, label)
        return
    check_io(report, folder, config, runtime, version, auto_complete=auto_complete)


def _check_oneflow_folder(report: _Report, folder: Path, saved: Path, label: str) -> None:
    """A OneFlow saved model is a folder of files (the graph and its variables) at <version>/model/."""
    problem = oneflow_layout_problem(saved)
    if problem is None:
        return
    entries = [p for p in saved.iterdir() if not p.name.startswith(".")] if saved.is_dir() else []
    where = f"{saved.parent.name}/{saved.name}/"
    if entries and entries[0].is_dir():
        fix = f"move what is in {where}{entries[0].name}/ up into {where}"
    elif saved.is_dir():
        fix = f"copy the saved model's files into {where}"
    else:
        fix = f"copy the folder oneflow.saved_model wrote as {where}"
    report.error("oneflow-layout", folder.name, saved, f"{label}: {problem}", fix)


def check_version_folder(model_dir: Path, version: Path, config: mc.ModelConfig | None = None) -> list[Finding]:
    """Findings for one version folder (staged or placed) against the model's config (``config``: against one
    about to replace it)."""
    report = _Report(model_dir.parent)
    config = config if config is not None else read_config(model_dir / CONFIG_NAME)
    runtime = runtime_of(config)
    if runtime is None:
        report.error("unknown-runtime", model_dir.name, model_dir / CONFIG_NAME, "the config names no platform or "
                     "backend orinkit knows", "set backend or platform")
    else:
        _check_version(report, model_dir, config, runtime, version, label="the new version")
    return report.findings


def _check_ensemble(report: _Report, folder: Path, config: mc.ModelConfig, configs) -> None:
    name = folder.name
    spec = EnsembleSpec(
        name=name,
        steps=tuple(EnsembleStep(s.model_name, dict(s.input_map), dict(s.output_map), s.model_version)
                    for s in config.ensemble_scheduling.step),
        outputs=tuple(t.name for t in config.output),
        max_batch_size=config.max_batch_size,
    )
    try:
        derived = build_ensemble_config(spec, configs)
    except EnsembleError as exc:
        report.error(f"ensemble-{exc.code}", name, folder / CONFIG_NAME, exc.message, exc.hint or "fix the step")
        return
    except SignatureError as exc:  # a step (or the ensemble) declaring no inputs or no outputs: nothing to map
        report.error("ensemble-step-io", name, folder / CONFIG_NAME, f"a step cannot be mapped: {exc.message}",
                     "declare the step model's inputs and outputs in its config")
        return
    declared, actual = signature_of(config), signature_of(derived)
    for kind, have, want in (("input", declared.inputs, actual.inputs), ("output", declared.outputs, actual.outputs)):
        for tensor in have:
            real = next((t for t in want if t.name == tensor.name), None)
            if real is None:
                report.error("ensemble-io", name, folder / CONFIG_NAME,
                             f"ensemble {kind} '{tensor.name}' is not consumed by any step" if kind == "input" else
                             f"ensemble {kind} '{tensor.name}' is not produced", "map it in a step or remove it")
            elif real.dtype != tensor.dtype or not dims_compatible(real.dims, tensor.dims):
                report.error("ensemble-io", name, folder / CONFIG_NAME,
                             f"ensemble {kind} '{tensor.name}' is {tensor.dtype} {list(tensor.dims)} but its step "
                             f"uses {real.dtype} {list(real.dims)}", f"declare it as {real.dtype} {list(real.dims)}")
        if kind == "input":
            for tensor in want:
                if declared.input(tensor.name) is None:
                    report.error("ensemble-io", name, folder / CONFIG_NAME,
                                 f"tensor '{tensor.name}' is consumed but neither produced nor an ensemble input",
                                 "declare it as an ensemble input or produce it in an earlier step")


_STUB_PROVIDED = {"triton_python_backend_utils"}


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError", "Exception") for n in names)


def _imports(source: str) -> set[str]:
    """Top-level modules ``source`` imports, leaving out imports guarded by ``except ImportError`` (they have a
    fallback, as the post-processing orinkit inlines does)."""
    tree = ast.parse(source)
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            guarded.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    modules = set()
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            modules.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module.partition(".")[0])
    return modules - _STUB_PROVIDED


def _check_python_models(report: _Report, folder: Path, config: mc.ModelConfig, python: str | None) -> None:
    """The model file (model.py, or the config's default_model_filename) must parse and define TritonPythonModel;
    with ``python``, its imports must resolve there (unless it brings an environment)."""
    filename = config.default_model_filename or "model.py"
    for _, version in sorted(version_folders(folder).items()):
        model = version / filename
        if not model.is_file():
            continue
        try:
            source = model.read_text(encoding="utf-8")
            modules = _imports(source)
        except SyntaxError as exc:
            report.error("python-syntax", folder.name, model, f"{filename} does not parse: {exc}", "fix the syntax")
            continue
        except ValueError as exc:  # NUL bytes or bad UTF-8: a binary file saved as model.py
            report.error("python-syntax", folder.name, model, f"{filename} is not Python source: {exc}",
                         "put the model's Python source there")
            continue
        if not autocomplete.binds_model_class(ast.parse(source)):
            report.error("python-no-model-class", folder.name, model, f"{filename} defines no class "
                         "TritonPythonModel, which the Python backend loads", "define class TritonPythonModel")
            continue
        if python is None or "EXECUTION_ENV_PATH" in config.parameters:
            continue  # nothing to ask, or the packed environment brings its own packages
        local = {p.stem for p in version.glob("*.py")} | {p.name for p in version.iterdir() if p.is_dir()}
        missing = _unresolvable(sorted(modules - local), python)
        for module in missing:
            report.error("python-import", folder.name, model,
                         f"model.py imports '{module}', which {python} cannot import",
                         "install it for the server's Python, or pack an environment (EXECUTION_ENV_PATH)")


def _unresolvable(modules: list[str], python: str) -> list[str]:
    if not modules:
        return []
    code = ("import importlib.util, json, sys\n"
            "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]))")
    result = subprocess.run([python, "-c", code, *modules], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        return modules
    return json.loads(result.stdout)


def findings_json(findings: list[Finding]) -> str:
    return json.dumps([asdict(f) for f in findings], indent=2)
