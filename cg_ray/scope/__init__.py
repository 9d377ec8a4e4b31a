"""A benchmark's scope: which concepts it leaves out that it should test, and how sure that is
(docs/method.md, "Benchmark gaps in scope"; `cg-ray scope`)."""
