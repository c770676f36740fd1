"""The library behind the commands: what a notebook calls and the commands call the same way."""
