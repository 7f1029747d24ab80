"""What every emotion provider reports (`EmotionReading`), the interface it serves, and
the label table that places each emotion on valence and arousal."""
