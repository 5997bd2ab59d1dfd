"""Tiny random language models, built locally (no download), to try the RLHF commands and test them.

The policy is a Llama causal LM of 2 layers, hidden size 32 and 4 heads over a word-level
tokenizer of 16 words (:data:`WORDS`: ``<pad> <eos> <unk>`` and ``the movie was good bad great
awful fun boring i liked it not a plot``; EOS is also the pad token, as in SmolLM2); its weights are
random (torch seed 0). The reward model is the same architecture with a one-label score head, also
random (seed 1): it makes ``rlkit rlhf --reward-model`` run, not learn anything; ``rlkit rm train
--backbone DIR/policy`` trains a real one on the policy's trunk. ``rlkit rlhf tiny-models DIR``
writes them (:func:`write_tiny_models`); rlkit's tests use these same models.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rlkit.errors import ConfigError
from rlkit.rlhf.models import quiet_transformers

WORDS = ["<pad>", "<eos>", "<unk>"] + "the movie was good bad great awful fun boring i liked it not a plot".split()
"""The tokenizer's vocabulary: token id ``i`` is ``WORDS[i]`` (EOS is 1); other words read as ``<unk>``."""


def tokenizer(pad_is_eos: bool = True) -> Any:
    """A ``PreTrainedTokenizerFast`` over :data:`WORDS`, split on whitespace."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>",
                                   pad_token="<eos>" if pad_is_eos else "<pad>")


def config(**overrides: Any) -> Any:
    """The tiny ``LlamaConfig`` (fields in ``overrides`` replace its own)."""
    from transformers import LlamaConfig

    base = dict(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, eos_token_id=1,
                pad_token_id=1)
    return LlamaConfig(**{**base, **overrides})


def causal_lm(seed: int = 0) -> torch.nn.Module:
    """The tiny policy: random weights from torch seed ``seed``, frozen, in eval mode."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(config()).eval().requires_grad_(False)


def reward_model(seed: int = 1) -> torch.nn.Module:
    """The tiny one-label sequence classifier: random weights (score head included) from ``seed``."""
    from transformers import LlamaForSequenceClassification

    torch.manual_seed(seed)
    return LlamaForSequenceClassification(config(num_labels=1, id2label={0: "score"}, label2id={"score": 0})
                                          ).eval().requires_grad_(False)


def save_policy(folder: str | os.PathLike) -> None:
    """The tiny policy and its tokenizer saved into ``folder`` (safetensors)."""
    with quiet_transformers():
        causal_lm().save_pretrained(folder)
        tokenizer().save_pretrained(folder)


def save_reward_model(folder: str | os.PathLike) -> None:
    """The tiny random reward model and the policy's tokenizer saved into ``folder``."""
    tok = tokenizer()
    rm = reward_model()
    rm.config.pad_token_id = tok.pad_token_id
    with quiet_transformers():
        rm.save_pretrained(folder)
        tok.save_pretrained(folder)


@dataclass(frozen=True)
class TinyModels:
    """The folders :func:`write_tiny_models` wrote."""

    policy: str
    """The causal LM with its tokenizer: ``--policy``, or ``rlkit rm train --backbone``."""
    reward_model: str | None
    """The random one-label reward model (``--reward-model``), or None when not asked for."""

    def to_json(self) -> dict[str, str | None]:
        return dict(self.__dict__)


def write_tiny_models(directory: str | os.PathLike, with_reward_model: bool = True) -> TinyModels:
    """Write ``directory/policy`` (and ``directory/reward-model``). ``directory`` must be new or
    empty: one that holds anything is refused in one line, and nothing is written there. The models
    are built in a hidden folder beside it and moved into place in one rename."""
    out = Path(directory).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        what = "is a file" if not out.is_dir() else "already holds files"
        raise ConfigError(f"{str(directory)!r} {what}; choose a new folder for the tiny models (nothing was written)")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as exc:
        raise ConfigError(f"cannot write the tiny models beside {str(directory)!r}: {exc.strerror or exc}") from None
    try:
        save_policy(building / "policy")
        if with_reward_model:
            save_reward_model(building / "reward-model")
        building.chmod(0o755)
        os.rename(building, out)  # replaces an empty folder; one that filled meanwhile is refused
    except OSError as exc:
        raise ConfigError(f"cannot write the tiny models to {str(directory)!r}: {exc.strerror or exc} "
                          "(nothing there was changed)") from None
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return TinyModels(str(out / "policy"), str(out / "reward-model") if with_reward_model else None)
