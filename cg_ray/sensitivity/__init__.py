"""`cg-ray sensitivity`: a run's rows re-read by other readers, its findings judged again, and compared."""
