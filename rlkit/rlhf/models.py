"""Loading ``transformers`` models and tokenizers from local folders (or the local hub cache).

Nothing is downloaded at run time: every load is ``local_files_only``, and a path that does not
exist is an error at once, not a hub look-up.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any, Iterator, Literal

import torch

from rlkit.errors import LLMEnvError, one_line

log = logging.getLogger("rlkit")

ModelKind = Literal["causal-lm", "reward-model", "backbone", "seq-cls"]


def _check_local(name_or_path: str) -> None:
    if name_or_path and Path(name_or_path).expanduser().exists():
        return
    looks_like_path = name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") > 1
    if not name_or_path or looks_like_path or not _in_hub_cache(name_or_path):
        raise LLMEnvError(f"cannot load model {name_or_path!r}: no such folder, nor a model of that name in the "
                          "local hub cache (rlkit loads local folders or the local hub cache only; nothing is "
                          "downloaded)")


def _in_hub_cache(repo_id: str) -> bool:
    """Whether the local hub cache holds ``repo_id`` (its ``config.json`` or tokenizer files)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return any(isinstance(try_to_load_from_cache(repo_id, f), str)
                   for f in ("config.json", "tokenizer_config.json", "tokenizer.json"))
    except Exception:  # an invalid repo id (the hub's validators raise their own error types)
        return False


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' loading bars and load reports silenced meanwhile (rlkit reports what matters:
    a missing head is an error, a head initialized on purpose is one line of rlkit's)."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def load_model(name_or_path: str, kind: ModelKind = "causal-lm", dtype: torch.dtype = torch.float32,
               device: str = "cpu") -> torch.nn.Module:
    """A frozen model: ``causal-lm`` (a policy), ``reward-model`` (alias ``seq-cls``: a trained
    sequence classifier with one label) or ``backbone`` (a sequence classifier whose one-label
    score head may still be untrained, for reward-model training). One-line errors otherwise."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    _check_local(name_or_path)
    cls = AutoModelForCausalLM if kind == "causal-lm" else AutoModelForSequenceClassification
    kwargs: dict[str, Any] = {"dtype": dtype, "local_files_only": True}
    if kind == "backbone":
        kwargs["num_labels"] = 1
    try:
        with quiet_transformers():
            model, info = cls.from_pretrained(name_or_path, output_loading_info=True, **kwargs)
    except Exception as exc:  # transformers raises OSError, ValueError, KeyError... by case
        raise LLMEnvError(f"cannot load model {name_or_path!r}: {one_line(exc)}") from None
    if kind == "causal-lm" and info.get("missing_keys"):
        arch = ", ".join(getattr(model.config, "architectures", None) or ["unknown"])
        missing = sorted(info["missing_keys"])
        raise LLMEnvError(f"{name_or_path!r} is not a trained causal language model (architecture {arch}): "
                          f"{len(missing)} weight(s) would start untrained ({missing[0]}...)")
    if kind == "backbone" and any(key.split(".")[0] in ("score", "classifier") for key in info.get("missing_keys", [])):
        log.warning("%s: a new one-label score head on its backbone (trained now)", name_or_path)
    if kind in ("reward-model", "seq-cls"):
        if any(key.split(".")[0] in ("score", "classifier") for key in info.get("missing_keys", [])):
            arch = ", ".join(getattr(model.config, "architectures", None) or ["unknown"])
            raise LLMEnvError(f"{name_or_path!r} has no trained score head (architecture {arch}); "
                              "train a reward model with: rlkit rm train")
        if model.config.num_labels != 1:
            raise LLMEnvError(f"{name_or_path!r} has {model.config.num_labels} labels; a reward model has one")
    return model.to(device).eval().requires_grad_(False)


def load_tokenizer(name_or_path: str) -> Any:
    """The tokenizer saved with a model (one-line error when the folder has none)."""
    from transformers import AutoTokenizer

    _check_local(name_or_path)
    try:
        with quiet_transformers():
            return AutoTokenizer.from_pretrained(name_or_path, local_files_only=True)
    except Exception as exc:
        raise LLMEnvError(f"cannot load a tokenizer from {name_or_path!r}: {one_line(exc)}") from None


def check_same_vocabulary(reward_model: torch.nn.Module, rm_path: str, tokenizer: Any) -> None:
    """The reward model must read the policy's token ids: its embedding covers the policy
    tokenizer, and a tokenizer saved beside it (if any) maps tokens to the same ids."""
    rows = reward_model.get_input_embeddings().num_embeddings
    if len(tokenizer) > rows:
        raise LLMEnvError(f"reward model {rm_path!r} embeds {rows} token ids; the policy's tokenizer has "
                          f"{len(tokenizer)}: they do not share a vocabulary")
    folder = Path(rm_path)
    if any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json")):
        if load_tokenizer(rm_path).get_vocab() != tokenizer.get_vocab():
            raise LLMEnvError(f"reward model {rm_path!r} was saved with a different tokenizer than the policy's")
