"""Developer tools that play a caller: scripted calls, the audio leg, personas."""
