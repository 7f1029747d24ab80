"""PocketSphinx: the offline speech-to-text engine and its Pipecat STT service."""
