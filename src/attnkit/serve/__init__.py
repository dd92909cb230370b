"""The attention explorer: a local web page and JSON API (``attnkit serve``)."""

from attnkit.serve.app import create_app, create_app_for_service
from attnkit.serve.model_service import CheckpointLoadError, InputError, ModelService

__all__ = [
    "CheckpointLoadError",
    "InputError",
    "ModelService",
    "create_app",
    "create_app_for_service",
]
