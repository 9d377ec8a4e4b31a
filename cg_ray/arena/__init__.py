"""The arena variant (paper Appendix D): pairwise battles → per-model win/loss rows, ratings, head-to-head."""
