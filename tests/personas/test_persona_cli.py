"""`main.py simulate --persona PATH`: exit codes and one-line errors."""

import pytest

from config import Settings
from main import build_parser
from simulator.personas.run import run_persona_command
from simulator.simulator import main_simulate
from tests.simulator.fake_service import free_port

PERSONA = """name: flu_shot
from: "+15550100399"
caller: {first_name: Sam, last_name: Lee, date_of_birth: 1990-02-03}
tasks: [{kind: book, service: a flu shot}]
expect: {outcome: booked}
"""


@pytest.fixture
def settings(tmp_path, monkeypatch) -> Settings:
    for name in ("TWILIO_AUTH_TOKEN", "VOICE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return Settings(_env_file=None, data_dir=tmp_path / "data")


def test_a_bad_persona_file_is_one_line_naming_the_problem_and_exit_code_2(
        tmp_path, settings, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(PERSONA.replace("kind: book", "kind: shopping"))
    args = build_parser().parse_args(["simulate", "--persona", str(path), "--text"])

    code = run_persona_command(args, settings)

    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith(f"error: persona {path}: tasks[0].kind: Input should be 'book'")


@pytest.mark.timeout(15)
def test_an_unreachable_server_is_exit_code_2(tmp_path, settings, capsys):
    path = tmp_path / "flu.yaml"
    path.write_text(PERSONA)
    url = f"http://127.0.0.1:{free_port()}"
    args = build_parser().parse_args(
        ["simulate", "--persona", str(path), "--text", "--url", url, "--caller", "rules"])

    code = run_persona_command(args, settings)

    assert code == 2
    assert "cannot reach the server" in capsys.readouterr().err


async def test_simulate_needs_a_script_or_a_persona(settings, capsys):
    args = build_parser().parse_args(["simulate", "--text"])

    assert await main_simulate(args, settings) == 2
    assert capsys.readouterr().err.strip() == "error: give a caller script, or --persona PATH"
