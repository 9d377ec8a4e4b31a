"""Benchmark loaders: turn user data (local files, Hugging Face datasets) into validated records."""
