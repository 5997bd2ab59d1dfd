"""The digest and reward of tests/test_same_numbers.py, shared with tests/data/record_premove.py
(which runs under the pre-move code, so nothing here imports rlkit)."""

import hashlib

import torch


def digest(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the tensors' names and bytes, in name order."""
    h = hashlib.sha256()
    for k in sorted(tensors):
        h.update(k.encode())
        h.update(tensors[k].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def good_rate(prompts: list[str], responses: list[str]) -> list[float]:
    """The tiny RLHF runs' reward: how often a response says "good"."""
    return [r.split().count("good") / 4 for r in responses]
