"""`cg-ray augment RUN_DIR --benchmark B`: new items in B's own format for B's in-scope gaps (the concepts a
reference of real use confidently uses that B tests less, `cg-ray scope`), checked like a probe's items and
added to B's coverage to show what they change (docs/augment.md)."""
