"""Language-model actor-critic for token-level environments.

The policy is a ``transformers`` causal LM read through the same :class:`CategoricalHead` as
any discrete policy: its distribution parameters are the next-token logits divided by the
sampling temperature, applied identically when acting and when recomputing log-probs. The
value head reads the same trunk's last hidden state (shared trunk) or a separate critic trunk.
Values are computed after the rollout in one batched pass, not while sampling.

Token layout for a batch of N sequences: prompts left-padded to a common width P, then the
response columns. ``attention_mask`` marks real tokens and positions come from its cumulative
sum, never from ``ids != pad_id``. The transition that emitted the token in column c has its
state at column c - 1, where its logits and value are read.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

from rlkit.core.heads import CategoricalHead


def positions_from_mask(mask: torch.Tensor) -> torch.Tensor:
    """``[B, S]`` position ids for left-padded sequences (0 at each first real token)."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def hidden_at(trunk: nn.Module, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor,
              through: torch.Tensor) -> torch.Tensor:
    """``[n, H]`` the trunk's last hidden states at ``(rows, cols)`` of ``ids``/``mask [B, S]``.

    The trunk runs on columns ``[first real token of any row, max(through) + 1)`` only: a
    rollout grid keeps ``max_new_tokens`` response columns even when every response ended
    earlier, and those columns would otherwise be computed in every pass. Only columns that
    are padding or past every row's last token are dropped, so each kept token sees the same
    context; positions come from the mask. Every pass over a grid derives the window from the
    same token columns (``through``), so the policy's, the reference's and the training passes
    run on the same shapes (the KL is exactly 0 while the policy equals the reference).
    (Grouping rows by length to skip the remaining padding was tried and measured no faster
    on CPU: the weight-gradient matmuls lose more with short groups than the padding costs.)"""
    lo = int(mask.long().argmax(-1).min()) if mask.shape[0] else 0
    hi = int(through.max()) + 1 if through.numel() else lo + 1
    window = mask[:, lo:hi]
    hidden = trunk(input_ids=ids[:, lo:hi], attention_mask=window,
                   position_ids=positions_from_mask(window)).last_hidden_state
    return hidden[rows, cols - lo]


@dataclass
class GenerationState:
    """KV cache and bookkeeping of a batched rollout (one cache row per sub-env)."""

    cache: object
    mask: torch.Tensor
    """``[N, S]`` attention mask so far."""
    next_position: torch.Tensor
    """``[N]`` position id of the next token."""


class LMActorCritic(nn.Module):
    """Causal LM policy with a value head: on the policy's own trunk (shared, the default) or on
    a separate critic trunk initialized as a copy of it (``separate_critic=True``). With
    ``critic=False`` there is no value function at all (critic-free advantages): no value head,
    no critic trunk, and every value reads as 0 without any computation."""

    def __init__(self, lm: nn.Module, temperature: float = 1.0, separate_critic: bool = False,
                 critic: bool = True) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.lm, self.temperature = lm, temperature
        self.critic = copy.deepcopy(lm.base_model) if separate_critic and critic else None
        self.value_head: nn.Linear | None = None
        if critic:
            hidden = lm.config.hidden_size
            self.value_head = nn.Linear(hidden, 1, dtype=next(lm.parameters()).dtype)
            nn.init.normal_(self.value_head.weight, std=1.0 / math.sqrt(hidden))
            nn.init.zeros_(self.value_head.bias)
        self.head = CategoricalHead(lm.config.vocab_size)

    @property
    def trunk(self) -> nn.Module:
        return self.lm.base_model

    def actor_parameters(self) -> list[nn.Parameter]:
        """The policy's trainable parameters (all of them, or only LoRA adapters)."""
        return [p for p in self.lm.parameters() if p.requires_grad]

    def critic_parameters(self) -> list[nn.Parameter]:
        if self.value_head is None:
            return []
        trunk = list(self.critic.parameters()) if self.critic is not None else []
        return trunk + list(self.value_head.parameters())

    def _values(self, hidden: torch.Tensor) -> torch.Tensor:
        """``[n]`` values from critic hidden states ``[n, H]`` (zeros without a value head)."""
        if self.value_head is None:
            return torch.zeros(hidden.shape[0], device=hidden.device)
        return self.value_head(hidden).squeeze(-1).float()

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm.get_output_embeddings()(hidden).float() / self.temperature

    def _hidden(self, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor,
                through: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Actor and critic last hidden states ``[n, H]`` at ``(rows, cols)`` (one tensor if shared)."""
        actor = hidden_at(self.trunk, ids, mask, rows, cols, through)
        critic = actor if self.critic is None else hidden_at(self.critic, ids, mask, rows, cols, through)
        return actor, critic

    def forward_tokens(self, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor,
                       cols: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits ``[n, V]`` (tempered) and values ``[n]`` of the states that emitted the tokens
        at ``(rows, cols)`` of ``ids [B, S]`` (read at column ``cols - 1``), in one forward pass."""
        actor, critic = self._hidden(ids, mask, rows, cols - 1, cols)
        return self._logits(actor), self._values(critic)

    @torch.no_grad()
    def evaluate_tokens(self, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor,
                        final_rows: torch.Tensor, final_cols: torch.Tensor
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probs ``[n]`` of the tokens at ``(rows, cols)``, their states' values ``[n]``, and the
        values ``[m]`` of the states right after the tokens at ``(final_rows, final_cols)`` (bootstrap)."""
        n = len(rows)
        actor, critic = self._hidden(ids, mask, torch.cat([rows, final_rows]), torch.cat([cols - 1, final_cols]), cols)
        logp = self.head.log_prob(self._logits(actor[:n]), ids[rows, cols])
        values = self._values(critic)
        return logp, values[:n], values[n:]

    @torch.no_grad()
    def start(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[GenerationState, torch.Tensor]:
        """Prefill left-padded prompts ``[N, P]``; returns the state and the first step's logits."""
        out = self.trunk(input_ids=ids, attention_mask=mask, position_ids=positions_from_mask(mask), use_cache=True)
        state = GenerationState(out.past_key_values, mask.clone(), mask.long().sum(-1))
        return state, self._logits(out.last_hidden_state[:, -1])

    @torch.no_grad()
    def advance(self, state: GenerationState, tokens: torch.Tensor) -> torch.Tensor:
        """Append ``tokens [N]`` (one per sub-env) using the KV cache; the next logits."""
        state.mask = torch.cat([state.mask, torch.ones_like(state.mask[:, :1])], dim=1)
        out = self.trunk(input_ids=tokens[:, None], attention_mask=state.mask,
                         position_ids=state.next_position[:, None], past_key_values=state.cache, use_cache=True)
        state.cache = out.past_key_values
        state.next_position = state.next_position + 1
        return self._logits(out.last_hidden_state[:, -1])


@torch.no_grad()
def token_log_probs(lm: nn.Module, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor,
                    cols: torch.Tensor, temperature: float) -> torch.Tensor:
    """``[n]`` a causal LM's log-probs of the tokens at ``(rows, cols)``, in one batched pass.
    Used for the frozen reference and, identically, for the policy's side of the KL penalty,
    so the KL is exactly 0 while the policy equals the reference."""
    hidden = hidden_at(lm.base_model, ids, mask, rows, cols - 1, cols)
    logits = lm.get_output_embeddings()(hidden).float() / temperature
    return CategoricalHead(logits.shape[-1]).log_prob(logits, ids[rows, cols])  # the policy's own head math
