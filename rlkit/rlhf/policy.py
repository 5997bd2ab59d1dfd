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
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn

from rlkit.core.heads import CategoricalHead


class KVCache(NamedTuple):
    """A forward's key-value cache and the keyword the trunk takes it back under: ``cache`` where
    transformers has renamed it (reading or passing ``past_key_values`` there prints a
    FutureWarning in every run), ``past_key_values`` in the versions before."""

    value: Any
    keyword: str

    def feed(self) -> dict[str, Any]:
        """The keyword arguments that hand the cache to the next forward."""
        return {self.keyword: self.value, "use_cache": True}


def kv_cache(out: Any) -> KVCache:
    """The cache of a forward's output ``out`` (run with ``use_cache=True``), read by the field
    name this transformers version gives it (its old name would warn)."""
    keyword = "cache" if "cache" in out.keys() else "past_key_values"
    return KVCache(out[keyword], keyword)


def positions_from_mask(mask: torch.Tensor) -> torch.Tensor:
    """``[B, S]`` position ids for left-padded sequences (0 at each first real token)."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def hidden_at(trunk: nn.Module, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor,
              through: torch.Tensor, prompt_width: int = 0) -> torch.Tensor:
    """``[n, H]`` the trunk's last hidden states at ``(rows, cols)`` of ``ids``/``mask [B, S]``.

    The trunk runs on columns ``[first real token of any row, max(through) + 1)`` only: a
    rollout grid keeps ``max_new_tokens`` response columns even when every response ended
    earlier, and those columns would otherwise be computed in every pass. Only columns that
    are padding or past every row's last token are dropped, so each kept token sees the same
    context; positions come from the mask. Every pass over a grid derives the window from the
    same token columns (``through``), so the policy's, the reference's and the training passes
    run on the same shapes (the KL is exactly 0 while the policy equals the reference).
    (Rows are not grouped by length to skip the remaining padding: on the CPU the
    weight-gradient matmuls lose more with short groups than the padding costs.)

    With ``prompt_width`` P > 0, columns ``[0, P)`` are the prompts: when rows repeat a prompt
    (the group variant asks each prompt several times), each distinct prompt runs once and its
    keys and values are shared by the rows that asked it (see :func:`shared_prompt_hidden`)."""
    lo = int(mask.long().argmax(-1).min()) if mask.shape[0] else 0
    hi = int(through.max()) + 1 if through.numel() else lo + 1
    window = mask[:, lo:hi]
    positions = positions_from_mask(window)
    plan = prompt_plan(ids[:, lo:prompt_width], window[:, :prompt_width - lo]) if lo < prompt_width < hi else None
    if plan is None or (getattr(trunk, "gradient_checkpointing", False) and trunk.training):
        hidden = trunk(input_ids=ids[:, lo:hi], attention_mask=window, position_ids=positions).last_hidden_state
    else:
        hidden = shared_prompt_hidden(trunk, ids[:, lo:hi], window, positions, prompt_width - lo, plan)
    return hidden[rows, cols - lo]


def prompt_plan(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """For prompts ``[B, P]``: the first row asking each distinct prompt ``[U]`` (in row order) and
    each row's distinct prompt ``[B]``; None when every row's prompt differs (nothing to share)."""
    key = torch.cat([prompt_ids, prompt_mask.to(prompt_ids.dtype)], dim=1)
    _, inverse = torch.unique(key, dim=0, return_inverse=True)
    count = int(inverse.max()) + 1 if inverse.numel() else 0
    if count == key.shape[0]:
        return None
    first = torch.full((count,), key.shape[0], dtype=torch.long, device=key.device)
    first.scatter_reduce_(0, inverse, torch.arange(key.shape[0], device=key.device), "amin")
    order = first.argsort()  # distinct prompts in order of first appearance
    rank = torch.empty_like(order)
    rank[order] = torch.arange(count, device=key.device)
    return first[order], rank[inverse]


def shared_prompt_hidden(trunk: nn.Module, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
                         width: int, plan: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``[B, S, H]`` last hidden states of ``ids [B, S]``, computing the prompt columns ``[0, width)``
    once per distinct prompt (``plan`` from :func:`prompt_plan`). The rows' responses attend to
    their prompt's keys and values, selected from the distinct prompts' cache; gradients flow
    back through that selection, so the result is the same function as one pass over all rows
    (the same within float rounding), with the prompts' share of the compute and activations
    divided by the number of rows per prompt."""
    first, inverse = plan
    embeds = trunk.get_input_embeddings()(ids)  # one lookup: one sparse-to-dense embedding gradient per pass
    out = trunk(inputs_embeds=embeds[first, :width], attention_mask=mask[first, :width],
                position_ids=positions[first, :width], use_cache=True)
    cache = kv_cache(out)
    cache.value.batch_select_indices(inverse)
    rest = trunk(inputs_embeds=embeds[:, width:], attention_mask=mask, position_ids=positions[:, width:],
                 **cache.feed()).last_hidden_state
    return torch.cat([out.last_hidden_state[inverse], rest], dim=1)


@dataclass
class GenerationState:
    """KV cache and bookkeeping of a batched rollout (one cache row per sub-env)."""

    cache: KVCache
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
            # Zeros: every value starts at 0, so the first advantages are the rewards themselves. A
            # random head's values on an LM's hidden states err by more than a 0/1 reward's range, and
            # GAE then hands the policy that noise (PPO collapsed within 3 iterations on arithmetic).
            nn.init.zeros_(self.value_head.weight)
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
                through: torch.Tensor, prompt_width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Actor and critic last hidden states ``[n, H]`` at ``(rows, cols)`` (one tensor if shared)."""
        actor = hidden_at(self.trunk, ids, mask, rows, cols, through, prompt_width)
        critic = actor if self.critic is None else hidden_at(self.critic, ids, mask, rows, cols, through,
                                                             prompt_width)
        return actor, critic

    def forward_tokens(self, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor,
                       cols: torch.Tensor, prompt_width: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits ``[n, V]`` (tempered) and values ``[n]`` of the states that emitted the tokens
        at ``(rows, cols)`` of ``ids [B, S]`` (read at column ``cols - 1``), in one forward pass
        (repeated prompts in columns ``[0, prompt_width)`` computed once, see :func:`hidden_at`)."""
        actor, critic = self._hidden(ids, mask, rows, cols - 1, cols, prompt_width)
        return self._logits(actor), self._values(critic)

    @torch.no_grad()
    def evaluate_tokens(self, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor,
                        final_rows: torch.Tensor, final_cols: torch.Tensor, prompt_width: int = 0
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probs ``[n]`` of the tokens at ``(rows, cols)``, their states' values ``[n]``, and the
        values ``[m]`` of the states right after the tokens at ``(final_rows, final_cols)`` (bootstrap)."""
        n = len(rows)
        actor, critic = self._hidden(ids, mask, torch.cat([rows, final_rows]), torch.cat([cols - 1, final_cols]), cols,
                                     prompt_width)
        logp = self.head.log_prob(self._logits(actor[:n]), ids[rows, cols])
        values = self._values(critic)
        return logp, values[:n], values[n:]

    @torch.no_grad()
    def start(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[GenerationState, torch.Tensor]:
        """Prefill left-padded prompts ``[N, P]`` (each distinct prompt once, its cache shared by
        the rows that ask it); returns the state and the first step's logits."""
        plan = prompt_plan(ids, mask)
        first, inverse = plan if plan is not None else (slice(None), slice(None))
        out = self.trunk(input_ids=ids[first], attention_mask=mask[first],
                         position_ids=positions_from_mask(mask[first]), use_cache=True)
        cache = kv_cache(out)
        if plan is not None:
            cache.value.batch_select_indices(inverse)
        state = GenerationState(cache, mask.clone(), mask.long().sum(-1))
        return state, self._logits(out.last_hidden_state[inverse, -1])

    @torch.no_grad()
    def advance(self, state: GenerationState, tokens: torch.Tensor) -> torch.Tensor:
        """Append ``tokens [N]`` (one per sub-env) using the KV cache; the next logits."""
        state.mask = torch.cat([state.mask, torch.ones_like(state.mask[:, :1])], dim=1)
        out = self.trunk(input_ids=tokens[:, None], attention_mask=state.mask,
                         position_ids=state.next_position[:, None], **state.cache.feed())
        state.cache = kv_cache(out)
        state.next_position = state.next_position + 1
        return self._logits(out.last_hidden_state[:, -1])


@torch.no_grad()
def token_log_probs(lm: nn.Module, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor,
                    cols: torch.Tensor, temperature: float, prompt_width: int = 0) -> torch.Tensor:
    """``[n]`` a causal LM's log-probs of the tokens at ``(rows, cols)``, in one batched pass.
    Used for the frozen reference and, identically, for the policy's side of the KL penalty,
    so the KL is exactly 0 while the policy equals the reference."""
    hidden = hidden_at(lm.base_model, ids, mask, rows, cols - 1, cols, prompt_width)
    logits = lm.get_output_embeddings()(hidden).float() / temperature
    return CategoricalHead(logits.shape[-1]).log_prob(logits, ids[rows, cols])  # the policy's own head math
