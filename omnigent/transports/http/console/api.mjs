// The console's only way to the server: the public HTTP API under /v1 (docs/http.md).
// Same origin, so the browser sends the page's Origin and the fence admits it; with
// --auth header the proxy in front sets the identity on every request, as on the page.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function call(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(`/v1${path}`, init);
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || "error", error.message || response.statusText);
  }
  return data;
}

export const api = {
  get: (path) => call("GET", path),
  post: (path, body) => call("POST", path, body ?? {}),

  agents: () => call("GET", "/agents"),
  spec: (id, version) => call("GET", `/agents/${encodeURIComponent(id)}/spec?version=${version}`),
  createSession: (agentId) => call("POST", "/sessions", { agent_id: agentId }),
  session: (id) => call("GET", `/sessions/${encodeURIComponent(id)}`),

  // Every item of a session, oldest first (pages of 100), after an item id if given.
  async items(id, after) {
    const all = [];
    let cursor = after;
    for (;;) {
      const query = new URLSearchParams({ order: "asc", limit: "100" });
      if (cursor) query.set("after", cursor);
      const page = await call("GET", `/sessions/${encodeURIComponent(id)}/items?${query}`);
      all.push(...page.data);
      if (!page.has_more || !page.last_id) return all;
      cursor = page.last_id;
    }
  },

  send: (id, text) =>
    call("POST", `/sessions/${encodeURIComponent(id)}/events`, {
      type: "message",
      data: { role: "user", content: [{ type: "input_text", text }] },
    }),
  interrupt: (id) => call("POST", `/sessions/${encodeURIComponent(id)}/events`, { type: "interrupt", data: {} }),
  stop: (id) => call("POST", `/sessions/${encodeURIComponent(id)}/events`, { type: "stop_session", data: {} }),
  resolve: (sessionId, elicitationId, action, content) =>
    call(
      "POST",
      `/sessions/${encodeURIComponent(sessionId)}/elicitations/${encodeURIComponent(elicitationId)}/resolve`,
      content === undefined ? { action } : { action, content },
    ),
  screen: (sessionId, resourceId) =>
    call(
      "GET",
      `/sessions/${encodeURIComponent(sessionId)}/resources/${encodeURIComponent(resourceId)}/screen?scrollback=200`,
    ),
};

// The event types a session stream carries (docs/http.md); an EventSource hears a
// named event only through a listener for that name.
export const SESSION_EVENTS = [
  "session.status",
  "response.created",
  "response.output_text.delta",
  "response.output_item.done",
  "response.completed",
  "response.failed",
  "response.cancelled",
  "response.elicitation_request",
  "response.elicitation_resolved",
  "session.child_session.updated",
  "session.inbox.updated",
  "session.resource.created",
  "session.resource.deleted",
  "session.changed_files.invalidated",
];

export const FEED_EVENTS = ["feed.snapshot", "session.updated", "feed.synced", "session.deleted"];

// Open an EventSource and hand every named event's parsed data to onEvent.
export function listen(url, names, onEvent, onState) {
  const source = new EventSource(url);
  for (const name of names) {
    source.addEventListener(name, (message) => onEvent(JSON.parse(message.data), message));
  }
  source.addEventListener("error", (message) => {
    if (message.data) onEvent({ type: "error", ...JSON.parse(message.data) }, message);
    if (onState) onState(source.readyState === EventSource.CLOSED ? "closed" : "reconnecting");
  });
  source.addEventListener("open", () => onState && onState("open"));
  return source;
}
