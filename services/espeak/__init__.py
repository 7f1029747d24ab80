"""eSpeak NG: the offline text-to-speech engine and its Pipecat TTS service."""
