"""Model providers and model ids: the configuration, clean ids, localisation.

Pure and small: :func:`load_provider_config` reads ``$OMNIGENT_HOME/config.yaml``
(``providers:`` of kinds ``key``, ``gateway`` and ``subscription``);
:func:`check_model_id` and :func:`localise_model` are the rules a model asked for at
dispatch goes through (with the harness registry's family guard between them);
:func:`list_models` is what ``sys_list_models`` answers. See ``docs/subagents.md``.
"""

from ._catalog import Worker, list_models
from ._config import (
    CONFIG_FILE,
    Provider,
    ProviderConfig,
    ProviderKind,
    load_provider_config,
    parse_provider_config,
)
from ._models import (
    MAX_MODEL_ID,
    canonical_spelling,
    check_model_id,
    family_of,
    localise_model,
)

__all__ = [
    "CONFIG_FILE",
    "MAX_MODEL_ID",
    "Provider",
    "ProviderConfig",
    "ProviderKind",
    "Worker",
    "canonical_spelling",
    "check_model_id",
    "family_of",
    "list_models",
    "load_provider_config",
    "localise_model",
    "parse_provider_config",
]
