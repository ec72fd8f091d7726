"""Errors of ``orinkit.repo``: building, checking and deploying a Triton model repository.

::

    RepoError
    ├── ConfigParseError        a config.pbtxt that Triton's schema rejects (exit 4)
    ├── ArtifactError           a model file that cannot be read or described (exit 4)
    │   └── UnsupportedArtifactError  a file kind orinkit cannot place (exit 4)
    ├── SignatureError          declared or derived inputs/outputs that cannot work (exit 4)
    ├── EnsembleError           a step, tensor, dtype or shape that does not line up (exit 4)
    ├── ModelExistsError        a model or version is already there (exit 4)
    ├── CheckFailedError        `check` found errors (exit 4)
    ├── DeployError             a deploy or rollback that was refused: unknown model, a file that does not fit (exit 4)
    │   ├── DeployLoadError     the server did not load the new version; it was withdrawn (exit 6)
    │   └── DeployBusyError     another deploy of the same model holds its lock (exit 5)
    ├── ServerAPIError          the server's repository API refused or failed (exit 6)
    └── VendoringError          a Python-backend model's source cannot be made self-contained (exit 1)
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, EXIT_BUSY, EXIT_ERROR, EXIT_SERVER, OrinkitError


class RepoError(OrinkitError):
    """Base of every error about a model repository."""

    exit_code = EXIT_BAD_INPUT


class ConfigParseError(RepoError):
    pass


class ArtifactError(RepoError):
    pass


class UnsupportedArtifactError(ArtifactError):
    pass


class SignatureError(RepoError):
    pass


class EnsembleError(RepoError):
    """``code`` names the kind of mismatch (unknown-model, unknown-tensor, unmapped-input, dtype, shape,
    duplicate-tensor, cycle, unproduced-output, batch, spec) so that `check` can report it as a finding."""

    def __init__(self, message: str, *, code: str = "spec", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code


class ModelExistsError(RepoError):
    pass


class CheckFailedError(RepoError):
    def __init__(self, message: str, *, findings=(), hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.findings = list(findings)


class DeployError(RepoError):
    pass


class DeployLoadError(DeployError):
    exit_code = EXIT_SERVER


class DeployBusyError(DeployError):
    exit_code = EXIT_BUSY


class ServerAPIError(RepoError):
    exit_code = EXIT_SERVER


class VendoringError(RepoError):
    """A module shipped as a Python-backend model cannot be inlined into one model.py (a defect in its source)."""

    exit_code = EXIT_ERROR
