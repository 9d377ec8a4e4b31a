"""Reader: a hooked causal LM stopped at layer L + an SAE, turning rows of text into sparse s̃ vectors."""
