"""A call whose pipeline cannot even be built still ends up with a closed record saying why."""

from types import SimpleNamespace

from runner.call_runner import close_failed_call
from tests.fakes import CollectingWriter, make_session


class FlushableWriter(CollectingWriter):
    async def flush(self, timeout: float) -> bool:
        self.flushed = True
        return True


async def test_a_pipeline_that_cannot_start_closes_its_record_as_a_pipeline_error():
    writer = FlushableWriter()
    session = make_session(writer)

    await close_failed_call(SimpleNamespace(writer=writer), session, RuntimeError("no model"))

    [event] = writer.events("pipeline_failed")
    assert event.data == {"stage": "setup", "error": "RuntimeError"}
    [update] = writer.of_type("CallUpdate")
    assert update.fields["completion_reason"] == "pipeline_error"
    assert update.fields["status"] == "completed" and writer.flushed
