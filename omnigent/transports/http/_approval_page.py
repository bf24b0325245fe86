"""The approval page: ``GET``/``POST /approve/{session_id}/{elicitation_id}``.

In ``url`` mode (``OMNIGENT_ELICITATION_MODE=url``, the default) an elicitation's
``params.url`` is this page's path. ``GET`` shows the request — message, tool name,
tool input pretty-printed, the questions of an ``AskUserQuestion``, the fields of an
MCP ``requestedSchema`` — and a plain ``<form method="post">`` with Accept and Decline
buttons; no JavaScript. ``POST`` resolves it and shows the outcome.

Visibility follows the JSON route (``GET /v1/sessions/{id}/elicitations/{eid}``): the
page works under the owner's id and under any ancestor's; the ``POST`` answers *as the
owner* (the caller needs edit on the page's session and on the owner). A request that
is answered, expired, unknown or not visible from the session shows a page saying it
is no longer pending, with ``200`` — the same for all, as the JSON route does.

Every value shown is escaped with :func:`html.escape`. The page forbids scripts,
framing and cross-origin form targets (``Content-Security-Policy``). A form on another
site cannot answer for the person, for two independent reasons:

* the form carries a token (a hidden ``token`` field) that is an HMAC, under the app's
  secret, of the caller, the page's session and the elicitation: a ``POST`` without
  the token of *this* page is ``403``, and another site cannot read the page to learn
  it;
* a ``POST`` whose ``Origin`` is not the server's own is ``403`` whether or not
  ``Sec-Fetch-Site`` is present (``--allowed-origin`` does not apply here: the form is
  served by this server, so only its own origin posts it), and so is one whose
  ``Sec-Fetch-Site`` says another site sent it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from html import escape
from typing import Any

from quart import Blueprint, Response, request
from werkzeug.datastructures import MultiDict

from ...core import ELICITATION_ACTIONS as ACTIONS
from ...errors import CrossSiteRequest, Forbidden, InvalidInput
from ...model import ElicitationRequest
from ._access import EDIT, READ, session_access
from ._elicitation_routes import visible_pending
from ._fence import Fence, accepts, own_scheme
from ._params import owner, state

__all__ = ["blueprint"]

blueprint = Blueprint("omnigent_approval_page", __name__)

_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}
_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:50rem;margin:2rem auto;padding:0 1rem}"
    "pre{background:#f4f4f4;padding:1rem;overflow:auto;white-space:pre-wrap}"
    "fieldset{margin:1rem 0}button{font-size:1rem;margin-right:1rem;padding:.4rem 1.2rem}"
)
_GONE = "This request is no longer pending: it was answered, withdrawn, or does not exist."


_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
# The approval form is served here: only this server's own origin posts it.
_OWN_ORIGIN_ONLY = Fence()


def form_token(session_id: str, elicitation_id: str) -> str:
    """The approval form's token for the caller, this page's session and elicitation."""
    message = "\0".join(("approve", owner(), session_id, elicitation_id)).encode()
    digest = hmac.new(state().secret, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


@blueprint.get("/approve/<session_id>/<elicitation_id>")
async def show(session_id: str, elicitation_id: str) -> Response:
    await session_access(session_id, READ)
    pending = await visible_pending(session_id, elicitation_id)
    if pending is None:
        return _page("Nothing to approve", f"<p>{escape(_GONE)}</p>")
    return _page(
        "Approval requested", _request_html(pending, form_token(session_id, elicitation_id))
    )


@blueprint.post("/approve/<session_id>/<elicitation_id>")
@accepts(*_FORM_TYPES)
async def answer(session_id: str, elicitation_id: str) -> Response:
    await session_access(session_id, EDIT)
    try:
        _OWN_ORIGIN_ONLY.check_origin(
            request.headers,
            host=request.headers.get("Host"),
            state_changing=True,
            scheme=own_scheme(request.headers, request.scheme),
        )
    except CrossSiteRequest:
        raise CrossSiteRequest(
            "the approval form must be sent from this server's own page"
        ) from None
    form = await request.form
    token = form.get("token", "")
    if not hmac.compare_digest(token.encode(), form_token(session_id, elicitation_id).encode()):
        raise Forbidden(
            "the approval form's token is missing or is not this page's; open the page "
            "again and answer there"
        )
    action = form.get("action")
    if action not in ACTIONS:
        raise InvalidInput.at("action", "must be one of 'accept', 'decline', 'cancel'")
    pending = await visible_pending(session_id, elicitation_id)
    if pending is None:
        return _page("Nothing to approve", f"<p>{escape(_GONE)}</p>")
    owner = pending.params.target_session_id or session_id
    if owner != session_id:
        await session_access(owner, EDIT)
    content = _content(pending, form) if action == "accept" else None
    resolved = await state().runtime.resolve_elicitation(owner, elicitation_id, action, content)
    if not resolved:
        return _page("Nothing to approve", f"<p>{escape(_GONE)}</p>")
    outcome = {"accept": "Accepted", "decline": "Declined", "cancel": "Cancelled"}[action]
    body = f"<p><strong>{outcome}.</strong> {escape(pending.params.message)}</p>"
    return _page(outcome, body)


# -- rendering -------------------------------------------------------------------------


def _page(title: str, body: str) -> Response:
    html = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} · omnigent</title><style>{_STYLE}</style></head>"
        f"<body><h1>{escape(title)}</h1>{body}</body></html>\n"
    )
    response = Response(html, status=200, content_type="text/html; charset=utf-8")
    response.headers.update(_HEADERS)
    return response


def _request_html(pending: ElicitationRequest, token: str) -> str:
    params = pending.params
    parts = [f"<p>{escape(params.message)}</p>", "<dl>"]
    facts = [
        ("Tool", params.tool_name),
        ("Policy", params.policy_name),
        ("Phase", params.phase),
        ("Asked by session", params.target_session_id),
    ]
    parts += [f"<dt>{k}</dt><dd><code>{escape(v)}</code></dd>" for k, v in facts if v]
    parts.append("</dl>")
    if params.tool_input is not None:
        pretty = json.dumps(params.tool_input, indent=2, ensure_ascii=False, default=str)
        parts.append(f"<h2>Input</h2><pre>{escape(pretty)}</pre>")
    parts.append('<form method="post">')
    parts.append(f'<input type="hidden" name="token" value="{escape(token)}">')
    parts += _question_inputs(pending)
    parts += _schema_inputs(pending)
    parts.append(
        '<p><button type="submit" name="action" value="accept">Accept</button>'
        '<button type="submit" name="action" value="decline" formnovalidate>Decline</button>'
        "</p></form>"
    )
    return "".join(parts)


def _questions(pending: ElicitationRequest) -> list[dict[str, Any]]:
    asked = pending.params.ask_user_question or {}
    questions = asked.get("questions")
    return [q for q in questions if isinstance(q, dict)] if isinstance(questions, list) else []


def _question_inputs(pending: ElicitationRequest) -> list[str]:
    """Radio buttons (checkboxes for ``multiSelect``) for each question, and "Other"."""
    parts: list[str] = []
    for index, question in enumerate(_questions(pending)):
        name = f"q{index}"
        multi = bool(question.get("multiSelect"))
        kind = "checkbox" if multi else "radio"
        legend = escape(str(question.get("header") or question.get("question", "")))
        parts.append(f"<fieldset><legend>{legend}</legend>")
        parts.append(f"<p>{escape(str(question.get('question', '')))}</p>")
        options = question.get("options")
        for option in options if isinstance(options, list) else []:
            label = str(option.get("label", "")) if isinstance(option, dict) else str(option)
            about = option.get("description") if isinstance(option, dict) else None
            note = f" — {escape(str(about))}" if about else ""
            parts.append(
                f'<label><input type="{kind}" name="{name}" value="{escape(label)}"> '
                f"{escape(label)}</label>{note}<br>"
            )
        parts.append(f'<label>Other: <input type="text" name="{name}_other"></label></fieldset>')
    return parts


def _schema_inputs(pending: ElicitationRequest) -> list[str]:
    """One input per property of a flat MCP ``requestedSchema``."""
    parts: list[str] = []
    required = _required(pending)
    for name, prop in _properties(pending).items():
        field, title = escape(f"f_{name}"), escape(str(prop.get("title") or name))
        need = " required" if name in required else ""
        kind = prop.get("type")
        if isinstance(prop.get("enum"), list):
            choices = "".join(
                f'<option value="{escape(str(v))}">{escape(str(v))}</option>' for v in prop["enum"]
            )
            control = f'<select name="{field}"{need}>{choices}</select>'
        elif kind == "boolean":
            control = f'<input type="checkbox" name="{field}" value="true">'
        elif kind in ("number", "integer"):
            step = "1" if kind == "integer" else "any"
            control = f'<input type="number" step="{step}" name="{field}"{need}>'
        else:
            control = f'<input type="text" name="{field}"{need}>'
        about = prop.get("description")
        note = f"<br><small>{escape(str(about))}</small>" if about else ""
        parts.append(f"<p><label>{title}: {control}</label>{note}</p>")
    return parts


def _properties(pending: ElicitationRequest) -> dict[str, dict[str, Any]]:
    props = (pending.params.requestedSchema or {}).get("properties")
    if not isinstance(props, dict):
        return {}
    return {str(k): v for k, v in props.items() if isinstance(v, dict)}


def _required(pending: ElicitationRequest) -> list[str]:
    required = (pending.params.requestedSchema or {}).get("required")
    return [str(name) for name in required] if isinstance(required, list) else []


# -- reading the form ------------------------------------------------------------------


def _content(pending: ElicitationRequest, form: MultiDict[str, str]) -> Any:
    """What an accept carries: question answers, schema fields, or nothing."""
    if pending.params.ask_user_question is not None:
        return _answers(pending, form)
    if _properties(pending):
        return _fields(pending, form)
    return None


def _answers(pending: ElicitationRequest, form: MultiDict[str, str]) -> dict[str, str]:
    """``{question text: chosen label(s)}`` — several labels joined with ", ".

    The shape Claude Code's ``AskUserQuestion`` takes in ``answers``; an unanswered
    question is left out.
    """
    answers: dict[str, str] = {}
    for index, question in enumerate(_questions(pending)):
        chosen = [v for v in form.getlist(f"q{index}") if v]
        other = form.get(f"q{index}_other", "").strip()
        if other:
            chosen.append(other)
        if chosen:
            answers[str(question.get("question", f"q{index}"))] = ", ".join(chosen)
    return answers


def _fields(pending: ElicitationRequest, form: MultiDict[str, str]) -> dict[str, Any]:
    """Typed content for a ``requestedSchema`` (422 naming ``f_<name>`` when wrong)."""
    required = _required(pending)
    content: dict[str, Any] = {}
    for name, prop in _properties(pending).items():
        raw, loc, kind = form.get(f"f_{name}", ""), f"f_{name}", prop.get("type")
        if kind == "boolean":
            content[name] = raw == "true"
        elif raw == "":
            if name in required:
                raise InvalidInput.at(loc, "required")
        elif isinstance(prop.get("enum"), list) and raw not in [str(v) for v in prop["enum"]]:
            raise InvalidInput.at(loc, "must be one of the listed options")
        elif kind in ("number", "integer"):
            content[name] = _number(raw, kind, loc)
        else:
            content[name] = raw
    return content


def _number(raw: str, kind: str, loc: str) -> int | float:
    try:
        return int(raw) if kind == "integer" else float(raw)
    except ValueError:
        what = "an integer" if kind == "integer" else "a number"
        raise InvalidInput.at(loc, f"must be {what}") from None
