"""The engage LLM's system instruction: the base prompt plus blocks that layers keep
current during the call (the world model's context, the emotional steering).

Each layer updates its own block and pushes the whole text (an
`LLMUpdateSettingsFrame` replaces the instruction), so no layer overwrites another's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BLOCK_ORDER = ("world", "steering")


@dataclass
class SystemPrompt:
    base: str = ""
    blocks: dict[str, str] = field(default_factory=dict)

    def update(self, name: str, text: str | None) -> bool:
        """Set (or clear, with None or '') one block; True when the instruction changed."""
        if name not in BLOCK_ORDER:
            raise ValueError(f"unknown instruction block {name!r}")
        previous = self.blocks.get(name)
        if text:
            self.blocks[name] = text
        else:
            self.blocks.pop(name, None)
        return self.blocks.get(name) != previous

    @property
    def text(self) -> str:
        return "\n\n".join([self.base] + [self.blocks[n] for n in BLOCK_ORDER if n in self.blocks])
