"""Twilio: the media-stream serializer and TwiML."""

# Twilio Media Streams carry 8 kHz mu-law audio both ways.
PHONE_SAMPLE_RATE = 8000
