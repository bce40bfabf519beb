// RPent operator dashboard: loads a state snapshot, then applies the event stream on top of it
// (the reducer is state.js). Events carry increasing ids; anything at or below the snapshot's
// last_event_id is already in it.
"use strict";

const S = { spec: null, state: null, lastId: 0, source: null, resyncing: false, buffer: [], frames: {}, dirty: false,
  clockOffset: 0, ended: false };
const KINDS = ["session", "component", "task_started", "tool_started", "tool_stage", "tool_finished", "planner_text",
  "finish", "toolkit_closed", "counters", "operator_message", "operator_note", "abort_requested", "task_ended",
  "operator_request", "operator_request_closed", "scene_reset", "stop_latch"];
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method, headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined, credentials: "same-origin",
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

// ---- event stream --------------------------------------------------------------------------------

async function loadState() {
  S.state = await api("GET", "/api/state");
  S.lastId = S.state.last_event_id;
  S.clockOffset = S.state.server_time - Date.now() / 1000;  // approval deadlines are on the server's clock
  if (!S.state.task) S.state.task = null;
  schedule();
}

function onEvent(event) {
  if (S.resyncing) { S.buffer.push(event); return; }
  const id = Number(event.lastEventId);
  if (id && id <= S.lastId) return;  // already in the snapshot
  if (id) S.lastId = id;
  apply(S.state, event.type, JSON.parse(event.data));
  if (S.state.session.status === "stopped") endStream();
  schedule();
}

async function resync() {
  // Too far behind the server's ring: reload the snapshot, then replay what arrived meanwhile.
  S.resyncing = true;
  try { await loadState(); } finally {
    S.resyncing = false;
    const pending = S.buffer; S.buffer = [];
    pending.forEach(onEvent);
  }
}

function connect() {
  const source = new EventSource(`/api/events?after=${S.lastId}`);
  S.source = source;
  KINDS.forEach((kind) => source.addEventListener(kind, onEvent));
  source.addEventListener("resync", resync);
  source.addEventListener("frame", (event) => showFrame(JSON.parse(event.data)));
  source.onopen = () => setLink(true);
  source.onerror = () => setLink(false);  // the browser reconnects and sends Last-Event-ID itself
}

function endStream() {
  // The session stopped: nothing more will come, so do not keep reconnecting to a server that is gone.
  if (S.ended) return;
  S.ended = true;
  if (S.source) S.source.close();
  pill($("link-status"), "ended");
}

function setLink(online) {
  if (S.ended) return;
  const node = $("link-status");
  node.textContent = online ? "live" : "reconnecting";
  node.className = "pill " + (online ? "online" : "offline");
}

// Latest frame wins: while one picture loads, only the newest counter is remembered.
function showFrame({ channel, n }) {
  const f = S.frames[channel] || (S.frames[channel] = { loading: false, next: 0 });
  f.next = Math.max(f.next, n);
  const img = document.querySelector(`img[data-channel="${channel}"]`);
  if (!img || f.loading) return;
  f.loading = true;
  const shown = f.next;
  const done = (loaded) => {
    f.loading = false;
    if (loaded) {
      img.dataset.frame = String(shown);  // the counter of the picture actually on screen
      img.parentElement.style.aspectRatio = `${img.naturalWidth} / ${img.naturalHeight}`;  // shown whole, never cropped
    }
    if (f.next > shown) showFrame({ channel, n: f.next });
  };
  img.onload = () => done(true);
  img.onerror = () => done(false);
  img.src = `/frames/${encodeURIComponent(channel)}.jpg?v=${shown}`;
}

// ---- rendering -----------------------------------------------------------------------------------

function schedule() {
  if (S.dirty) return;
  S.dirty = true;
  requestAnimationFrame(() => { S.dirty = false; render(); });
}

const words = (status) => String(status).replaceAll("_", " ");
function pill(node, status) { node.textContent = words(status); node.className = "pill " + status; }
const pillEl = (status, attrs = {}) => el("span", { class: "pill " + status, text: words(status), ...attrs });
const yesNo = (v) => (v === true ? "yes" : v === false ? "no" : "—");

function render() {
  const st = S.state;
  if (!st) return;
  const session = st.session;
  pill($("session-status"), session.status);
  $("session-detail").textContent = session.reason || session.error || "";
  $("components").replaceChildren(...st.components.map((c) => el("tr", { "data-component": c.name },
    el("td", { text: c.label }), el("td", { text: c.shared ? "shared" : "per task", class: "muted" }),
    el("td", {}, pillEl(c.status)), el("td", { text: c.detail || "", class: "muted" }))));
  renderHistory(st.tasks);
  renderRequests(st.requests);
  const task = st.task;
  const open = session.status === "ready";  // stopping / stopped: nothing more can be done here
  const running = Boolean(task && ["running", "aborting"].includes(task.status));
  $("start-task").disabled = running || !open;
  for (const id of ["send-message", "add-note", "abort"]) $(id).disabled = !running || !open;
  const latch = st.stop_latch || { latched: false };
  $("stop-hold").disabled = latch.latched;
  $("release-stop").disabled = !latch.latched;
  $("stop-latch").hidden = !latch.latched;
  $("stop-latch").textContent = latch.latched ? "⛔ " + latch.line : "";
  const warning = $("disagreement");
  const disagreement = task && task.summary ? task.summary.disagreement : null;
  warning.hidden = !disagreement;
  warning.textContent = disagreement ? "⚠ " + disagreement : "";
  if (!task) return;
  $("task-title").textContent = `${task.id}${task.fields.task ? " — " + task.fields.task : ""}`;
  pill($("task-status"), task.status);
  $("timeline").tBodies[0].replaceChildren(...task.timeline.map(timelineRow));
  $("timeline-empty").hidden = task.timeline.length > 0;
  const text = $("planner-text");
  $("planner-text-panel").hidden = !task.text;
  if (text.textContent !== task.text) { text.textContent = task.text; text.scrollTop = text.scrollHeight; }
  $("operator-log").replaceChildren(...task.messages.map((m) => el("li", { text: m })));
  const c = task.counters;
  $("counters").replaceChildren(...[["tool calls", c.tool_calls], ["errors", c.errors], ["turns", c.turns ?? "…"],
    ["tokens", c.tokens ?? "…"]].flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { "data-counter": k, text: String(v) })]));
  renderResult(task);
  $("artifacts").replaceChildren(...Object.entries(task.artifacts || {}).map(([name, url]) =>
    el("a", { href: url, target: "_blank", "data-artifact": name, text: name })));
}

function renderResult(task) {
  const finish = task.finish;
  const summary = task.summary || {};
  const row = (label, ...value) => [el("dt", { text: label }), el("dd", {}, ...value)];
  const reset = task.reset || {};
  $("result").replaceChildren(el("dl", {},
    ...row("run", pillEl(task.status), summary.stop_reason ? " " + summary.stop_reason : ""),
    ...row("finish", el("span", { "data-testid": "finish-status", text: finish ? String(finish.status) : "—" }),
      finish && finish.summary ? el("div", { class: "muted", text: finish.summary }) : null),
    ...row("solved()", el("span", { "data-testid": "solved",
      text: task.solved === null || task.solved === undefined ? "—" : String(task.solved) })),
    ...row("planner", el("span", { "data-testid": "task-planner", title: task.recipe || null,
      text: task.planner ? task.planner + (task.recipe ? " · " + recipeLabel(task.recipe) : "") : "—" })),
    ...row("reset", el("span", { "data-testid": "reset-status", text: reset.status || "—" }),
      reset.error ? el("div", { class: "error", text: reset.error }) : null),
    ...row("notes", finish && finish.operator_notes && finish.operator_notes.length ? finish.operator_notes.join("; ") : "—")));
}

function renderHistory(tasks) {
  const list = $("task-history");
  if (!tasks.length) { list.replaceChildren(el("li", { class: "empty", text: "none yet" })); return; }
  list.replaceChildren(...tasks.map((t) => {
    // Each fact once: the run's status, then the planner's finish only where it says more, then solved().
    const parts = [];
    if (t.finish_status && t.finish_status !== t.status) parts.push("finish " + t.finish_status);
    if (t.solved === true || t.solved === false) parts.push("solved() " + yesNo(t.solved));
    if (t.disagreement) parts.push("finish and solved() disagree");
    return el("li", { "data-task": t.id, class: t.disagreement ? "disagree" : null, title: t.stop_reason || null },
      el("span", { class: "tid", text: t.id }), pillEl(t.status), el("span", { class: "verdict", text: parts.join(" · ") }));
  }));
}

function formatArguments(args) {
  if (!args || typeof args !== "object") return "";
  return Object.entries(args).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`).join("  ");
}

function timelineRow(r) {
  const media = el("td", { class: "media" });
  (r.images || []).forEach((url, i) => {
    const camera = (r.image_labels || [])[i] || `image ${i + 1}`;
    media.append(el("a", { class: "thumb", href: url, target: "_blank", "data-camera": camera, title: camera },
      el("img", { src: url, alt: camera, loading: "lazy" }), el("span", { text: camera })));
  });
  if (r.clip) media.append(el("a", { class: "clip", href: r.clip, target: "_blank", "data-clip": "1", text: "clip ▸" }));
  const args = formatArguments(r.arguments);
  // How it ended, in the words the console uses ("cancelled: <reason>", "failed: grasped=false").
  const said = r.status_text || (r.error ? "error: " + r.error : "");
  const detail = said.startsWith(r.status + ": ") ? said.slice(r.status.length + 2) : (said === r.status ? "" : said);
  return el("tr", { "data-testid": "timeline-row", "data-tool": r.tool, "data-status": r.status },
    el("td", { class: "id", text: String(r.call_id) }), el("td", { class: "tool", text: r.tool }),
    el("td", { class: "args", title: args + (r.result ? "\n→ " + r.result : "") }, el("div", { text: args })),
    el("td", { class: "status" }, pillEl(r.status), detail ? el("div", { class: "detail", title: said, text: detail }) : null),
    el("td", { class: "num", text: r.duration_s != null ? r.duration_s.toFixed(2) + " s" : "" }), media);
}

function renderRequests(requests) {
  const box = $("requests");
  const open = new Set(requests.map((r) => r.id));
  [...box.children].forEach((child) => { if (!open.has(child.dataset.request)) child.remove(); });
  for (const r of requests) {
    if (box.querySelector(`[data-request="${r.id}"]`)) continue;  // keep what the operator is typing
    const approval = r.kind === "approval";
    const answer = approval ? null : el("input", { placeholder: "Your answer", "data-testid": "answer-input" });
    const send = (body) => api("POST", `/api/requests/${encodeURIComponent(r.id)}`, body).catch(showOperatorError);
    const buttons = approval
      ? [el("button", { class: "approve", "data-testid": "approve", onclick: () => send({ approve: true }), text: "Approve" }),
        el("button", { class: "deny", "data-testid": "deny", onclick: () => send({ approve: false }), text: "Deny" })]
      : [el("button", { "data-testid": "answer", onclick: () => send({ answer: answer.value }), text: "Answer" })];
    box.append(el("div", { class: "request", "data-request": r.id, "data-kind": r.kind, "data-testid": "request" },
      el("div", { class: "request-head" }, el("strong", { text: approval ? "Approve motion?" : "Question" }),
        el("span", { class: "countdown", "data-testid": "countdown" })),
      el("p", { class: "request-text", text: r.text }),
      el("div", { class: "bar" }, el("div", { "data-testid": "countdown-bar" })),
      answer, el("div", { class: "row" }, ...buttons)));
  }
  updateCountdowns();
}

// What a pending request's deadline leaves, on the server's clock: approvals are denied at 0.
function updateCountdowns() {
  if (!S.state) return;
  const now = Date.now() / 1000 + S.clockOffset;
  for (const r of S.state.requests) {
    const card = $("requests").querySelector(`[data-request="${r.id}"]`);
    if (!card || !r.deadline) continue;
    const left = Math.min(r.timeout_s, Math.max(0, r.deadline - now));
    const counter = card.querySelector("[data-testid=countdown]");
    counter.textContent = `${r.kind === "approval" ? "denied" : "unanswered"} in ${Math.ceil(left)} s`;
    counter.dataset.seconds = String(Math.ceil(left));
    counter.classList.toggle("urgent", left < 10);
    card.querySelector("[data-testid=countdown-bar]").style.width = `${(100 * left) / r.timeout_s}%`;
  }
}

function showOperatorError(error) { $("operator-error").textContent = error.message; }

// ---- form and operator actions -------------------------------------------------------------------

function renderForm(spec) {
  $("robot-name").textContent = spec.robot;
  $("planner-name").textContent = spec.planner || "—";
  $("start-task").textContent = spec.task_command || "Start task";
  $("task-fields").replaceChildren(...spec.task_fields.map((f) => {
    const id = "field-" + f.name;
    let input;
    if (f.kind === "choice") {
      input = el("select", { id, name: f.name }, ...f.choices.map((c) => el("option", { value: c, text: c, selected: c === f.default })));
    } else if (f.kind === "bool") {
      return el("div", { class: "field" }, el("label", { class: "check" },
        el("input", { id, name: f.name, type: "checkbox", checked: Boolean(f.default) }), el("span", { text: f.label })),
      f.help ? el("p", { class: "hint", text: f.help }) : null);
    } else if (f.kind === "text") {
      input = el("textarea", { id, name: f.name, rows: 2 });
      input.value = f.default ?? "";
    } else {
      input = el("input", { id, name: f.name, type: "number", step: f.kind === "int" ? "1" : "any", value: f.default ?? "" });
    }
    return el("div", { class: "field" }, el("label", { for: id, text: f.label }), input,
      f.help ? el("p", { class: "hint", text: f.help }) : null);
  }));
  $("frames").replaceChildren(...spec.frame_channels.map((c) => el("figure", { class: "view", "data-view": c.name },
    el("figcaption", {}, c.label, el("span", { text: `≤ ${c.max_fps} fps` })),
    el("div", { class: "view-box" }, el("img", { "data-channel": c.name, "data-testid": "frame-" + c.name, alt: c.label }),
      el("div", { class: "nosignal", text: "no picture yet" })))));
}

function recipeLabel(path) { return (S.spec.recipe_labels || {})[path] || path; }

function renderRunFields(spec) {
  const planners = spec.planners || [];
  $("planner-select").replaceChildren(...planners.map((p) => el("option", {
    value: p.name, disabled: !p.available, selected: p.name === spec.default_planner, title: p.reason || null,
    text: p.available ? p.name : `${p.name} (not available: ${p.reason})` })));
  const replay = planners.find((p) => p.name === "replay");
  const recipes = replay ? replay.recipes : [];
  $("recipe-select").replaceChildren(...recipes.map((r) => el("option", {
    value: r, selected: r === spec.default_recipe, title: r, text: recipeLabel(r) })));
  if (spec.reset) {
    $("reset-row").hidden = false;
    $("reset-check").checked = Boolean(spec.reset.default);
    $("reset-label").textContent = spec.reset.label;
  }
  for (const id of ["planner-select", "recipe-select", "reset-check"]) $(id).addEventListener("change", showPreview);
  showPreview();
}

function runChoice() {
  const planner = $("planner-select").value || null;
  const choice = { planner, recipe: planner === "replay" ? ($("recipe-select").value || null) : null };
  if (S.spec.reset) choice.reset = $("reset-check").checked;
  return choice;
}

function showPreview() {
  const c = runChoice();
  $("recipe-row").hidden = c.planner !== "replay";
  if (!c.planner) { $("run-preview").textContent = "No planner can run here: see the reasons in the list."; return; }
  const what = c.recipe ? `replay of ${recipeLabel(c.recipe)}` : `the ${c.planner} planner`;
  const before = S.spec.reset && c.reset ? "scene reset, then " : "";
  const after = S.spec.reset && !c.reset ? ", without a reset" : "";
  $("run-preview").textContent = `Will run: ${before}${what}${after}.`;
}

function formValues() {
  const fields = {};
  for (const f of S.spec.task_fields) {
    const input = $("field-" + f.name);
    fields[f.name] = f.kind === "bool" ? input.checked : input.value;
  }
  return fields;
}

function wire() {
  $("task-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    $("form-error").textContent = "";
    try { await api("POST", "/api/tasks", { fields: formValues(), ...runChoice() }); } catch (error) { $("form-error").textContent = error.message; }
  });
  const textAction = (inputId, path) => async () => {
    const input = $(inputId);
    if (!input.value.trim()) return;
    $("operator-error").textContent = "";
    try { await api("POST", path, { text: input.value }); input.value = ""; } catch (error) { showOperatorError(error); }
  };
  $("send-message").addEventListener("click", textAction("message-input", "/api/task/message"));
  $("add-note").addEventListener("click", textAction("note-input", "/api/task/note"));
  $("abort").addEventListener("click", async () => {
    $("operator-error").textContent = "";
    try { await api("POST", "/api/task/abort", { reason: "operator pressed Abort" }); } catch (error) { showOperatorError(error); }
  });
  $("stop-hold").addEventListener("click", async () => {
    $("operator-error").textContent = "";
    try { await api("POST", "/api/stop", { reason: "the operator pressed Stop" }); } catch (error) { showOperatorError(error); }
  });
  $("release-stop").addEventListener("click", async () => {
    $("operator-error").textContent = "";
    try { await api("POST", "/api/stop/release", {}); } catch (error) { showOperatorError(error); }
  });
  setInterval(updateCountdowns, 250);
}

async function boot() {
  try {
    S.spec = await api("GET", "/api/spec");
    renderForm(S.spec);
    renderRunFields(S.spec);
    wire();
    await loadState();
    connect();
  } catch (error) {
    $("form-error").textContent = "dashboard failed to load: " + error.message;
  }
}

boot();
