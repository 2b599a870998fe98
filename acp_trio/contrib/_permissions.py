"""Answering ``session/request_permission`` with an approver.

A :class:`PermissionBroker` is the client's ``request_permission``: it hands
each request, as a :class:`PendingPermission`, to an *approver* (any async
function: a UI prompt, a policy, an automatic answer) and turns the option
the approver picks into the protocol's answer::

    class Editor(acp_trio.Client):
        def __init__(self) -> None:
            self.permissions = PermissionBroker(auto_allow)

        async def request_permission(self, params):
            return await self.permissions.handle(params)

Cancellation needs no code in the approver:

- ``session/cancel`` sent by this client (:meth:`AgentProxy.cancel`,
  :meth:`AgentProxy.cancel_turn`, or a cancelled :meth:`AgentProxy.prompt`)
  cancels the approver of every pending request of that session (a Trio
  cancellation in its task) and each request is answered with the outcome
  ``cancelled``, as ACP requires; a request of that session arriving before
  the cancelled turn ends is answered ``cancelled`` without calling the
  approver.
- ``$/cancel_request`` from the agent for one request cancels that
  request's approver; the SDK answers it ``-32800``.

An approver that raises :class:`~acp_trio.RequestError` has that error sent
as the answer; one that raises anything else, or picks an option that was
not offered, gets the request answered ``-32603`` with a message saying
what went wrong (and the error logged): the connection goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Container
from typing import Final

import attrs

from acp_trio._exceptions import RequestError
from acp_trio.contrib._session_state import SessionStates
from acp_trio.schema import (
    PermissionOption,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SelectedPermissionOutcome,
)
from acp_trio.schema._generated_types import ToolKind

__all__ = [
    "Approver",
    "PendingPermission",
    "PermissionBroker",
    "PermissionBrokerMixin",
    "auto_allow",
    "auto_reject",
    "policy",
    "yes_no",
]

_log = logging.getLogger("acp_trio.contrib")

_ALLOW: Final = ("allow_once", "allow_always")
_REJECT: Final = ("reject_once", "reject_always")


@attrs.frozen(eq=False)
class PendingPermission:
    """One permission request waiting for its answer, as an approver sees it.

    :attr:`title` and :attr:`kind` are the request's own (an acp_trio agent's
    :meth:`ClientProxy.ask_permission` sends both for a handle), or, when the
    agent sent only the tool call's id, those the session's tool call was
    last reported with (if the broker was given the client's
    :class:`SessionStates`).
    """

    #: The request as received.
    params: RequestPermissionRequest
    #: The tool call's title (``""`` if nobody said).
    title: str = ""
    #: The tool call's kind, if known.
    kind: ToolKind | None = None

    @property
    def session_id(self) -> str:
        """The session the request belongs to."""
        return self.params.session_id

    @property
    def tool_call_id(self) -> str:
        """The id of the tool call the agent wants to run."""
        return self.params.tool_call.tool_call_id

    @property
    def options(self) -> list[PermissionOption]:
        """The options offered, in the agent's order."""
        return self.params.options

    def option(self, *kinds: str) -> PermissionOption | None:
        """The first option offered of the first of ``kinds`` that has one
        (``option("allow_once", "allow_always")``), or ``None``."""
        for kind in kinds:
            for option in self.params.options:
                if option.kind == kind:
                    return option
        return None

    @property
    def allow(self) -> PermissionOption | None:
        """The option that allows: ``allow_once`` if offered, else
        ``allow_always``, else ``None``."""
        return self.option(*_ALLOW)

    @property
    def reject(self) -> PermissionOption | None:
        """The option that rejects: ``reject_once`` if offered, else
        ``reject_always``, else ``None``."""
        return self.option(*_REJECT)


#: An approver: picks one of the offered options (the option, or its id).
#: It may wait as long as it likes (a user's answer); it is cancelled if the
#: turn is.
Approver = Callable[[PendingPermission], Awaitable[PermissionOption | str]]


async def auto_allow(request: PendingPermission) -> PermissionOption:
    """Allow: the ``allow_once`` option, else ``allow_always`` (once first:
    the narrowest grant, as the test client of ``check-client`` offers). If
    no allowing option is offered, reject (``reject_once``, then
    ``reject_always``); with neither, the first option.

    Returns at once, without a checkpoint: no cancellation interrupts it.
    """
    return request.allow or request.reject or request.options[0]


async def auto_reject(request: PendingPermission) -> PermissionOption:
    """Reject: ``reject_once``, else ``reject_always``; with neither, the
    first option offered (an agent that offers no way to refuse).

    Returns at once, without a checkpoint: no cancellation interrupts it.
    """
    return request.reject or request.options[0]


def policy(
    *,
    allow: Callable[[PendingPermission], bool] | None = None,
    reject: Callable[[PendingPermission], bool] | None = None,
    allow_kinds: Container[str] = (),
    otherwise: Approver = auto_reject,
) -> Approver:
    """An approver deciding by rules: a request ``reject`` matches is
    rejected, then one whose tool kind is in ``allow_kinds`` or that
    ``allow`` matches is allowed (as :func:`auto_allow`), and the rest go
    to ``otherwise`` (default: reject; pass an interactive approver to ask
    about those)::

        approver = policy(allow_kinds={"read", "search"}, otherwise=ask_the_user)
    """

    async def decide(request: PendingPermission) -> PermissionOption | str:
        if reject is not None and reject(request):
            return await auto_reject(request)
        if (request.kind is not None and request.kind in allow_kinds) or (
            allow is not None and allow(request)
        ):
            return await auto_allow(request)
        return await otherwise(request)

    return decide


def yes_no(ask: Callable[[PendingPermission], Awaitable[bool]]) -> Approver:
    """An approver from a yes/no question (a dialog, a terminal prompt):
    ``True`` allows (as :func:`auto_allow`), ``False`` rejects (as
    :func:`auto_reject`)."""

    async def decide(request: PendingPermission) -> PermissionOption:
        if await ask(request):
            return await auto_allow(request)
        return await auto_reject(request)

    return decide


class PermissionBroker:
    """Routes a client's permission requests to an approver.

    Use :meth:`handle` as (or from) :meth:`Client.request_permission`.
    ``states``, the client's :class:`SessionStates`, lets the approver see
    the title and kind of a tool call the request names only by id.
    :attr:`pending` lists the requests waiting for the approver (a UI can
    show them); a cancelled one leaves it when its approver is cancelled.
    """

    def __init__(self, approver: Approver, *, states: SessionStates | None = None) -> None:
        #: The approver; may be replaced at any time (new requests use it).
        self.approver = approver
        self.states = states
        self._pending: dict[int, PendingPermission] = {}

    @property
    def pending(self) -> list[PendingPermission]:
        """The requests waiting for the approver, oldest first."""
        return list(self._pending.values())

    def pending_for(self, session_id: str) -> list[PendingPermission]:
        """The pending requests of one session."""
        return [p for p in self._pending.values() if p.session_id == session_id]

    def describe(self, params: RequestPermissionRequest) -> PendingPermission:
        """The :class:`PendingPermission` the approver gets for ``params``."""
        title = params.tool_call.title
        kind = params.tool_call.kind
        if self.states is not None and params.session_id in self.states:
            call = self.states[params.session_id].tool_calls.get(params.tool_call.tool_call_id)
            if call is not None:
                title = title if isinstance(title, str) and title else call.title
                kind = kind if isinstance(kind, str) else call.kind
        return PendingPermission(
            params,
            title=title if isinstance(title, str) else "",
            kind=kind if isinstance(kind, str) else None,
        )

    async def handle(self, params: RequestPermissionRequest) -> RequestPermissionResponse:
        """Ask the approver; answer with the option it picked.

        Raises :class:`RequestError`: the approver's own, or ``-32603`` if
        it raised something else or picked an option not offered. A
        cancellation (the turn's ``session/cancel``, the agent's
        ``$/cancel_request``) cancels the approver and goes on; the SDK
        answers the request (``cancelled``, or ``-32800``)."""
        request = self.describe(params)
        key = id(request)
        self._pending[key] = request
        try:
            try:
                choice = await self.approver(request)
            except RequestError:
                raise
            except Exception as exc:
                _log.error("the permission approver %r failed", self.approver, exc_info=exc)
                raise RequestError.internal_error(
                    {
                        "reason": f"the permission approver failed: {type(exc).__name__}: {exc}",
                        "toolCallId": request.tool_call_id,
                    }
                ) from exc
        finally:
            del self._pending[key]
        option_id = choice.option_id if isinstance(choice, PermissionOption) else choice
        offered = [option.option_id for option in params.options]
        if option_id not in offered:
            reason = (
                f"the permission approver chose option {option_id!r}, "
                f"which was not offered (offered: {offered})"
            )
            _log.error("%s", reason)
            raise RequestError.internal_error(
                {"reason": reason, "toolCallId": request.tool_call_id}
            )
        return RequestPermissionResponse(outcome=SelectedPermissionOutcome(option_id=option_id))


class PermissionBrokerMixin:
    """Mixin for a :class:`~acp_trio.Client` subclass: answers
    ``session/request_permission`` through :attr:`permissions`, which the
    subclass sets::

        class Editor(PermissionBrokerMixin, acp_trio.Client):
            def __init__(self) -> None:
                self.permissions = PermissionBroker(auto_allow)

    Put it before :class:`~acp_trio.Client` in the bases.
    """

    permissions: PermissionBroker

    async def request_permission(
        self, params: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        """Serve ``session/request_permission`` with :attr:`permissions`: see
        :meth:`PermissionBroker.handle` for what it raises and what a
        cancellation does.
        """
        return await self.permissions.handle(params)
