"""Test harness, not product: stand-in readers (`fakes`), a local Ray Serve on loopback (`local_serve`) and
the load-and-fault driver (`loadfault`). Used by tests/ and benchmarks/; no module of cg_ray imports it (an
import-linter contract), and wheels leave it out. It lives in the package, not under tests/, because Ray
workers import the fake readers by name (`cg_ray.testing.fakes:HashingReader.from_config`)."""
