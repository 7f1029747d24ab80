"""What `make run` prints once it listens: the dashboard's address and where a key to log
in with comes from."""

from api.first_minutes import dashboard_url, how_to_get_in
from config import Settings
from runner.dev_credentials import write_dev_api_key


def test_the_dashboard_address_is_one_a_browser_on_this_machine_opens():
    assert dashboard_url("127.0.0.1", 7860) == "http://127.0.0.1:7860/dashboard"
    assert dashboard_url("0.0.0.0", 8080) == "http://127.0.0.1:8080/dashboard"
    assert dashboard_url("::", 8080) == "http://127.0.0.1:8080/dashboard"
    assert dashboard_url("::1", 8080) == "http://[::1]:8080/dashboard"
    assert dashboard_url("clinic.internal", 80) == "http://clinic.internal:80/dashboard"


def test_the_development_key_file_is_named_once_this_start_kept_one(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path, host="0.0.0.0")
    without = how_to_get_in(settings, 7860)
    write_dev_api_key(settings, "vk_00000000_" + "x" * 24)
    with_file = how_to_get_in(settings, 7860)

    assert without.startswith("Dashboard: http://127.0.0.1:7860/dashboard")
    assert "python main.py api-key create --workspace demo" in without
    assert "dev_api_key" not in without
    assert f"development API key in {tmp_path / 'dev_api_key'}" in with_file
    assert "python main.py api-key create --workspace demo" in with_file
    assert "vk_" not in with_file  # the key itself is never printed
