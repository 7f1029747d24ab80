"""One request to Twilio's REST API off the event loop, and what its refusal means.

The SDK is synchronous: each request runs in a worker thread, bounded by the account's
timeout. A refusal is a `TwilioRequestError` that says whether trying again can help. Its
message names the HTTP status and Twilio's code only: Twilio's own message can quote the
number dialled or texted, and these errors end up in logs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import requests
from twilio.base.exceptions import TwilioException

from services.twilio.numbers import TwilioAccount, refusal, rest_base

# Room for the worker thread beyond the HTTP timeout before the wait gives up.
THREAD_MARGIN_S = 2.0


class TwilioRequestError(Exception):
    """Twilio did not do what was asked. `retryable`: the same request may succeed later
    (network, timeout, 429, 5xx); False for credentials, a bad number and other 4xx.
    `code`: Twilio's error code, when it sent one; `status`: the HTTP status."""

    def __init__(self, message: str, *, retryable: bool, code: int | None = None,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.code = code
        self.status = status


E = TypeVar("E", bound=TwilioRequestError)


async def run_request(account: TwilioAccount, doing: str, request: Callable[[], Any], *,
                      explained: Mapping[int, str], error: type[E]) -> Any:
    """`request()` in a worker thread; a refusal, timeout or network failure is `error`,
    its message naming what was being done (`doing`) and, for a code in `explained`,
    what it means."""
    timeout = account.timeout_s + THREAD_MARGIN_S
    try:
        return await asyncio.wait_for(asyncio.to_thread(request), timeout)
    except TimeoutError as failure:
        raise error(f"Twilio did not answer in {timeout:g} s ({doing})",
                    retryable=True) from failure
    except requests.RequestException as failure:
        raise error(f"cannot reach Twilio at {rest_base(account)} to {doing} "
                    f"({type(failure).__name__})", retryable=True) from failure
    except TwilioException as failure:
        status, code, _message = refusal(failure)
        retryable = status is not None and (status == 429 or status >= 500)
        why = explained.get(code or 0) or ("Twilio is unavailable" if retryable
                                           else "the request was refused")
        raise error(f"Twilio refused to {doing}: {why} (HTTP {status}, code {code})",
                    retryable=retryable, code=code, status=status) from failure


__all__ = ["TwilioRequestError", "run_request"]
