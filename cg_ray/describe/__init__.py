"""Readable gaps: analyses that read a finished run directory and describe its concepts from the user's own
rows — in-data evidence (top rows, activating spans, top tokens), metadata enrichment, descriptions, LLM
explanations with a detection score, and themes. Each module does one job; nothing happens at import."""
