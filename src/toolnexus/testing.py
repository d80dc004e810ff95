"""In-process models for testing an agent built on toolnexus, with no HTTP and no API key.

Give one to ``create_client(model=...)`` (no ``base_url``) and the client runs its whole loop
against it: tool calls through the scheduler, Code Mode, hooks, approvals, budgets, streaming
events and usage, exactly as against a server::

    from toolnexus import ToolCall, create_client
    from toolnexus.testing import ScriptedModel

    model = ScriptedModel([[ToolCall("c1", "lookup", {"city": "Oslo"})], "Oslo is sunny."])
    client = create_client(model=model)
    result = client.run_sync("Weather in Oslo?", tools=[lookup])
    assert result.text == "Oslo is sunny."
    assert model.requests[1][-1]["role"] == "tool"  # what the model was shown

``TestModel()`` needs no script: it calls each of your tools once with arguments valid for its
schema (in Code Mode, through one ``run_code`` program), then sums up the results.
See ``docs/testing.md``.
"""

from toolnexus.client._models import FunctionModel, ModelReply, ScriptedModel
from toolnexus.client._schema_sample import sample_arguments
from toolnexus.client._test_model import TestModel, program_for

__all__ = [
    "FunctionModel",
    "ModelReply",
    "ScriptedModel",
    "TestModel",
    "program_for",
    "sample_arguments",
]
