"""The Triton model repository: configs derived from the model, Python-backend steps, ensembles and BLS chains,
a pre-deploy check, and deploys with rollback.

>>> from orinkit.repo import add_model, add_step, add_ensemble, ImagePreprocess
>>> add_model("models", "resnet.onnx", name="classifier")  # doctest: +SKIP

Importing it loads no conversion or server code; a server is looked up only where a call needs one (to pick the
runtime of an ONNX model, to check with its backends).
"""

from orinkit.repo.add import PlacedModel, add_model
from orinkit.repo.bls import BlsSpec, add_bls
from orinkit.repo.check import Finding, check_repository
from orinkit.repo.config_change import ConfigChange, change_config, revert_config
from orinkit.repo.configs import Runtime
from orinkit.repo.deploy import DeployResult, LoadResult, RollbackResult, deploy_version, load_versions, rollback
from orinkit.repo.ensemble import EnsembleSpec, EnsembleStep, add_ensemble
from orinkit.repo.errors import (
    ArtifactError,
    CheckFailedError,
    ConfigParseError,
    DeployBusyError,
    DeployError,
    DeployLoadError,
    EnsembleError,
    ModelExistsError,
    RepoError,
    ServerAPIError,
    SignatureError,
    UnsupportedArtifactError,
    VendoringError,
)
from orinkit.repo.options import ModelOptions, SequenceBatching, VersionPolicy
from orinkit.repo.pbtxt import format_config, parse_config, read_config, write_config
from orinkit.repo.python_model import PythonModelSpec, add_python_model, model_source
from orinkit.repo.server_api import RepositoryAPI
from orinkit.repo.signature import Signature, TensorSpec
from orinkit.repo.steps import ImagePreprocess, TopK, add_step

__all__ = [
    "ArtifactError",
    "BlsSpec",
    "ConfigChange",
    "CheckFailedError",
    "ConfigParseError",
    "DeployBusyError",
    "DeployError",
    "DeployLoadError",
    "DeployResult",
    "EnsembleError",
    "EnsembleSpec",
    "EnsembleStep",
    "Finding",
    "ImagePreprocess",
    "LoadResult",
    "ModelExistsError",
    "ModelOptions",
    "SequenceBatching",
    "PlacedModel",
    "PythonModelSpec",
    "RepoError",
    "RepositoryAPI",
    "RollbackResult",
    "Runtime",
    "ServerAPIError",
    "Signature",
    "SignatureError",
    "TensorSpec",
    "TopK",
    "UnsupportedArtifactError",
    "VendoringError",
    "VersionPolicy",
    "add_bls",
    "add_ensemble",
    "add_model",
    "add_python_model",
    "add_step",
    "change_config",
    "check_repository",
    "deploy_version",
    "format_config",
    "load_versions",
    "model_source",
    "parse_config",
    "read_config",
    "revert_config",
    "rollback",
    "write_config",
]
