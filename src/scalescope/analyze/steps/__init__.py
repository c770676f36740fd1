"""The measured steps: phases per rank and step, pauses, copies, extra work, gaps."""
