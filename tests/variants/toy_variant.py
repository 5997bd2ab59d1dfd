"""A researcher's variant with options of its own, outside rlkit: one module plus a registration,
loaded through ``RLKIT_VARIANTS=tests.variants.toy_variant``. It shrinks every update by
``toy_scale`` (theta_k + scale * (theta* - theta_k)) and counts the updates in its checkpoint state."""

from dataclasses import dataclass

import torch

from rlkit.core.config import validation_enabled
from rlkit.errors import ConfigError
from rlkit.variants import Plug, PlugContext, UpdateHook, Variant, VariantState, register_variant


@dataclass(frozen=True)
class ToyOptions:
    """Toy damping of every update (flags --toy-*)."""

    toy_scale: float = 1.0
    """Fraction of each inner update kept (1: plain PPO)."""

    def __post_init__(self) -> None:
        if validation_enabled():
            self.validate()

    @property
    def enabled(self) -> bool:
        return self.toy_scale != 1.0

    def validate(self) -> None:
        if not 0 < self.toy_scale <= 1:
            raise ConfigError(f"toy_scale must lie in (0, 1], got {self.toy_scale!r}")


class Damp(UpdateHook):
    name = "toy"

    def __init__(self, scale: float, flat) -> None:
        self.scale, self.flat, self.count, self.before = scale, flat, 0, None

    def begin(self) -> None:
        self.before = self.flat.data.clone()

    @torch.no_grad()
    def end(self, stats) -> dict[str, float]:
        assert "losses/approx_kl" in stats  # a hook sees the update's statistics
        self.flat.data.copy_(torch.lerp(self.before, self.flat.data, self.scale))
        self.count += 1
        return {"toy/updates": float(self.count)}

    def state(self) -> VariantState:
        return VariantState({}, {"count": self.count})

    def load_state(self, state: VariantState) -> None:
        self.count = state.json["count"] if state.json else 0


def build(options: ToyOptions, ctx: PlugContext) -> Plug:
    return Plug(hooks=(Damp(options.toy_scale, ctx.flat),))


register_variant(Variant("toy", ToyOptions, lambda o: f"toy{o.toy_scale:g}", builders={"gym": build},
                         presets={"toy-half": {"toy_scale": 0.5, "update_epochs": 2}}))
