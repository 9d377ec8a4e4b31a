"""`cg-ray probe RUN_DIR`: new items for each gap of a run, with matched controls, checked by the reader,
answered by the evaluated model, and each gap confirmed, refuted or left unsettled on that fresh data
(docs/probe.md)."""
