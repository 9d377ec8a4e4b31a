"""`python -m cg_ray.cli ...` (the service submits Ray jobs this way: a bare `cg-ray` may not be on PATH)."""

import sys

from cg_ray.cli import main

sys.exit(main())
