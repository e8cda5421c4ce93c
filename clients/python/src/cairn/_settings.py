"""The specs of ``/settings/retention`` (see :mod:`cairn._specs`): how long the
tenant's ended executions and their checkpoints are kept."""

from __future__ import annotations

from typing import Any

from . import models
from ._specs import Spec, model
from ._transport import call


def settings_retention(_: Any) -> Spec[models.Retention]:
    """The retention settings, with what the plan makes of them."""
    return Spec(call("GET", "/settings/retention"), model(models.Retention))


def settings_set_retention(
    _: Any,
    *,
    executions_days: int | None = None,
    checkpoints: models.CheckpointRetention = "all",
    checkpoints_days: int | None = None,
) -> Spec[models.Retention]:
    """Replaces the retention settings (what is left out takes its default): ended
    executions kept ``executions_days`` (``None``: as long as the plan allows); their
    checkpoints ``"all"`` kept, ``"keep_latest"`` (only the one the execution stands at,
    from its end), or ``"days"`` (the others ``checkpoints_days`` after the end). They
    apply to executions that end from now on. ``ValidationFailed`` names the field the
    plan or the rules refuse."""
    body: dict[str, Any] = {"executions_days": executions_days, "checkpoints": checkpoints}
    if checkpoints_days is not None:
        body["checkpoints_days"] = checkpoints_days
    return Spec(call("PUT", "/settings/retention", body=body), model(models.Retention))
