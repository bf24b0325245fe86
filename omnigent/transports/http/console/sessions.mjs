// Every session the user may read, kept live by one stream: GET /v1/feed.
// The feed is snapshot-then-tail: feed.snapshot, a session.updated per session,
// feed.synced, then one session.updated (the session as it is now) or session.deleted
// per change. On a reconnect the browser gets a fresh snapshot; whatever it did not get
// again by feed.synced is gone.

import { FEED_EVENTS, listen } from "./api.mjs";

const ACTIVE = new Set(["launching", "running", "waiting"]);

export function isActive(session) {
  return ACTIVE.has(session.status) || session.busy;
}

export class SessionsStore {
  constructor() {
    this.sessions = new Map();
    this.synced = false;
    this.connection = "connecting";
    this.version = 0;
    this._listeners = new Set();
    this._fresh = null; // ids seen since the last feed.snapshot
    this._scheduled = false;
    this._source = listen(
      "/v1/feed",
      FEED_EVENTS,
      (change) => this._apply(change),
      (state) => {
        this.connection = state;
        this._changed();
      },
    );
  }

  close() {
    this._source.close();
  }

  subscribe(listener) {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  _apply(change) {
    switch (change.type) {
      case "feed.snapshot":
        this._fresh = new Set();
        return;
      case "session.updated":
        this.sessions.set(change.session.id, change.session);
        if (this._fresh) this._fresh.add(change.session.id);
        break;
      case "session.deleted":
        this.sessions.delete(change.session_id);
        break;
      case "feed.synced":
        for (const id of [...this.sessions.keys()]) {
          if (this._fresh && !this._fresh.has(id)) this.sessions.delete(id);
        }
        this._fresh = null;
        this.synced = true;
        break;
      default:
        return;
    }
    this._changed();
  }

  // Listeners hear of changes at most once per frame, however many arrive.
  _changed() {
    this.version += 1;
    if (this._scheduled) return;
    this._scheduled = true;
    requestAnimationFrame(() => {
      this._scheduled = false;
      for (const listener of this._listeners) listener(this.version);
    });
  }

  get(id) {
    return this.sessions.get(id);
  }

  // Children by parent id, each list newest first.
  childrenIndex() {
    const index = new Map();
    for (const session of this.sessions.values()) {
      const parent = session.parent_session_id;
      if (!parent || !this.sessions.has(parent)) continue;
      if (!index.has(parent)) index.set(parent, []);
      index.get(parent).push(session);
    }
    for (const list of index.values()) list.sort(newestFirst);
    return index;
  }

  roots() {
    return [...this.sessions.values()]
      .filter((s) => !s.parent_session_id || !this.sessions.has(s.parent_session_id))
      .sort(newestFirst);
  }

  // Every pending elicitation, once, under the session that owns it (a request
  // mirrored to an ancestor carries target_session_id and is skipped there).
  pendingApprovals() {
    const out = [];
    for (const session of this.sessions.values()) {
      for (const request of session.pending_elicitations || []) {
        if (request.params && request.params.target_session_id) continue;
        out.push({ session, request });
      }
    }
    out.sort((a, b) => a.request.created_at - b.request.created_at);
    return out;
  }
}

export function newestFirst(a, b) {
  return b.created_at - a.created_at;
}
