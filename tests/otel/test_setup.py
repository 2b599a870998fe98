"""The SDK set-up of ``--otel``, and the telemetry settings of a spawned agent."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
import trio

import acp_trio
from acp_trio._transports._process import with_telemetry
from acp_trio.contrib.otel import otlp_environment
from acp_trio.testing import ScenarioClient

from .exported import console_env


def test_telemetry_never_overrides_what_the_user_set() -> None:
    env = {"PATH": "/bin", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://mine:4318"}
    telemetry = otlp_environment("http://ours:4318", environ={})
    merged = with_telemetry(env, telemetry)
    assert merged is not None
    assert merged["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://mine:4318"
    assert merged["OTEL_TRACES_EXPORTER"] == "otlp"
    assert merged["PATH"] == "/bin"
    assert env == {"PATH": "/bin", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://mine:4318"}
    assert with_telemetry(env, None) is env
    ours = with_telemetry(None, {"OTEL_SERVICE_NAME": "x"})
    assert ours is not None
    assert ours["OTEL_SERVICE_NAME"] == os.environ.get("OTEL_SERVICE_NAME", "x")


def test_otlp_environment_takes_ours_and_what_is_given() -> None:
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://ours:4318",
        "OTEL_EXPORTER_OTLP_HEADERS": "a=b",
        "OTEL_PROPAGATORS": "tracecontext",
        "OTEL_SERVICE_NAME": "the client",
        "HOME": "/root",
    }
    assert otlp_environment(protocol="grpc", environ=environ) == {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://ours:4318",
        "OTEL_EXPORTER_OTLP_HEADERS": "a=b",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_PROPAGATORS": "tracecontext",
    }


async def test_a_spawned_agent_gets_the_telemetry_settings() -> None:
    # The scenario agent with --otel, told by telemetry= to print its spans
    # (console) and by the user's env to call itself "mine": both arrive.
    client = ScenarioClient()
    env = {**console_env(), "OTEL_SERVICE_NAME": "mine"}
    telemetry = {"OTEL_SERVICE_NAME": "theirs", "OTEL_RESOURCE_ATTRIBUTES": "deployment=test"}
    with trio.fail_after(60):
        async with acp_trio.open_spawned_agent(
            client,
            [*acp_trio.testing.SCENARIO_AGENT_COMMAND, "--otel"],
            env=env,
            stderr="capture",
            telemetry=telemetry,
        ) as agent:
            await agent.initialize(client.initialize_request())
            process = agent.connection.config.exit_details
            assert process is not None
        _, tail = process()
    assert tail is not None
    spans = [json.loads(line) for line in tail.decode().splitlines() if line.startswith("{")]
    [initialize] = [s for s in spans if s["name"] == "initialize"]
    resource = initialize["resource"]["attributes"]
    assert resource["service.name"] == "mine"
    assert resource["deployment"] == "test"


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_trio", *args],
        capture_output=True,
        text=True,
        env=env,
        input="",
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("tool", ["scenario-agent", "check-agent", "conduct", "serve", "connect"])
def test_the_tools_take_otel(tool: str) -> None:
    help_text = run_cli(tool, "--help", env=console_env()).stdout
    assert "--otel" in help_text


def test_a_missing_exporter_is_named_and_the_agent_still_serves() -> None:
    env = {**console_env(), "OTEL_TRACES_EXPORTER": "no-such-exporter,console"}
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    done = subprocess.run(
        [sys.executable, "-m", "acp_trio", "scenario-agent", "--otel"],
        capture_output=True,
        text=True,
        env=env,
        input=json.dumps(request) + "\n",
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "no-such-exporter" in done.stderr
    assert json.loads(done.stdout)["id"] == 1
    spans = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert [span["name"] for span in spans] == ["initialize"]  # the console exporter's


def test_configure_sdk_refuses_a_missing_exporter() -> None:
    from acp_trio.contrib.otel import configure_sdk

    with pytest.raises(ValueError, match="no-such-exporter"):
        configure_sdk(environ={"OTEL_TRACES_EXPORTER": "no-such-exporter"})


def test_console_spans_go_to_stderr_not_into_the_protocol() -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    done = subprocess.run(
        [sys.executable, "-m", "acp_trio", "scenario-agent", "--otel"],
        capture_output=True,
        text=True,
        env=console_env(),
        input=json.dumps(request) + "\n",
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [reply] = [json.loads(line) for line in done.stdout.splitlines()]
    assert reply["id"] == 1
    assert reply["result"]["protocolVersion"] == 1
    spans = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert [span["name"] for span in spans] == ["initialize"]


def test_sdk_disabled_installs_nothing() -> None:
    from acp_trio.contrib.otel import configure_sdk

    out = io.StringIO()
    shutdown = configure_sdk(environ={"OTEL_SDK_DISABLED": "true"}, console=out)
    shutdown()
    assert out.getvalue() == ""


def test_check_agent_traces_its_checks_as_one_trace() -> None:
    done = run_cli(
        "check-agent",
        "--otel",
        "--only",
        "session-cancel",
        "--",
        *acp_trio.testing.SCENARIO_AGENT_COMMAND,
        env=console_env(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    spans = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    [root] = [s for s in spans if s["name"] == "check-agent"]
    assert root["parent_id"] is None
    prompts = [s for s in spans if s["name"] == "session/prompt"]
    assert prompts
    assert {s["context"]["trace_id"] for s in spans} == {root["context"]["trace_id"]}
    assert all(s["kind"] == "SpanKind.CLIENT" for s in prompts)
