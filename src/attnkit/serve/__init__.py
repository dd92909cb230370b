"""The attention explorer: a local web page and JSON API (``attnkit serve``) over a
translator (``ModelService``) or a language model (``LMService``)."""

from attnkit.serve.app import create_app, create_app_for_service, load_service
from attnkit.serve.lm_service import LMService
from attnkit.serve.model_service import CheckpointLoadError, InputError, ModelService

__all__ = [
    "CheckpointLoadError",
    "InputError",
    "LMService",
    "ModelService",
    "create_app",
    "create_app_for_service",
    "load_service",
]
