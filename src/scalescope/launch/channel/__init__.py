"""The ranks' live states over the job's store, and the seals on what travels there."""
