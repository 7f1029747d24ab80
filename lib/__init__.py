"""Process infrastructure with no knowledge of calls: event loop, worker processes, prompts, privacy."""
