// Hephaestus dashboard: live refresh, actions through the API with a
// confirmation, selection and bulk operations with progress. Every
// action is one call of the API (/api/v1), sent with the session cookie.
"use strict";

(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

  // toast shows a short message.
  function toast(msg, bad) {
    const t = $("#toast");
    if (!t) return;
    t.textContent = msg;
    t.className = bad ? "show bad" : "show";
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { t.className = ""; }, 5000);
  }

  // problemText turns an API problem (RFC 9457) into one line.
  function problemText(p, status) {
    if (!p || typeof p !== "object") return "the API answered " + status;
    let s = (p.title || ("HTTP " + status)) + (p.detail ? ": " + p.detail : "");
    if (Array.isArray(p.errors) && p.errors.length) {
      s += " (" + p.errors.map((e) => (e.line ? "line " + e.line + (e.column ? ":" + e.column : "") + " " : "") + (e.path ? e.path + ": " : "") + e.message).join("; ") + ")";
    }
    return s;
  }

  // callAPI sends one request to the API and returns {ok, status, body}.
  async function callAPI(method, url, body) {
    const init = { method: method, credentials: "same-origin", headers: { "Accept": "application/json" } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const res = await fetch(url, init);
    let data = null;
    const text = await res.text();
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = text; }
    }
    return { ok: res.ok, status: res.status, body: data };
  }

  // setPath sets obj[a][b]… for the dotted path "a.b".
  function setPath(obj, path, value) {
    const parts = path.split(".");
    let o = obj;
    for (let i = 0; i < parts.length - 1; i++) {
      if (typeof o[parts[i]] !== "object" || o[parts[i]] === null) o[parts[i]] = {};
      o = o[parts[i]];
    }
    o[parts[parts.length - 1]] = value;
  }

  // selected lists the run ids whose boxes are ticked.
  function selected() {
    return $$("input.select:checked").map((b) => b.value);
  }

  function updateSelection() {
    const n = selected().length;
    const c = $("#selected-count");
    if (c) c.textContent = String(n);
    $$("button[data-select]").forEach((b) => { b.disabled = n === 0; });
  }

  // confirmDialog asks for confirmation and the fields of an action;
  // it resolves to the field values, or null when cancelled. submit is
  // called with the values and returns an error text to keep the dialog
  // open, or "" to close it.
  function confirmDialog(title, text, fields, submit) {
    const dlg = $("#confirm");
    $("#confirm-title").textContent = title || "Confirm";
    $("#confirm-text").textContent = text || "";
    const box = $("#confirm-fields");
    box.replaceChildren();
    const err = $("#confirm-error");
    err.textContent = "";
    const inputs = [];
    for (const f of fields) {
      const label = document.createElement("label");
      label.textContent = f.label || f.name;
      const input = document.createElement(f.type === "text" ? "input" : "textarea");
      input.name = f.name;
      input.dataset.type = f.type || "text";
      if (f.placeholder) input.placeholder = f.placeholder;
      if (f.value !== undefined) input.value = f.value;
      if (f.type !== "text") input.rows = 4;
      label.appendChild(input);
      // options are suggestions for a text field (a datalist).
      if (f.type === "text" && Array.isArray(f.options) && f.options.length) {
        const list = document.createElement("datalist");
        list.id = "confirm-options-" + f.name;
        for (const o of f.options) {
          const opt = document.createElement("option");
          opt.value = o;
          list.appendChild(opt);
        }
        label.appendChild(list);
        input.setAttribute("list", list.id);
        input.autocomplete = "off";
      }
      box.appendChild(label);
      inputs.push({ f: f, input: input });
    }
    const yes = $("#confirm-yes");
    const no = $("#confirm-no");
    const form = $("#confirm-form");
    const onSubmit = async (ev) => {
      ev.preventDefault();
      const values = {};
      for (const { f, input } of inputs) {
        const v = input.value;
        if (f.type === "json") {
          if (v.trim() === "") { if (f.required) { err.textContent = (f.label || f.name) + " is required"; return; } continue; }
          try { values[f.name] = JSON.parse(v); } catch (e) { err.textContent = (f.label || f.name) + " is not JSON: " + e.message; return; }
        } else if (v !== "" || f.required) {
          if (f.required && v.trim() === "") { err.textContent = (f.label || f.name) + " is required"; return; }
          values[f.name] = v;
        }
      }
      yes.disabled = true;
      try {
        const msg = await submit(values);
        if (msg) { err.textContent = msg; } else { close(); }
      } finally {
        yes.disabled = false;
      }
    };
    const close = () => {
      form.removeEventListener("submit", onSubmit);
      no.removeEventListener("click", close);
      dlg.close();
    };
    form.addEventListener("submit", onSubmit);
    no.addEventListener("click", close);
    dlg.showModal();
    if (inputs.length) inputs[0].input.focus(); else yes.focus();
  }

  // act runs the action of a button with data-api.
  function act(btn) {
    const method = btn.dataset.method || "POST";
    const url = btn.dataset.api;
    let fields = [];
    let base;
    try {
      fields = btn.dataset.fields ? JSON.parse(btn.dataset.fields) : [];
      base = btn.dataset.body ? JSON.parse(btn.dataset.body) : undefined;
    } catch (e) {
      toast("the action's description is broken: " + e.message, true);
      return;
    }
    confirmDialog(btn.dataset.title || btn.textContent.trim(), btn.dataset.confirm || "", fields, async (values) => {
      let body = base === undefined ? undefined : JSON.parse(JSON.stringify(base));
      // A field with "path" fills {its name} in the API's path, not the body.
      let target = url;
      for (const f of fields) {
        if (!f.path) continue;
        target = target.replace("{" + f.name + "}", encodeURIComponent(values[f.name] || ""));
        delete values[f.name];
      }
      if (fields.length) {
        body = body || {};
        for (const k of Object.keys(values)) setPath(body, k, values[k]);
      }
      if (btn.dataset.select) {
        body = body || {};
        setPath(body, btn.dataset.select, selected());
      }
      if (body === undefined && method !== "GET" && method !== "DELETE") body = {};
      let res;
      try {
        res = await callAPI(method, target, body);
      } catch (e) {
        return "the server could not be reached: " + e.message;
      }
      if (!res.ok) return problemText(res.body, res.status);
      done(btn, res.body);
      return "";
    });
  }

  // done follows an action that succeeded, as its data-then says.
  function done(btn, body) {
    const then = btn.dataset.then || "reload";
    toast((btn.dataset.title || btn.textContent.trim()) + ": done");
    if (then === "operation" && body && body.id) {
      followOperation(body.id);
      return;
    }
    if (then.startsWith("goto:")) {
      leaving = true;
      location.assign(then.slice(5).replace("{id}", body && body.id ? encodeURIComponent(body.id) : ""));
      return;
    }
    if (then.startsWith("show:")) {
      const out = $(then.slice(5));
      if (out) {
        out.hidden = false;
        out.textContent = typeof body === "string" ? body : JSON.stringify(body, null, 2);
      }
      return;
    }
    refresh(true);
  }

  // followOperation shows a bulk operation's progress until it ends.
  async function followOperation(id) {
    const box = $("#operation");
    if (!box) return;
    box.hidden = false;
    box.dataset.operation = id;
    for (;;) {
      let res;
      try {
        res = await callAPI("GET", "/api/v1/operations/" + encodeURIComponent(id));
      } catch (e) {
        res = null;
      }
      if (res && res.ok) {
        const op = res.body;
        box.replaceChildren();
        const label = document.createElement("span");
        label.textContent = "Operation " + op.action + " " + op.status + ": " + op.done + " of " + op.total + " done" + (op.failed ? ", " + op.failed + " failed" : "");
        const bar = document.createElement("progress");
        bar.max = Math.max(op.total, 1);
        bar.value = op.done + op.failed;
        const link = document.createElement("a");
        link.href = "/operations";
        link.textContent = "all operations";
        box.append(label, bar, link);
        box.dataset.status = op.status;
        if (op.status === "completed" || op.status === "failed" || op.status === "cancelled") {
          refresh(true);
          return;
        }
      }
      await new Promise((r) => setTimeout(r, 700));
    }
  }

  // refresh re-reads this page and swaps its live parts ([data-live]
  // with an id), keeping ticked boxes ticked.
  let refreshing = false;
  let again = false; // a refresh was asked for while one ran
  let held = false; // one was asked for while the dialog was open or the page hidden
  // leaving: an action sent the browser to another page. The page left
  // is not read again: it may be gone (a deleted run's), and a refresh
  // the dialog held is let go as the dialog closes after the action.
  let leaving = false;
  async function refresh(force) {
    if (leaving) return;
    if (refreshing) {
      again = true;
      return;
    }
    const toggle = $("#live-toggle");
    if (!force && toggle && !toggle.checked) return;
    if (!force && ($("#confirm").open || document.hidden)) {
      // Not lost: done when the dialog closes or the page shows again
      // (the change it was for may send no other event).
      held = true;
      return;
    }
    refreshing = true;
    try {
      const res = await fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } });
      if (!res.ok) return;
      const doc = new DOMParser().parseFromString(await res.text(), "text/html");
      const ticked = new Set(selected());
      // Opened <details> with an id stay open.
      const open = new Set($$("details[open][id]").map((d) => d.id));
      for (const el of $$("[data-live][id]")) {
        const fresh = doc.getElementById(el.id);
        if (fresh) el.replaceWith(document.importNode(fresh, true));
      }
      for (const id of open) {
        const d = document.getElementById(id);
        if (d) d.open = true;
      }
      $$("input.select").forEach((b) => { b.checked = ticked.has(b.value); });
      updateSelection();
      document.dispatchEvent(new CustomEvent("heph:refreshed"));
    } catch (e) {
      // The next tick tries again.
    } finally {
      refreshing = false;
      if (again) {
        again = false;
        refresh(force);
      }
    }
  }

  // Live updates: a page with a [data-stream] element follows that
  // stream of the API (server-sent events, read with fetch so that every
  // event name is seen and the session cookie goes along) and refreshes
  // its live parts on each event, a moment later so that a burst is one
  // refresh. A dropped connection is opened again after the last event
  // (Last-Event-ID); "end" (the run ended) and "error" stop it. While a
  // stream is connected the timed refresh rests; without one (no fetch
  // streams, or the stream is refused) the page refreshes on its timer.
  const live = { streaming: false, events: 0 };
  let soon = null;
  function refreshSoon() {
    if (soon) return;
    soon = setTimeout(() => { soon = null; refresh(false); }, 100);
  }
  function streamURL(el) {
    const url = new URL(el.dataset.stream, location.href);
    const names = (el.dataset.streamFilters || "").split(" ").filter(Boolean);
    const here = new URLSearchParams(location.search);
    for (const n of names) {
      for (const v of here.getAll(n)) if (v !== "") url.searchParams.append(n, v);
    }
    return url.toString();
  }
  // A page that is left closes its stream: the browser may keep the page
  // (the back/forward cache) with the stream open, and a stream holds one
  // of the few connections a browser opens to a server (six over HTTP/1.1),
  // so a few pages later the next one would wait for a connection until
  // the browser dropped the kept page. Shown again, it follows again.
  function follow(url, onEvent) {
    let last = "";
    let wait = 500;
    let ended = false; // "end" or "error" came: nothing to follow any more
    let ctl = null;    // aborts the connected stream
    let timer = null;  // the next attempt to connect
    async function connect() {
      timer = null;
      let stop = false;
      const mine = ctl = new AbortController();
      try {
        const headers = { "Accept": "text/event-stream" };
        if (last) headers["Last-Event-ID"] = last;
        const res = await fetch(url, { credentials: "same-origin", headers: headers, signal: mine.signal });
        if (!res.ok || !res.body) throw new Error("the stream answered " + res.status);
        live.streaming = true;
        wait = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        let ev = { name: "", data: [], id: null };
        while (!stop) {
          const chunk = await reader.read();
          if (chunk.done) break;
          buf += chunk.value;
          let i;
          while (!stop && (i = buf.indexOf("\n")) >= 0) {
            const line = buf.slice(0, i).replace(/\r$/, "");
            buf = buf.slice(i + 1);
            if (line === "") {
              if (ev.name || ev.data.length) {
                if (ev.id !== null) last = ev.id;
                live.events++;
                onEvent(ev.name || "message", ev.data.join("\n"));
                stop = ev.name === "end" || ev.name === "error";
              }
              ev = { name: "", data: [], id: null };
            } else if (line[0] !== ":") {
              const c = line.indexOf(":");
              const field = c < 0 ? line : line.slice(0, c);
              let value = c < 0 ? "" : line.slice(c + 1);
              if (value[0] === " ") value = value.slice(1);
              if (field === "event") ev.name = value;
              else if (field === "data") ev.data.push(value);
              else if (field === "id") ev.id = value;
            }
          }
        }
        if (stop) reader.cancel().catch(() => {});
      } catch (e) {
        // Connect again below, unless the page was left.
      }
      if (mine !== ctl) return; // left and shown again: a new attempt follows
      live.streaming = false;
      if (stop) ended = true;
      if (ended || mine.signal.aborted) return;
      timer = setTimeout(connect, wait);
      wait = Math.min(wait * 2, 30000);
    }
    window.addEventListener("pagehide", () => {
      clearTimeout(timer);
      timer = null;
      if (ctl) ctl.abort();
      live.streaming = false;
    });
    window.addEventListener("pageshow", (ev) => {
      if (ev.persisted && !ended && ctl && ctl.signal.aborted && !timer) {
        wait = 500;
        connect();
      }
    });
    connect();
  }

  document.addEventListener("click", (ev) => {
    const btn = ev.target.closest("button[data-api]");
    if (btn) {
      ev.preventDefault();
      act(btn);
    }
  });
  document.addEventListener("change", (ev) => {
    if (ev.target.id === "select-all") {
      $$("input.select").forEach((b) => { b.checked = ev.target.checked; });
    }
    if (ev.target.matches("input.select, #select-all")) updateSelection();
  });
  // The Start run form of a definition's page posts its input to the
  // API (POST /api/v1/runs) with the session, and opens the new run.
  document.addEventListener("submit", async (ev) => {
    const form = ev.target;
    if (form.id !== "start-run") return;
    ev.preventDefault();
    const err = $("#start-run-error");
    err.textContent = "";
    let input = {};
    const raw = form.elements["_raw"].value.trim();
    try {
      if (raw !== "") {
        input = JSON.parse(raw);
      } else {
        for (const el of form.elements) {
          if (!el.name || el.name === "_raw" || el.value === "") continue;
          switch (el.dataset.type) {
            case "integer": case "number": input[el.name] = Number(el.value); break;
            case "boolean": input[el.name] = el.value === "true"; break;
            case "json": input[el.name] = JSON.parse(el.value); break;
            default: input[el.name] = el.value;
          }
        }
      }
    } catch (e) {
      err.textContent = "the input is not JSON: " + e.message;
      return;
    }
    const body = { kind: form.dataset.kind, name: form.dataset.name, input: input };
    if (form.dataset.version) body.version = Number(form.dataset.version);
    const res = await callAPI("POST", "/api/v1/runs", body);
    if (!res.ok) {
      err.textContent = problemText(res.body, res.status);
      return;
    }
    location.href = "/runs/" + encodeURIComponent(res.body.id);
  });
  // A filter form sends only the fields that are filled in, so that its
  // URLs stay short enough to read and share.
  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    if (form.method !== "get" || !form.classList.contains("filters")) return;
    for (const el of form.elements) {
      if (el.name && (el.tagName === "INPUT" || el.tagName === "SELECT") && el.type !== "checkbox" && el.value === "") el.disabled = true;
    }
    setTimeout(() => { for (const el of form.elements) el.disabled = false; }, 0);
  });
  function releaseHeld() {
    if (held && !$("#confirm").open && !document.hidden) {
      held = false;
      refresh(false);
    }
  }
  document.addEventListener("visibilitychange", releaseHeld);
  document.addEventListener("DOMContentLoaded", () => {
    const dlg = $("#confirm");
    if (dlg) dlg.addEventListener("close", releaseHeld);
    updateSelection();
    const every = Number(document.body.dataset.refresh || 0);
    if (every > 0) setInterval(() => { if (!live.streaming) refresh(false); }, every * 1000);
    const el = $("[data-stream]");
    if (el && window.fetch && window.TextDecoderStream && window.ReadableStream) {
      follow(streamURL(el), () => refreshSoon());
    }
  });
  // held tells (tests) whether a refresh waits for the dialog to close.
  window.heph = { refresh: refresh, callAPI: callAPI, toast: toast, live: live, held: () => held };
})();

// The definitions page's document form: line numbers beside the text,
// validation through the API with each error listed at its line (a link
// that moves the cursor there) and its line marked in the gutter, and the
// Submit button's body kept in step with the form (the button is an
// ordinary action: one API call behind the confirmation dialog).
(function () {
  const $ = (sel) => document.querySelector(sel);

  function docBody() {
    const content = $("#doc-content").value;
    let name = $("#doc-name").value.trim();
    if (name === "") {
      const m = /^name:\s*["']?([^"'\s#]+)/m.exec(content) || /"name"\s*:\s*"([^"]+)"/.exec(content);
      if (m) name = m[1];
    }
    return { name: name, format: $("#doc-format").value, content: content };
  }

  // gutter numbers the lines of the text; bad lines are marked.
  function gutter(bad) {
    const g = $("#doc-gutter");
    const n = $("#doc-content").value.split("\n").length;
    const marks = bad || new Map();
    const parts = [];
    for (let i = 1; i <= n; i++) {
      const s = document.createElement("span");
      s.dataset.line = String(i);
      s.textContent = String(i);
      if (marks.has(i)) {
        s.className = "bad";
        s.title = marks.get(i);
      }
      parts.push(s, document.createTextNode("\n"));
    }
    g.replaceChildren(...parts);
    g.scrollTop = $("#doc-content").scrollTop;
  }

  // goTo puts the cursor at a line and column of the text.
  function goTo(line, column) {
    const ta = $("#doc-content");
    const lines = ta.value.split("\n");
    let off = 0;
    for (let i = 0; i < line - 1 && i < lines.length; i++) off += lines[i].length + 1;
    off += Math.max(0, Math.min((column || 1) - 1, (lines[line - 1] || "").length));
    ta.focus();
    ta.setSelectionRange(off, off);
    const lh = parseFloat(getComputedStyle(ta).lineHeight) || 18;
    ta.scrollTop = Math.max(0, (line - 3) * lh);
    $("#doc-gutter").scrollTop = ta.scrollTop;
  }

  function showErrors(problem, status) {
    const list = $("#doc-errors");
    const st = $("#doc-status");
    list.replaceChildren();
    const bad = new Map();
    const errs = problem && Array.isArray(problem.errors) ? problem.errors : [];
    st.className = "error";
    st.textContent = (problem && problem.title ? problem.title : "HTTP " + status) + (problem && problem.detail ? ": " + problem.detail : "");
    for (const e of errs) {
      const li = document.createElement("li");
      if (e.line) {
        li.dataset.line = String(e.line);
        const a = document.createElement("a");
        a.href = "#doc-content";
        a.className = "goto-line";
        a.dataset.line = String(e.line);
        a.dataset.column = String(e.column || 1);
        a.textContent = "line " + e.line + (e.column ? ":" + e.column : "");
        li.append(a, document.createTextNode(" "));
        bad.set(e.line, (bad.has(e.line) ? bad.get(e.line) + "; " : "") + e.message);
      }
      li.append(document.createTextNode((e.path ? e.path + ": " : "") + e.message));
      list.append(li);
    }
    list.hidden = errs.length === 0;
    gutter(bad);
  }

  async function validate() {
    const st = $("#doc-status");
    st.className = "hint";
    st.textContent = "validating…";
    let res;
    try {
      res = await window.heph.callAPI("POST", "/api/v1/documents/validate", docBody());
    } catch (e) {
      st.className = "error";
      st.textContent = "the server could not be reached: " + e.message;
      return;
    }
    if (res.ok) {
      $("#doc-errors").replaceChildren();
      $("#doc-errors").hidden = true;
      st.className = "valid";
      st.textContent = "The document is valid.";
      gutter();
      return;
    }
    showErrors(res.body, res.status);
  }

  function syncSubmit() {
    const btn = $("#doc-submit");
    if (btn) btn.dataset.body = JSON.stringify(docBody());
  }

  document.addEventListener("DOMContentLoaded", () => {
    const ta = $("#doc-content");
    if (!ta) return;
    gutter();
    syncSubmit();
    ta.addEventListener("input", () => { gutter(); syncSubmit(); });
    ta.addEventListener("scroll", () => { $("#doc-gutter").scrollTop = ta.scrollTop; });
    $("#doc-name").addEventListener("input", syncSubmit);
    $("#doc-format").addEventListener("change", syncSubmit);
    $("#doc-validate").addEventListener("click", validate);
    $("#doc-errors").addEventListener("click", (ev) => {
      const a = ev.target.closest("a.goto-line");
      if (!a) return;
      ev.preventDefault();
      goTo(Number(a.dataset.line), Number(a.dataset.column));
    });
  });

  // The run page's timeline zooms (its box is outside the live parts, so
  // the zoom outlasts a refresh): the picture widens, the box scrolls.
  document.addEventListener("click", (ev) => {
    const btn = ev.target.closest("[data-tl-zoom]");
    if (!btn) return;
    const box = $("#timeline-box");
    if (!box) return;
    const cur = Number(box.dataset.zoom || "1");
    const step = btn.dataset.tlZoom;
    const next = step === "fit" ? 1 : Math.min(16, Math.max(1, step === "in" ? cur * 2 : cur / 2));
    box.dataset.zoom = String(next);
    box.style.setProperty("--tl-zoom", String(next));
    const label = $("#timeline-zoom-level");
    if (label) label.textContent = next + "×";
  });
})();
