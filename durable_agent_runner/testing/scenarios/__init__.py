"""fake_llm's default scenarios, the models `python -m durable_agent_runner.testing.fake_llm` and
`FakeLLMServer()` answer with: the weather demo and the support team (FunctionModels of
durable_agent_runner.testing, weather.py and team.py), echo, recall, loop and the summary every
model writes when a session compacts (basic.py). default.py routes a request to one of them by
its model name; fake_llm's HTTP layer only hosts the responder it is given.

This package imports nothing when it is imported: the offline models' server (testing/server.py)
uses basic.py, and weather.py and team.py use the offline models.
"""
