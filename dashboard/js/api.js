// The dashboard's only way to the service: fetch with the operator's key, and observer
// WebSockets that authenticate with their first message.

const KEY_NAME = "clinic-dashboard.api-key";
const AUTH_CLOSE_CODES = new Set([1008, 4001, 4401, 4403]);

export const auth = {
  get key() {
    return sessionStorage.getItem(KEY_NAME);
  },
  set(key) {
    sessionStorage.setItem(KEY_NAME, key);
  },
  clear() {
    sessionStorage.removeItem(KEY_NAME);
  },
};

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function request(path, { method = "GET", body, signal, key } = {}) {
  const headers = { Authorization: `Bearer ${key ?? auth.key ?? ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, signal, cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) {
    if (key === undefined) window.dispatchEvent(new CustomEvent("dashboard:unauthorized"));
    throw new ApiError(401, "invalid API key");
  }
  if (!response.ok) {
    let detail = `HTTP ${response.status}`;
    try {
      const payload = await response.json();
      if (typeof payload.detail === "string") detail = payload.detail;
    } catch {
      // not JSON: keep the status
    }
    if (response.status === 403) detail = notAllowed(detail);
    throw new ApiError(response.status, detail);
  }
  return response;
}

/** A 403's reason for a person: what the key's role is, what it needs, whom to ask. */
function notAllowed(detail) {
  const match = /role \((\w+)\).*needs (\w+)/.exec(detail);
  if (!match) return `Not allowed with this key: ${detail}`;
  const [, role, needed] = match;
  return `Not allowed: this key is ${label(role)}; this needs ${label(needed)}. ` +
    `Ask an admin of the workspace for a key with that role.`;
}

/** "read_only" → "read-only" (a role as people write it). */
export function label(role) {
  return String(role).replace("_", "-");
}

/** JSON from the API; throws ApiError (401: the key is wrong or revoked). */
export async function api(path, options = {}) {
  const response = await request(path, options);
  return response.status === 204 ? null : response.json();
}

/** A binary resource (a recording) as a Blob, fetched with the key. */
export async function apiBlob(path, options = {}) {
  return (await request(path, options)).blob();
}

/** Does this key open the API? (true / false; other failures throw) */
export async function checkKey(key) {
  try {
    await request("/api/calls?limit=1", { key });
    return true;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return false;
    throw error;
  }
}

/**
 * An observer stream (`/api/observe` or `/api/calls/{id}/observe`): sends the key first,
 * hands each event to `onEvent` once (a reconnect's replay is deduplicated by call and
 * seq), reports "connecting" / "live" / "closed" / "refused" (auth failed) to `onStatus`, and
 * reconnects with backoff until `close()`.
 */
export function observe(path, onEvent, onStatus = () => {}) {
  const lastSeq = new Map();
  let socket = null;
  let closed = false;
  let delay = 1000;
  let timer = null;

  function connect() {
    if (closed) return;
    onStatus("connecting");
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}${path}`);
    socket.addEventListener("open", () => {
      socket.send(JSON.stringify({ type: "auth", api_key: auth.key ?? "" }));
    });
    socket.addEventListener("message", (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch {
        return;
      }
      if (!event || typeof event !== "object") return;
      delay = 1000;
      onStatus("live");
      if (event.type === "ping" || event.type === "auth_ok") return;
      if (event.call_id && Number.isFinite(event.seq)) {
        if (event.seq <= (lastSeq.get(event.call_id) ?? 0)) return;
        lastSeq.set(event.call_id, event.seq);
      }
      onEvent(event);
    });
    socket.addEventListener("close", (close) => {
      socket = null;
      if (closed) return;
      if (AUTH_CLOSE_CODES.has(close.code)) {
        onStatus("refused");
        return;
      }
      onStatus("closed");
      timer = setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    });
  }

  connect();
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      if (socket) socket.close(1000);
    },
  };
}
