"""When the caller takes the floor: the user-turn start strategy and its rules."""
