"""Start ranks: world discovery, mapping and binding, torch's elastic launcher."""
