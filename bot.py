"""Pipecat's development runner entry: `python bot.py -t webrtc|daily|twilio`.

The runner finds `bot(runner_args)` here and calls it once per session; each session
runs the production pipeline (runner/dev_runner.py) with its own call record.
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

from pipecat.runner.types import RunnerArguments

from runner.dev_runner import run_dev_session


async def bot(runner_args: RunnerArguments) -> None:
    """One development session: a browser, a Daily room, a Twilio stream or `pipecat eval`."""
    await run_dev_session(runner_args)


if __name__ == "__main__":
    from pipecat.runner.run import main

    main()
