"""A voice with no volume control of its own is scaled to the workspace's volume."""

import struct

from pipecat.frames.frames import TTSAudioRawFrame, TTSTextFrame
from pipecat.tests.utils import run_test

from processors.voice.voice_volume_processor import VoiceVolumeProcessor, scaled


def pcm(*samples: int) -> bytes:
    return struct.pack(f"<{len(samples)}h", *samples)


def test_louder_and_quieter_clip_instead_of_wrapping_around():
    assert scaled(pcm(1000, -1000, 0), 0.5) == pcm(500, -500, 0)
    assert scaled(pcm(20000, -20000, 3), 2.0) == pcm(32767, -32768, 6)


async def test_only_the_agents_audio_changes():
    audio = TTSAudioRawFrame(audio=pcm(100, 200), sample_rate=8000, num_channels=1)
    words = TTSTextFrame("Hello", text_type="word")
    down, _ = await run_test(VoiceVolumeProcessor(1.5), frames_to_send=[audio, words],
                             expected_down_frames=[TTSAudioRawFrame, TTSTextFrame])
    assert down[0].audio == pcm(150, 300) and down[1].text == "Hello"
