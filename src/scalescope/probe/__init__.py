"""Inside each rank: record collectives, step phases and memory with low overhead."""
