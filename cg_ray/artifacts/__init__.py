"""Run artifacts: reading/validating rows.parquet, writing the run directory, atomic publishing."""
