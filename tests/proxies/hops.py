"""Reading the conductor's per-hop trace (``serve_conductor(trace=...)``) in
tests: every hop's wire, and the links between the hops' requests."""

from __future__ import annotations

import json
from typing import Any

CANCEL = "$/cancel_request"
SUCCESSOR = "proxy/successor"


class Frame:
    """One message on one hop; ``sender`` is ``"conductor"`` or ``"peer"``."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.hop: int = record["hop"]
        self.sender = "conductor" if record["direction"].startswith("conductor->") else "peer"
        self.message: dict[str, Any] = record["message"]

    @property
    def is_request(self) -> bool:
        return "method" in self.message and "id" in self.message

    @property
    def is_reply(self) -> bool:
        return "method" not in self.message

    @property
    def inner(self) -> tuple[str, Any]:
        """The method and params, unwrapped from ``proxy/successor`` (a
        reply has neither: ``("", None)``)."""
        if "method" not in self.message:
            return "", None
        method, params = self.message["method"], self.message.get("params")
        if method == SUCCESSOR:
            return params["method"], params.get("params")
        return method, params

    def __repr__(self) -> str:
        return f"hop {self.hop} from {self.sender}: {self.message}"


class Trace:
    def __init__(self, text: str) -> None:
        self.records = [json.loads(line) for line in text.splitlines()]
        self.frames = [Frame(r) for r in self.records if "message" in r]
        self.forwards = [r for r in self.records if r.get("event") == "forward"]

    def hops(self) -> list[int]:
        return sorted({f.hop for f in self.frames})

    def requests(self, inner_method: str | None = None) -> list[Frame]:
        return [f for f in self.frames if f.is_request and inner_method in (None, f.inner[0])]

    def replies_to(self, request: Frame) -> list[Frame]:
        return [
            f
            for f in self.frames
            if f.hop == request.hop
            and f.is_reply
            and f.sender != request.sender
            and f.message.get("id") == request.message["id"]
        ]

    def cancels_of(self, request: Frame) -> list[Frame]:
        return [
            f
            for f in self.frames
            if f.hop == request.hop
            and f.sender == request.sender
            and f.message.get("method") == CANCEL
            and f.message["params"]["requestId"] == request.message["id"]
        ]

    def settled(self) -> bool:
        """Every request on every hop has its answer."""
        return all(self.replies_to(r) for r in self.requests())

    def check_each_hop(self) -> None:
        """The per-hop rules, on each hop's own wire: every request answered
        exactly once; every ``$/cancel_request`` names a request its sender
        sent on that same hop, once; no cancel is ever wrapped or passed on
        in an envelope."""
        for request in self.requests():
            assert len(self.replies_to(request)) == 1, request
            assert len(self.cancels_of(request)) <= 1, request
        for frame in self.frames:
            if frame.message.get("method") == CANCEL:
                target = frame.message["params"]["requestId"]
                assert any(
                    r.hop == frame.hop and r.sender == frame.sender and r.message["id"] == target
                    for r in self.requests()
                ), frame
            assert frame.inner[0] != CANCEL or frame.message.get("method") == CANCEL, frame

    def forwarded(self, hop: int, request_id: Any) -> tuple[int, Any]:
        """Where the conductor passed the request (hop, id) on."""
        (link,) = [f["to"] for f in self.forwards if f["from"] == {"hop": hop, "id": request_id}]
        return link["hop"], link["id"]

    def request(self, hop: int, sender: str, request_id: Any) -> Frame:
        (found,) = [
            r
            for r in self.requests()
            if (r.hop, r.sender, r.message["id"]) == (hop, sender, request_id)
        ]
        return found

    def through_proxy(self, incoming: Frame) -> Frame:
        """The request a pass-through proxy sent on for ``incoming`` (one the
        conductor sent it): the conductor cannot see inside a proxy, so this
        is by content, the same method and params, unwrapped."""
        (out,) = [
            r
            for r in self.requests()
            if r.hop == incoming.hop and r.sender == "peer" and r.inner == incoming.inner
        ]
        return out
