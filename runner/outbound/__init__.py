"""Outbound calls: the dispatcher that dials due tasks through Twilio and follows each call
to its outcome (`dispatcher.py`), and what a placed call's answer and status webhooks do
(`answer.py`)."""
