"""The ranks' processes: started through torch's elastic launcher, ended with SIGTERM, a grace,
then SIGKILL."""
