"""The launch options and the machinery every command's options are declared with."""
