"""Twilio: the media-stream serializer and TwiML."""
