"""Latent skills behind a models × tasks score matrix, and cheaper evaluation of a new model.

`cg-ray skills` finds a few skills by principal axis factoring + varimax (the IQ-test paper), with task
redundancy diagnostics and "profile a new model from k tasks"; `cg-ray estimate` estimates a new model's
overall and per-task scores from a budget of rows chosen actively, with the other models' per-row scores
as the prior (ACE-style variance reduction). Nothing heavy is imported here.
"""
