"""`main.py simulate`: options, output, exit codes (0 done, 1 record incomplete, 2 not run)."""

from __future__ import annotations

import argparse
import json

import pytest
from pydantic import SecretStr

from config import Settings
from simulator.simulator import add_simulate_arguments, main_simulate, run_simulate
from tests.simulator.conftest import API_KEY, TOKEN
from tests.simulator.fake_service import free_port

LINES = {"from": "+15550100123", "to": "+15550100100", "turns": [{"say": "Hello", "pause_s": 0}]}


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_simulate_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def settings(tmp_path, monkeypatch) -> Settings:
    for name in ("TWILIO_AUTH_TOKEN", "VOICE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return Settings(_env_file=None, data_dir=tmp_path / "data")


@pytest.mark.timeout(15)
def test_an_unreachable_server_is_one_clear_line_and_exit_code_2(write_script, settings, capsys):
    url = f"http://127.0.0.1:{free_port()}"

    args = parse(str(write_script(LINES)), "--url", url, "--twilio-token", TOKEN)

    code = run_simulate(args, settings)

    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == (
        f"error: cannot reach the server at {url} (connection refused); "
        "is `python main.py serve` running?"
    )


@pytest.mark.timeout(30)
async def test_json_output_is_the_summary_alone_on_stdout(
    fake_service, write_script, settings, capsys
):
    _, url = fake_service(record_delay_s=0.0)
    args = parse(str(write_script(LINES)), "--text", "--json", "--url", url,
                 "--api-key", API_KEY, "--twilio-token", TOKEN)

    code = await main_simulate(args, settings)

    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert list(summary) == [
        "call_id", "completion_reason", "final_state", "turns", "tool_calls", "transitions",
        "events",
    ]
    assert summary["turns"][1] == {"speaker_role": "caller", "text": "Hello"}


@pytest.mark.timeout(30)
async def test_the_dev_credentials_are_used_when_no_options_are_given(
    fake_service, write_script, settings, capsys
):
    settings.storage.data_dir.mkdir(parents=True)
    (settings.storage.data_dir / "dev_twilio_auth_token").write_text(TOKEN)
    (settings.storage.data_dir / "dev_api_key").write_text(API_KEY)
    _, url = fake_service(record_delay_s=0.0)

    code = await main_simulate(parse(str(write_script(LINES)), "--text", "--url", url), settings)

    out = capsys.readouterr().out
    assert code == 0
    assert "completion: caller_disconnected" in out and "caller: Hello" in out


@pytest.mark.timeout(30)
async def test_a_call_whose_record_cannot_be_read_exits_1(
    fake_service, write_script, settings, capsys
):
    _, url = fake_service(record_delay_s=0.0)
    args = parse(str(write_script(LINES)), "--text", "--url", url, "--twilio-token", TOKEN)

    code = await main_simulate(args, settings)

    assert code == 1
    assert "no API key to read the call record" in capsys.readouterr().err


@pytest.mark.timeout(30)
async def test_twilio_auth_token_from_the_settings_signs_the_webhooks(
    fake_service, write_script, settings
):
    telephony = settings.telephony.model_copy(update={"twilio_auth_token": SecretStr(TOKEN)})
    settings = settings.model_copy(update={"telephony": telephony})
    _, url = fake_service(record_delay_s=0.0)
    args = parse(str(write_script({**LINES, "hangup_after_s": 0})), "--text", "--url", url,
                 "--api-key", API_KEY)

    code = await main_simulate(args, settings)

    assert code == 0
    assert not (settings.storage.data_dir / "dev_twilio_auth_token").exists()


@pytest.mark.timeout(15)
async def test_a_rejected_signature_exits_2_with_a_hint(
    fake_service, write_script, settings, capsys
):
    _, url = fake_service(token="another-token")
    args = parse(str(write_script(LINES)), "--text", "--url", url, "--twilio-token", TOKEN)

    code = await main_simulate(args, settings)

    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "rejected the webhook signature" in err and "PUBLIC_URL" in err


@pytest.mark.timeout(15)
async def test_an_invalid_script_exits_2_naming_the_key(write_script, settings, capsys):
    path = write_script({**LINES, "turns": [{"say": "Hi", "barge": True}]})

    code = await main_simulate(parse(str(path), "--twilio-token", TOKEN), settings)

    assert code == 2
    assert "turns[0].barge" in capsys.readouterr().err
