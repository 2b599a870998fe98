"""The sans-IO JSON-RPC 2.0 core: bytes in, events out, no Trio, no schema.

- ``_framing``: newline-delimited frames with a size cap.
- ``_messages``: decode and classify one frame; encode one message.
- ``_limits``: what a frame may cost once parsed (depth, values), checked
  before parsing it, in steps.
- ``_state``: the per-request state table (ids, cancels, exactly one reply).
- ``_peer``: :class:`Peer`, one whole peer in h11's shape (``receive(frame)``
  gives an event; ``send_request``/``respond``/``cancel``/``notify`` give
  bytes), owning every protocol rule and the table.
"""

from acp_trio._jsonrpc._framing import DEFAULT_MAX_MESSAGE_SIZE as DEFAULT_MAX_MESSAGE_SIZE
from acp_trio._jsonrpc._framing import LineDecoder as LineDecoder
from acp_trio._jsonrpc._framing import OversizedFrame as OversizedFrame
from acp_trio._jsonrpc._limits import DEFAULT_MAX_DEPTH as DEFAULT_MAX_DEPTH
from acp_trio._jsonrpc._limits import DEFAULT_MAX_VALUES as DEFAULT_MAX_VALUES
from acp_trio._jsonrpc._limits import RefusedFrame as RefusedFrame
from acp_trio._jsonrpc._limits import StructureCheck as StructureCheck
from acp_trio._jsonrpc._limits import dropped_reply as dropped_reply
from acp_trio._jsonrpc._limits import refused_frame as refused_frame
from acp_trio._jsonrpc._limits import surely_within as surely_within
from acp_trio._jsonrpc._messages import CANCEL_REQUEST_METHOD as CANCEL_REQUEST_METHOD
from acp_trio._jsonrpc._messages import TEMPLATE_FRAME_MAX as TEMPLATE_FRAME_MAX
from acp_trio._jsonrpc._messages import ErrorResponse as ErrorResponse
from acp_trio._jsonrpc._messages import InvalidMessage as InvalidMessage
from acp_trio._jsonrpc._messages import Message as Message
from acp_trio._jsonrpc._messages import Notification as Notification
from acp_trio._jsonrpc._messages import Request as Request
from acp_trio._jsonrpc._messages import RequestId as RequestId
from acp_trio._jsonrpc._messages import Response as Response
from acp_trio._jsonrpc._messages import cancel_request_frame as cancel_request_frame
from acp_trio._jsonrpc._messages import cancelled_reply_frame as cancelled_reply_frame
from acp_trio._jsonrpc._messages import classify as classify
from acp_trio._jsonrpc._messages import decode_frame as decode_frame
from acp_trio._jsonrpc._messages import encode_frame as encode_frame
from acp_trio._jsonrpc._messages import error_response as error_response
from acp_trio._jsonrpc._messages import is_request_id as is_request_id
from acp_trio._jsonrpc._messages import json_backend as json_backend
from acp_trio._jsonrpc._messages import match_cancel_request as match_cancel_request
from acp_trio._jsonrpc._messages import match_cancelled_reply as match_cancelled_reply
from acp_trio._jsonrpc._messages import message_kind as message_kind
from acp_trio._jsonrpc._messages import notification as notification
from acp_trio._jsonrpc._messages import parse_frame as parse_frame
from acp_trio._jsonrpc._messages import request as request
from acp_trio._jsonrpc._messages import response as response
from acp_trio._jsonrpc._messages import use_json_backend as use_json_backend
from acp_trio._jsonrpc._peek import peek_id as peek_id
from acp_trio._jsonrpc._peek import peek_oversized as peek_oversized
from acp_trio._jsonrpc._peer import CancelReceived as CancelReceived
from acp_trio._jsonrpc._peer import NotificationReceived as NotificationReceived
from acp_trio._jsonrpc._peer import Peer as Peer
from acp_trio._jsonrpc._peer import ReplyReceived as ReplyReceived
from acp_trio._jsonrpc._peer import RequestReceived as RequestReceived
from acp_trio._jsonrpc._peer import SendFrame as SendFrame
from acp_trio._jsonrpc._state import IncomingRequest as IncomingRequest
from acp_trio._jsonrpc._state import OutgoingRequest as OutgoingRequest
from acp_trio._jsonrpc._state import Phase as Phase
from acp_trio._jsonrpc._state import RequestTable as RequestTable
from acp_trio._jsonrpc._state import cancel_target as cancel_target
