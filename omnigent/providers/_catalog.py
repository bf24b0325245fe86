"""What ``sys_list_models`` answers: per worker, the models it can be asked to run.

Pure: the caller gathers, for the calling agent (``self``) and each of its sub-agents,
what the harness registry knows about the worker's harness (:class:`Worker`), and the
configuration decides the rest. Every id in a worker's list can be passed verbatim as
``sys_session_send`` ``args.model`` to that worker: the list is its provider's, filtered
to the family a single-vendor harness runs. Nothing is fetched from the network, so the
lists are what the configuration says (``verified: false``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from ._config import ProviderConfig
from ._models import family_of

__all__ = ["Worker", "list_models"]


@attrs.frozen
class Worker:
    """One worker as the catalog needs it.

    Attributes:
        name: ``self`` or the sub-agent's name.
        harness: its canonical harness name.
        model: the model its spec names, if any.
        base_url: its ``executor.config.base_url``, if any.
        guard: its harness's model guard (the refusal of a model, or ``None``);
            ``None``: it runs any model.
        examples: models its harness names for listings (when no provider lists any).
        accepts_model: whether its harness applies a per-session model.
        unavailable: why its harness cannot start on this machine, if it cannot.
    """

    name: str
    harness: str
    model: str | None = None
    base_url: str | None = None
    guard: Callable[[str], str | None] | None = attrs.field(default=None, eq=False)
    examples: tuple[str, ...] = ()
    accepts_model: bool = True
    unavailable: str | None = None

    def runs(self, model: str) -> bool:
        return self.guard is None or self.guard(model) is None


def _family_label(model: str) -> str:
    return family_of(model)


def _row(config: ProviderConfig, worker: Worker) -> dict[str, Any]:
    """One worker's row, the original's shape: ``{source, verified, models, note}``.

    Nothing is fetched, so a list is ``static`` (the configuration's, the harness's
    names, or the spec's own model: the ``note`` says which) and never verified;
    ``none`` with the reason in ``note`` when the worker can be asked for no model.
    """
    provider = config.for_worker(worker.harness, worker.base_url)

    def row(models: list[str], note: str) -> dict[str, Any]:
        return {
            "source": "static" if models else "none",
            "verified": False,
            "models": [{"id": m, "family": _family_label(m)} for m in models],
            "note": note,
        }

    if worker.unavailable is not None:
        return row([], worker.unavailable)
    if not worker.accepts_model:
        return row(
            [],
            f"harness {worker.harness!r} cannot apply a model chosen at dispatch; it runs "
            "the model its spec names",
        )
    if provider is not None and provider.models:
        usable = [m for m in provider.models if worker.runs(m)]
        note = f"from provider {provider.name!r} in {config.source or 'the configuration'}"
        if len(usable) < len(provider.models):
            note += f" (only the models harness {worker.harness!r} runs)"
        return row(usable, note)
    if worker.examples:
        known = list(dict.fromkeys((*((worker.model,) if worker.model else ()), *worker.examples)))
        return row(known, f"the models harness {worker.harness!r} names (no provider lists any)")
    if worker.model is not None:
        why = (
            "no provider lists models for it"
            if provider is None
            else f"provider {provider.name!r} lists no models"
        )
        return row([worker.model], f"only the spec's own model: {why}")
    return row(
        [],
        "no model is known for this worker: name one in its spec, or list a provider's "
        "models in config.yaml",
    )


def list_models(
    config: ProviderConfig,
    workers: Iterable[Worker],
    *,
    only: Iterable[str] | None = None,
    model_ids: Iterable[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """``{worker name: {source, verified, models, note}}`` for each worker (those in
    ``only``, if given), each ``models`` list cut to ``model_ids`` if given."""
    wanted = set(only) if only is not None else None
    keep = set(model_ids) if model_ids is not None else None
    out: dict[str, dict[str, Any]] = {}
    for worker in workers:
        if wanted is not None and worker.name not in wanted:
            continue
        row = _row(config, worker)
        if keep is not None:
            row["models"] = [m for m in row["models"] if m["id"] in keep]
        out[worker.name] = row
    return out
