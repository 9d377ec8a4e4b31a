"""Analyses one layer above `metrics/`: the weakness profile of a run and `cg-ray validate`.

They read finished results (a `CGResult`, rows.parquet) and write their own artifacts beside the paper's.
"""
