"""Processors that keep a call going and end it: the controller, fallbacks, the reply watchdog."""
