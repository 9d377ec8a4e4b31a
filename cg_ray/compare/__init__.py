"""Concept-level comparison of two runs read with the same reader and SAE (`cg-ray diff`, `GET /v1/diff`)."""
