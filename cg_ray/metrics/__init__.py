"""Pure numpy/scipy CG metrics: streaming accumulators, χ/X formulas, classes, overlap, robustness."""
