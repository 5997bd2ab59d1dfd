"""Records written by earlier versions, read by today's code: one place for every such rule.

Configs are flat JSON records (:func:`rlkit.core.config.composed_to_dict`), so a field added
since reads as its default; only a default that changed needs a rule here, so a run continues
as it started. Checkpoint states written before variants were plug-ins keep HP3O's stored
trajectories under their old key.
"""

from __future__ import annotations

from typing import Any

SAMPLING_BEFORE_SWITCH = "topup"
"""HP3O's per-epoch sampling on Gymnasium episodes before ``hp3o_sampling`` existed (the authors'
form is today's default); the RLHF trainer never sampled within responses."""


def migrate_config(record: dict[str, Any], trainer: str) -> dict[str, Any]:
    """A stored flat config of a ``gym`` or ``rlhf`` run as today's fields read it (the record
    itself is left unchanged)."""
    out = dict(record)
    if trainer == "gym" and out.get("hp3o") and "hp3o_sampling" not in out:
        out["hp3o_sampling"] = SAMPLING_BEFORE_SWITCH
    return out


def variant_meta(state: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint's per-variant JSON (``variants``; earlier Gym checkpoints: ``hp3o_buffer``,
    earlier RLHF checkpoints: ``hp3o``)."""
    if "variants" in state:
        return state["variants"]
    old = state.get("hp3o_buffer", state.get("hp3o"))
    return {"hp3o": old} if old is not None else {}
