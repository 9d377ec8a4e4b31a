"""Preparation of reader models and of the default model's own SAE (training, labels)."""
