// The device page: polls the page server (never Triton: it sends no CORS headers) and draws what it says.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "orinkit-token";
const COLOURS = ["#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
const LANE_COLOUR = "rgb(255,0,0)"; // tests read this colour back from the canvas
// A detector's boxes: one colour per class id (tests read them back from the canvas).
const BOX_COLOURS = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9a6324",
  "#800000", "#469990", "#000075", "#808000"];
const boxColour = (classId) => BOX_COLOURS[((classId % BOX_COLOURS.length) + BOX_COLOURS.length) % BOX_COLOURS.length];
const state = { control: false, maxUpload: Infinity, models: [], samples: [], since: null, historyS: 300, errors: {} };

// The token arrives once in the URL; keep it for this tab only and take it out of the address bar and history.
const params = new URLSearchParams(location.search);
if (params.has("token")) {
  sessionStorage.setItem(TOKEN_KEY, params.get("token"));
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
}

class ApiError extends Error {
  constructor(message, hint) { super(message); this.hint = hint || ""; }
}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers);
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  const response = await fetch(path, Object.assign({}, options, { headers }));
  const isJson = (response.headers.get("Content-Type") || "").startsWith("application/json");
  if (!response.ok) {
    const body = isJson ? await response.json() : null;
    if (body && body.error) throw new ApiError(body.error.message, body.error.hint);
    throw new ApiError(`${response.status} ${response.statusText}`);
  }
  return isJson ? response.json() : response.blob();
}

// One visible line per source (models, board, try, control); a success of that source clears its line.
function report(source, error) {
  if (error) state.errors[source] = error.hint ? `${error.message} (${error.hint})` : error.message;
  else delete state.errors[source];
  const lines = Object.values(state.errors);
  $("error").textContent = lines.join("\n");
  $("error").hidden = lines.length === 0;
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

const fmt = (v, digits = 1) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
const tensors = (list) => (list || []).map((t) => `${t.name} ${t.dtype} [${t.dims.join(",")}]`).join("\n");

// --- models ------------------------------------------------------------------------------------------------

async function refreshModels() {
  try {
    const data = await api("/api/models");
    state.control = data.control;
    state.maxUpload = data.max_upload_bytes;
    state.models = data.models;
    $("server").textContent = `Triton ${data.server} (models read from ${data.http})`;
    $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
    $("models-note").textContent = `Queue and compute: mean per request over the last ${data.window_s} s. ` +
      (data.control ? "Control is on." : "Control is off (edge-serve ui --allow-control).");
    renderModels();
    renderModelChoice();
    report("models", null);
  } catch (error) {
    report("models", error);
  }
}

function windowed(model) {
  let ok = 0, failed = 0, queue = 0, compute = 0, seconds = null;
  for (const v of model.versions) {
    const w = v.window;
    if (!w) continue;
    seconds = w.seconds;
    ok += w.success; failed += w.failure;
    if (w.success) { queue += w.queue_ms * w.success; compute += w.compute_ms * w.success; }
  }
  return { ok, failed, seconds, queue: ok ? queue / ok : null, compute: ok ? compute / ok : null };
}

function renderModels() {
  document.querySelectorAll(".control-only").forEach((node) => { node.hidden = !state.control; });
  const body = document.querySelector("#models tbody");
  body.replaceChildren();
  for (const model of state.models) {
    const row = el("tr");
    row.dataset.model = model.name;
    const name = el("td", model.name, "name");
    if (model.kind) name.append(el("div", model.kind, "kind")); // a task kit's words: "detector, 3 classes"
    row.append(name);
    const status = el("td");
    status.append(el("span", model.state, "state state-" + model.state.replace(" ", "-")));
    if (model.reason) status.append(el("div", model.reason, "reason"));
    if (model.config_error) status.append(el("div", model.config_error, "reason"));
    row.append(status);
    row.append(el("td", model.versions.map((v) => `${v.version}: ${v.state || "–"}`).join("\n")));
    row.append(el("td", tensors(model.inputs), "io"));
    row.append(el("td", tensors(model.outputs), "io"));
    const total = model.versions.reduce((a, v) => [a[0] + (v.success || 0), a[1] + (v.failure || 0)], [0, 0]);
    const w = windowed(model);
    row.append(el("td", `${total[0]} ok / ${total[1]} failed` +
      (w.seconds ? `\n+${w.ok} / +${w.failed} in ${w.seconds} s` : "")));
    row.append(el("td", fmt(w.queue, 2), "num"));
    row.append(el("td", fmt(w.compute, 2), "num"));
    if (state.control) row.append(controlCell(model));
    body.append(row);
  }
}

function controlCell(model) {
  const cell = el("td", null, "control-only");
  for (const action of ["load", "unload", "rollback"]) {
    const button = el("button", action);
    button.type = "button";
    button.dataset.action = action;
    button.addEventListener("click", () => control(action, model.name, cell));
    cell.append(button);
  }
  return cell;
}

async function control(action, name, cell) {
  cell.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  try {
    await api(`/api/control/${action}?model=${encodeURIComponent(name)}`, { method: "POST" });
    report("control", null);
  } catch (error) {
    report("control", error);
  }
  await refreshModels();
}

function renderModelChoice() {
  const select = $("try-model");
  const chosen = select.value;
  const usable = state.models.filter((m) => m.state === "READY" && m.image_input);
  // How the upload is fed: the file itself (BYTES, or UINT8 one per byte) or a tensor of the model's size.
  const fed = (i) => (i.mode === "bytes" ? `encoded file as ${i.dtype}` :
    `${i.mode}${i.width ? `, ${i.width}x${i.height}` : ""}`);
  select.replaceChildren(...usable.map((m) => {
    const option = el("option", `${m.name} (${fed(m.image_input)})`);
    option.value = m.name;
    return option;
  }));
  if (usable.some((m) => m.name === chosen)) select.value = chosen;
}

// --- board -------------------------------------------------------------------------------------------------

async function refreshBoard() {
  try {
    const data = await api("/api/board" + (state.since === null ? "" : `?since=${state.since}`));
    state.historyS = data.history_s;
    state.samples.push(...data.samples);
    if (state.samples.length) state.since = state.samples[state.samples.length - 1].t;
    const oldest = state.since - state.historyS;
    while (state.samples.length && state.samples[0].t < oldest) state.samples.shift();
    $("board-source").textContent = `source: ${data.source}, a sample every ${data.interval_s} s` +
      (data.note ? ` (${data.note})` : "") + (data.running ? "" : " (the monitor is not running)");
    const field = (key) => (sample) => sample[key];
    chart("power", data.rails.map((r) => ({ name: r, get: (s) => s.power_mw[r] })), 0);
    chart("temps", data.sensors.map((n) => ({ name: n, get: (s) => s.temps_c[n] })));
    chart("load", [{ name: "CPU", get: field("cpu_load_pct") }, { name: "GPU", get: field("gpu_load_pct") }], 0, 100);
    const total = state.samples.length ? state.samples[state.samples.length - 1].mem_total_mb : null;
    chart("memory", [{ name: "used", get: field("mem_used_mb") }], 0, total || undefined);
    report("board", null);
  } catch (error) {
    report("board", error);
  }
}

// A sparkline per series on one canvas: time on x (the kept history), values on y, the latest in the legend.
function chart(id, series, min, max) {
  const canvas = $("chart-" + id), ctx = canvas.getContext("2d");
  const { width: w, height: h } = canvas;
  ctx.clearRect(0, 0, w, h);
  const values = state.samples.flatMap((s) => series.map((k) => k.get(s))).filter((v) => v !== null && v !== undefined);
  const lo = min !== undefined ? min : Math.min(...values), hi = max !== undefined ? max : Math.max(...values);
  // Until the history is full, the samples there are fill the width.
  const end = state.since || 0, first = state.samples.length ? state.samples[0].t : end;
  const start = Math.max(end - state.historyS, first), range = end - start || 1, span = hi - lo || 1;
  const legend = $("legend-" + id);
  legend.replaceChildren();
  series.forEach((k, i) => {
    ctx.strokeStyle = COLOURS[i % COLOURS.length];
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    let drawing = false, latest = null;
    for (const s of state.samples) {
      const v = k.get(s);
      if (v === null || v === undefined) { drawing = false; continue; }
      const x = ((s.t - start) / range) * (w - 2) + 1, y = h - 2 - ((v - lo) / span) * (h - 4);
      if (drawing) ctx.lineTo(x, y); else ctx.moveTo(x, y);
      drawing = true;
      latest = v;
    }
    ctx.stroke();
    const item = el("span", `${k.name} ${fmt(latest, 0)}`);
    item.style.color = COLOURS[i % COLOURS.length];
    legend.append(item);
  });
  if (!series.length) legend.append(el("span", "nothing to read here", "note"));
}

// --- try ---------------------------------------------------------------------------------------------------

async function runTry(event) {
  event.preventDefault();
  const file = $("try-file").files[0];
  const model = $("try-model").value;
  if (!model) return report("try", new ApiError("no READY model takes an image", "load one, then try again"));
  if (!file) return report("try", new ApiError("no image chosen", "choose an image file first"));
  if (file.size > state.maxUpload) {
    return report("try", new ApiError(`the image is ${(file.size / 2 ** 20).toFixed(1)} MiB, above the limit of ` +
      `${(state.maxUpload / 2 ** 20).toFixed(1)} MiB`, "choose a smaller image"));
  }
  $("try-run").disabled = true;
  $("try-status").textContent = `running ${model}…`;
  try {
    const answer = await api(`/api/try?model=${encodeURIComponent(model)}`, {
      method: "POST", body: file, headers: { "Content-Type": "application/octet-stream" },
    });
    await showAnswer(answer, file);
    report("try", null);
    $("try-status").textContent = "";
  } catch (error) {
    $("try-status").textContent = "failed";
    $("try-result").hidden = true;
    report("try", error);
  } finally {
    $("try-run").disabled = false;
  }
}

async function showAnswer(result, file) {
  const answer = result.answer, box = $("try-answer"), canvas = $("try-canvas"), image = $("try-image");
  box.replaceChildren();
  canvas.hidden = image.hidden = true;
  $("try-summary").textContent = `${result.model}: ${result.kind}, ${fmt(result.latency_ms, 1)} ms`;
  $("try-notes").textContent = (result.notes || []).join(" ");
  if (result.kind === "classes") {
    const list = el("ol", null, "classes");
    for (const c of answer.top) list.append(el("li", `${c.label !== null && c.label !== undefined ? c.label : c.index}` +
      ` (class ${c.index}) ${fmt(c.score, 3)}`));
    box.append(list);
  } else if (result.kind === "detections") {
    await drawDetections(canvas, answer, file);
    box.append(detectionTable(answer));
  } else if (result.kind === "lanes") {
    await drawLanes(canvas, answer, file);
    box.append(el("p", `${answer.lanes.length} lane(s): ` + answer.lanes.map((l) => fmt(l.score, 2)).join(", ")));
  } else if (result.kind === "image") {
    image.src = "data:image/png;base64," + answer.png_base64;
    image.hidden = false;
  } else {
    box.append(tensorTable(answer.outputs));
  }
  downloads(result);
  $("try-result").hidden = false;
}

async function drawLanes(canvas, answer, file) {
  canvas.width = answer.width;
  canvas.height = answer.height;
  const ctx = canvas.getContext("2d");
  const bitmap = await createImageBitmap(file); // no URL for the image: the CSP allows none but this page's
  ctx.drawImage(bitmap, 0, 0, answer.width, answer.height);
  bitmap.close();
  ctx.strokeStyle = LANE_COLOUR;
  ctx.lineWidth = 4;
  ctx.lineJoin = ctx.lineCap = "round";
  for (const lane of answer.lanes) {
    ctx.beginPath();
    lane.points.forEach(([x, y], i) => (i ? ctx.lineTo(x, y) : ctx.moveTo(x, y)));
    ctx.stroke();
  }
  canvas.hidden = false;
}

// The image at its own size, the boxes over it in its pixels; CSS scales the canvas, boxes and all, to the width
// shown. Line and text sizes follow the image so that they read the same on a phone photo and a thumbnail.
async function drawDetections(canvas, answer, file) {
  const [width, height] = answer.image_size;
  canvas.width = width;
  canvas.height = height;
  const ctx = canvas.getContext("2d");
  const bitmap = await createImageBitmap(file);
  ctx.drawImage(bitmap, 0, 0, width, height);
  bitmap.close();
  const line = Math.max(3, Math.round(Math.min(width, height) / 160));
  const size = Math.max(12, Math.round(Math.min(width, height) / 32));
  ctx.lineWidth = line;
  ctx.font = `${size}px system-ui, sans-serif`;
  ctx.textBaseline = "top";
  for (const d of answer.detections) {
    if (!d.box || d.box.some((v) => v === null)) continue;
    const [x1, y1, x2, y2] = d.box, colour = boxColour(d.class_id);
    ctx.strokeStyle = colour;
    ctx.strokeRect(x1, y1, x2 - x1, y2 - y1);
  }
  // Labels after every box: a later box's line must not cross an earlier box's name.
  for (const d of answer.detections) {
    if (!d.box || d.box.some((v) => v === null)) continue;
    const [x1, y1] = d.box, text = `${detectionName(d)} ${fmt(d.score, 2)}`;
    const w = ctx.measureText(text).width + 6, h = size + 4;
    const top = y1 - h >= 0 ? y1 - h : y1; // above the box, or inside it at the image's top edge
    const left = Math.max(0, Math.min(x1 - line / 2, width - w)); // a box at the right edge keeps its whole name
    ctx.fillStyle = boxColour(d.class_id);
    ctx.fillRect(left, top, w, h);
    ctx.fillStyle = "#fff";
    ctx.fillText(text, left + 3, top + 2);
  }
  canvas.dataset.boxes = String(answer.detections.length);
  canvas.hidden = false;
}

const detectionName = (d) => (d.class !== null && d.class !== undefined && d.class !== "" ? d.class :
  `class ${d.class_id}`);

function detectionTable(answer) {
  const wrap = el("div");
  const count = answer.detections.length;
  wrap.append(el("p", `${count} detection${count === 1 ? "" : "s"}` +
    (answer.names && answer.names.length ? ` (classes: ${answer.names.join(", ")})` : "")));
  if (!count) return wrap;
  const table = el("table", null, "detections");
  const head = el("tr");
  for (const h of ["class", "score", "box (x1, y1, x2, y2)"]) head.append(el("th", h));
  table.append(head);
  for (const d of answer.detections) {
    const row = el("tr");
    const name = el("td", detectionName(d));
    name.prepend(swatch(boxColour(d.class_id)));
    const box = (d.box || []).map((v) => fmt(v, 1)).join(", ");
    row.append(name, el("td", fmt(d.score, 3), "num"), el("td", box, "num"));
    table.append(row);
  }
  wrap.append(table);
  return wrap;
}

function swatch(colour) {
  const mark = el("span", null, "swatch");
  mark.style.background = colour; // a style property, not an inline style attribute: the CSP allows it
  return mark;
}

function tensorTable(outputs) {
  const table = el("table", null, "tensors");
  const head = el("tr");
  for (const h of ["output", "shape", "dtype", "min", "max", "mean", "first values"]) head.append(el("th", h));
  table.append(head);
  for (const o of outputs) {
    const row = el("tr");
    for (const v of [o.name, `[${o.shape.join(",")}]`, o.dtype, fmt(o.min, 4), fmt(o.max, 4), fmt(o.mean, 4),
      (o.first || []).map((x) => (typeof x === "number" ? Number(x.toPrecision(4)) : x)).join(", ")]) {
      row.append(el("td", v));
    }
    table.append(row);
  }
  return table;
}

// Downloads go through fetch (an <a href> could not send the token), then a temporary blob link.
function downloads(result) {
  const box = $("try-downloads");
  box.replaceChildren(el("span", "outputs as .npy: ", "note"));
  for (const [name, path] of Object.entries(result.npy || {})) {
    const button = el("button", `${name}.npy`);
    button.type = "button";
    button.addEventListener("click", async () => {
      try {
        const blob = await api(path);
        const link = el("a");
        link.href = URL.createObjectURL(blob);
        link.download = `${name}.npy`;
        link.click();
        setTimeout(() => URL.revokeObjectURL(link.href), 1000);
        report("download", null);
      } catch (error) {
        report("download", error);
      }
    });
    box.append(button);
  }
}

// --- live view -----------------------------------------------------------------------------------------------

// The MJPEG stream is an <img>: it cannot send the token as a header, so the token goes in its URL (same origin,
// no referrer sent, never logged by the page server). The figures come from /api/live, polled.
async function refreshLive() {
  try {
    const data = await api("/api/live");
    $("live-panel").hidden = !data.live;
    if (!data.live) return report("live", null);
    const image = $("live-image");
    if (!image.getAttribute("src") && !data.closed) {
      const token = sessionStorage.getItem(TOKEN_KEY);
      image.src = "/live.mjpg" + (token ? "?token=" + encodeURIComponent(token) : "");
    }
    const s = data.stats || {}, latency = s.latency_ms || {};
    $("live-fps").textContent = fmt(s.fps, 1);
    for (const q of ["p50", "p95", "p99"]) $("live-" + q).textContent = `${fmt(latency[q], 1)} ms`;
    for (const key of ["read", "answered", "dropped"]) $("live-" + key).textContent = fmt(s[key], 0);
    const body = document.querySelector("#live-sources tbody");
    body.replaceChildren(...Object.entries(s.sources || {}).map(([name, source]) => {
      const row = el("tr");
      row.dataset.source = name;
      row.append(el("td", name), el("td", source.state, "source-state"),
        el("td", `${fmt(source.fps, 1)} fps, ${fmt(source.dropped, 0)} dropped`, "num"));
      return row;
    }));
    $("live-note").textContent = data.closed ? "the stream has ended (the last frame stays)" :
      data.frames ? `frame ${data.last.frame} of ${data.last.source}, ${data.size[0]}x${data.size[1]}` +
        answered(data.last) : "waiting for the first answered frame";
    report("live", null);
  } catch (error) {
    report("live", error);
  }
}

// What the newest frame's answer held, where the view says (a detector's record has a count, and its boxes by
// class): ", 3 objects (disc 2, box 1)".
function answered(last) {
  if (!last || typeof last.count !== "number") return "";
  const classes = Object.entries(last.classes || {}).map(([name, n]) => `${name} ${n}`).join(", ");
  return `, ${last.count} object${last.count === 1 ? "" : "s"}` + (classes ? ` (${classes})` : "");
}

// --- start -------------------------------------------------------------------------------------------------

$("try-form").addEventListener("submit", runTry);
refreshModels();
refreshBoard();
refreshLive();
setInterval(refreshModels, 3000);
setInterval(refreshBoard, 2000);
setInterval(refreshLive, 1000);
