"""Record I/O: reading local record files and uploaded bytes (JSONL, CSV, Parquet) with errors that name the
file, line/row and field. Shared by the loaders, labels, uploads, battles, the SAE corpus and extract inputs."""
