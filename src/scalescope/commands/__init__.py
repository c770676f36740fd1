"""One module per command: its journey (run, analyse, render, write the files), nothing else.

cli/ parses and calls one entry point here; what the entry point runs, analyses and renders
lives in the stages below (launch, analyze, diagnose, predict, tune, report).
"""
