"""The checks of ``check_client`` (the report they make up is
:class:`~acp_trio.testing._check._report.ClientCheckReport`), and their
results read back from the agent side's report file."""

from __future__ import annotations

from typing import Any

import attrs

from acp_trio.testing._check._report import (
    CheckResult,
    Level,
    Rule,
    Verdict,
)

__all__ = ["CLIENT_CHECKS", "ClientCheckInfo", "result", "results_from_json"]


@attrs.frozen
class ClientCheckInfo:
    """A check ``check_client`` runs: its name, level, what it checks, and the
    protocol sentence it rests on (whose normative word gives the level)."""

    name: str
    level: Level
    description: str
    rule: Rule

    def __attrs_post_init__(self) -> None:
        if not self.rule.fits(self.level):
            raise ValueError(
                f"check {self.name!r} is {self.level.value}, but rests on a {self.rule.word}"
            )


_R, _O = Level.REQUIRED, Level.RECOMMENDED

#: The stdio rule for what a client writes.
_VALID_INPUT = Rule(
    "MUST NOT",
    "transports#stdio",
    "the client writes nothing to the agent's stdin that is not a valid ACP message",
)
_ONE_ANSWER = Rule(
    "MUST",
    "JSON-RPC 2.0 §5; cancellation#cancel_request-notification",
    "every request gets exactly one response, a cancelled one too: the receiver of "
    "$/cancel_request MUST still answer the request (a result, or -32800)",
)
_AS_SPECIFIED = (
    "MUST",
    "initialization#protocol-version; initialization#client-capabilities",
)

#: Every check of ``check-client``, in the order the agent side runs them.
CLIENT_CHECKS: tuple[ClientCheckInfo, ...] = (
    ClientCheckInfo(
        "initialize",
        _R,
        "the first message is an initialize request with an integer protocolVersion "
        "and a clientCapabilities object",
        Rule(
            "MUST",
            "initialization",
            "the client initializes the connection first, with the latest protocol version it "
            "supports and its capabilities",
        ),
    ),
    ClientCheckInfo(
        "session-new",
        _R,
        "session/new has an absolute cwd and an mcpServers array",
        Rule(
            "MUST",
            "session-setup#working-directory",
            "the session's cwd is an absolute path (mcpServers, an array, is required by the "
            "schema)",
        ),
    ),
    ClientCheckInfo(
        "prompt",
        _R,
        "session/prompt names the session and carries a content-block array",
        _VALID_INPUT,
    ),
    ClientCheckInfo(
        "unknown-notification",
        _R,
        "an unknown notification gets no reply and the client keeps answering",
        Rule(
            "MUST NOT",
            "JSON-RPC 2.0 §4.1; extensibility#custom-notifications",
            "a notification is never answered, not even with an error; unrecognized "
            "notifications SHOULD be ignored",
        ),
    ),
    ClientCheckInfo(
        "unknown-method",
        _R,
        "a request for an unknown method gets an error reply (-32601)",
        Rule(
            "MUST",
            "JSON-RPC 2.0 §5, §5.1; extensibility#custom-requests",
            "every call gets a response, with an error object when it fails (-32601 for a "
            "method it does not know)",
        ),
    ),
    ClientCheckInfo(
        "unknown-update",
        _O,
        "a session/update of an unknown kind is tolerated",
        Rule(
            "SHOULD",
            "initialization#capabilities; extensibility",
            "new protocol features are not breaking changes, and what a receiver does not "
            "recognize it SHOULD ignore",
        ),
    ),
    ClientCheckInfo(
        "malformed-input",
        _O,
        "a line that is not JSON is tolerated (-32700 or nothing)",
        Rule(
            "none",
            "transports#stdio",
            "the agent MUST NOT write such a line, so nothing says how a client takes one",
        ),
    ),
    ClientCheckInfo(
        "fs-read",
        _R,
        "fs/read_text_file, if advertised, answers the file's content "
        "(or refuses with an error other than -32601)",
        Rule(
            *_AS_SPECIFIED,
            "peers act according to the specification they agreed on: a client advertising "
            "fs.readTextFile serves fs/read_text_file with the file's content",
        ),
    ),
    ClientCheckInfo(
        "fs-write",
        _R,
        "fs/write_text_file, if advertised, writes the content "
        "(or refuses with an error other than -32601)",
        Rule(
            "MUST",
            "file-system#writing-files",
            "a client advertising fs.writeTextFile writes the content, and creates the file if "
            "it does not exist",
        ),
    ),
    ClientCheckInfo(
        "terminal",
        _R,
        "terminal/create, if advertised, runs a command: wait_for_exit gives its exit "
        "status, terminal/output its output, then terminal/release "
        "(or refuses with an error other than -32601)",
        Rule(
            *_AS_SPECIFIED,
            "peers act according to the specification they agreed on: a client advertising "
            "terminal serves the terminal methods as the protocol defines them",
        ),
    ),
    ClientCheckInfo(
        "permission-outcome",
        _R,
        "session/request_permission gets a valid outcome: cancelled, or selected "
        "with an offered optionId",
        _VALID_INPUT,
    ),
    ClientCheckInfo(
        "cancel-request",
        _R,
        "a request cancelled with $/cancel_request gets one reply: -32800, "
        "or a result if it was answered first",
        _ONE_ANSWER,
    ),
    ClientCheckInfo(
        "session-cancel",
        _O,
        "at the cue `check-client: cancel now` the client sends session/cancel for the session",
        Rule(
            "MAY",
            "prompt-turn#cancellation",
            "a client MAY cancel an ongoing prompt turn at any time with session/cancel (the "
            "cue stands for the user's stop button)",
        ),
    ),
    ClientCheckInfo(
        "cancelled-permission",
        _R,
        "after the client's session/cancel, its pending permission request gets the "
        "cancelled outcome",
        Rule(
            "MUST",
            "prompt-turn#cancellation",
            "after session/cancel the client answers every pending session/request_permission "
            "of the turn with the cancelled outcome",
        ),
    ),
    ClientCheckInfo(
        "idle-cancel",
        _O,
        "a session/cancel that reaches the agent after the turn ended (the cue, then the "
        "answer at once) leaves the session usable: the next prompt comes, and no stale "
        "session/cancel follows it",
        Rule(
            "MAY",
            "prompt-turn#5-continue-conversation; prompt-turn#cancellation",
            "once a turn completes the client may prompt again; a cancel that comes after the "
            "turn ended has no turn to end, so it must not end the next one",
        ),
    ),
    ClientCheckInfo(
        "ignored-cancel",
        _O,
        "when the agent ignores the client's session/cancel, the client does not hang: "
        "within --cancel-wait seconds it sends $/cancel_request for the prompt, gives the "
        "turn up (prompts again) or closes",
        Rule(
            "MAY",
            "cancellation#cancel_request-notification; prompt-turn#cancellation",
            "the calling side MAY wait for the answer to what it cancelled; nothing bounds an "
            "agent's answer, so a client that only waits hangs with it",
        ),
    ),
    ClientCheckInfo(
        "usable-after-ignored-cancel",
        _O,
        "after a turn whose session/cancel the agent ignored, the client's next prompt on "
        "the same session is sent and answered",
        Rule(
            "MAY",
            "prompt-turn#5-continue-conversation",
            "once a turn is over the client may send another prompt on the session: a turn "
            "given up after an ignored cancel leaves the session usable",
        ),
    ),
    ClientCheckInfo(
        "one-reply",
        _R,
        "every request of the agent gets exactly one well-formed reply, and no reply "
        "names an id the agent did not use",
        _ONE_ANSWER,
    ),
    ClientCheckInfo(
        "jsonrpc", _R, "every line the client writes is one JSON-RPC 2.0 message", _VALID_INPUT
    ),
)

_INFO = {info.name: info for info in CLIENT_CHECKS}


def result(
    name: str,
    verdict: Verdict,
    reason: str,
    latency: float | None = None,
    evidence: tuple[str, ...] = (),
) -> CheckResult:
    info = _INFO[name]
    return CheckResult(name, info.level, verdict, reason, latency, info.description, evidence)


def results_from_json(checks: Any, missing_reason: str) -> tuple[CheckResult, ...]:
    """The results of the agent side's report file, every check once, in
    order; a check the file lacks is skipped for ``missing_reason``."""
    found: dict[str, CheckResult] = {}
    for item in checks if isinstance(checks, list) else []:
        try:
            name = item["name"]
            verdict = Verdict(item["verdict"])
            latency = item.get("latency_ms")
            evidence = tuple(str(line) for line in item.get("evidence") or ())
            found[name] = result(
                name,
                verdict,
                str(item["reason"]),
                None if latency is None else latency / 1000,
                evidence,
            )
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(
        found.get(info.name) or result(info.name, Verdict.SKIP, missing_reason)
        for info in CLIENT_CHECKS
    )
