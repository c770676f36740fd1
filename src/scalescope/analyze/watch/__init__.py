"""What the watches judge: a hang's verdict, a slowdown's onset, link and cost."""
