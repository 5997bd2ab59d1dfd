"""Persistence: checkpoints (safetensors + JSON) and TensorBoard logging."""
