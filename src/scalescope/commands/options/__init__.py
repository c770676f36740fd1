"""Each command's options, one frozen dataclass per command: the fields carry their flags
(launch/options/fields.py's ``option``), their docstrings are the help, and cli/ generates the typer
parameters from them. Light on purpose: the command line builds every command's parameters on
each start, without importing the journeys."""
