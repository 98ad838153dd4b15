// One run, live: each `status` event of /api/v1/runs/{id}/events (docs/status.md) replaces
// the run's state and the page redraws from it. Every text from the run (names, messages)
// goes in through text nodes, never as HTML. What a large run would make slow is bounded:
// the node table shows one page of ROWS nodes, lists show their first LISTED entries.
import { $, el, json } from "/assets/page.js";

(function () {
  const ROWS = 200;
  const LISTED = 50;
  // Seconds without a heartbeat after which a node's age is shown as stale.
  const STALE = 30;
  // How far back the rate behind the time-left estimate looks.
  const RATE_WINDOW_MS = 60000;
  const ENDED_STATES = ["lost", "timed-out", "interrupted", "skipped", "agent-failed"];

  const runId = decodeURIComponent(location.pathname.split("/")[2] || "");
  const count = (n, one, many) => n + " " + (n === 1 ? one : (many || one + "s"));
  const bytes = (n) => {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
  };
  const duration = (s) => {
    s = Math.max(0, Math.round(s));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  };
  // A pair as a person reads it: its result once there is one, else where it is.
  function outcome(p) {
    if (ENDED_STATES.includes(p.status)) return p.status;
    if (p.result_status) return p.result_status;
    return p.status;
  }

  let view = null;       // the last event's document
  let derived = null;    // what the page draws, worked out once per event
  let retrieved = false; // whether this page had the bundle retrieved
  let receivedAt = 0;    // when it arrived, by this browser's clock
  let events = 0;
  const samples = [];    // [time, work done] for the time-left estimate
  let page = 0;

  document.title = "factbuoy run " + runId;
  $("title").textContent = "run " + runId;

  // Everything the page shows that does not change with time, from one status document.
  function derive(status) {
    const pairs = status.plugins;
    const plugins = [];
    const nodes = new Map();
    const perPlugin = new Map();
    const groups = new Map();
    const problems = [];
    const progress = [];
    // Results in, and the share of the work a running plugin says it has done: the percent
    // and the time left move with a slow plugin's progress, not only when results arrive.
    let done = 0, passed = 0, failed = 0, work = 0;
    for (const p of pairs) {
      if (!perPlugin.has(p.plugin)) {
        plugins.push(p.plugin);
        perPlugin.set(p.plugin, { passed: 0, failed: 0, running: 0, pending: 0, other: 0 });
      }
      let node = nodes.get(p.node);
      if (!node) {
        node = { name: p.node, pairs: new Map(), heartbeat: null, bad: false };
        nodes.set(p.node, node);
      }
      node.pairs.set(p.plugin, p);
      if (p.last_heartbeat && (!node.heartbeat || p.last_heartbeat > node.heartbeat)) node.heartbeat = p.last_heartbeat;
      const o = outcome(p);
      const counts = perPlugin.get(p.plugin);
      if (o === "passed") counts.passed++;
      else if (o === "failed") counts.failed++;
      else if (o === "running") counts.running++;
      else if (o === "pending") counts.pending++;
      else counts.other++;
      if (p.result_status) { done++; work++; }
      else if (p.progress && p.progress.total > 0) work += Math.min(1, p.progress.completed / p.progress.total);
      if (p.result_status === "passed") passed++;
      if (p.result_status === "failed") {
        failed++;
        node.bad = true;
        const message = p.error || "no reason was given";
        if (!groups.has(message)) groups.set(message, []);
        groups.get(message).push(p);
      }
      if (ENDED_STATES.includes(p.status)) {
        node.bad = true;
        problems.push(p);
      }
      if (p.status === "running" && p.progress) progress.push(p);
    }
    const failures = [...groups.entries()].sort((a, b) => b[1].length - a[1].length);
    return { plugins, nodes: [...nodes.values()], perPlugin, failures, problems, progress, done, work, passed, failed, total: pairs.length };
  }

  // Seconds since `time` (RFC 3339), measured on the server's clock at its last poll and
  // moved on by this browser's clock since the event came.
  function age(time) {
    const polled = Date.parse(view.polled_at);
    return (polled - Date.parse(time)) / 1000 + (Date.now() - receivedAt) / 1000;
  }

  function timeLeft() {
    if (samples.length < 2) return null;
    const [t0, d0] = samples[0];
    const [t1, d1] = samples[samples.length - 1];
    if (d1 <= d0 || t1 <= t0) return null;
    const rate = (d1 - d0) / (t1 - t0);
    return (derived.total - d1) / rate / 1000;
  }

  function drawBand() {
    const status = view.status;
    const d = derived;
    const percent = d.total ? Math.floor((100 * d.work) / d.total) : 100;
    document.body.dataset.status = status.status;
    document.body.dataset.percent = String(percent);
    const parts = [
      el("span", { class: "badge " + status.status }, status.status),
      el("strong", { id: "percent" }, percent + "%"),
      el("span", {}, d.done + " of " + count(d.total, "result") + " · " + d.passed + " passed · ", el("span", { class: d.failed ? "failed" : "" }, d.failed + " failed")),
      el("span", { class: "muted" }, count(d.nodes.length, "node") + " × " + count(d.plugins.length, "plugin")),
    ];
    if (!view.ended) {
      const left = timeLeft();
      parts.push(el("span", { id: "eta", class: "muted" }, left === null ? "estimating the time left…" : "about " + duration(left) + " left"));
    }
    $("band").replaceChildren(...parts);
    // Widths through the CSSOM: the policy forbids style attributes.
    const bar = (cls, n) => {
      const span = el("span", { class: cls });
      span.style.width = (d.total ? (100 * n) / d.total : 0) + "%";
      return span;
    };
    $("meter").replaceChildren(bar("passed", d.passed), bar("failed", d.failed));
  }

  function drawBanner() {
    const banner = $("banner");
    const lines = [];
    if (view.poll_error) lines.push("The run's aggregator did not answer the last poll (what follows is its last answer): " + view.poll_error);
    if (view.status && view.status.error) lines.push("The run failed: " + view.status.error);
    banner.textContent = lines.join("\n");
    banner.classList.toggle("hidden", lines.length === 0);
  }

  function drawBundle() {
    const tar = view.status.tar_info;
    $("bundle").classList.toggle("hidden", !tar);
    if (!tar) return;
    const rows = [["name", tar.name], ["size", bytes(tar.size) + " (" + tar.size + " bytes)"], ["sha256", tar.sha256], ["written", tar.created]];
    if (view.bundle_path) rows.push(["on this machine", view.bundle_path]);
    rows.push(["retrieve", view.retrieve]);
    $("bundle-body").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, el("code", {}, v))]));
    // The report needs the bundle on this machine: a local run's is, another's once retrieved.
    $("report").classList.toggle("hidden", !view.bundle_path && !retrieved);
  }

  function drawFailures() {
    const d = derived;
    $("failures").classList.toggle("hidden", d.failures.length === 0);
    $("failures-title").textContent = "Failures: " + count(d.failed, "result") + ", " + count(d.failures.length, "reason");
    $("failures-body").replaceChildren(...d.failures.slice(0, LISTED).map(([message, pairs]) => {
      const who = pairs.slice(0, 10).map((p) => p.plugin + " on " + p.node).join(", ");
      const more = pairs.length > 10 ? " and " + (pairs.length - 10) + " more" : "";
      return el("div", { class: "group failure" },
        el("div", { class: "message" }, message),
        el("div", { class: "muted" }, count(pairs.length, "result") + ": " + who + more));
    }));
  }

  function drawProblems() {
    const d = derived;
    $("problems").classList.toggle("hidden", d.problems.length === 0);
    $("problems-table").replaceChildren(
      el("tr", {}, el("th", {}, "Node"), el("th", {}, "Plugin"), el("th", {}, "State"), el("th", {}, "Why")),
      ...d.problems.slice(0, LISTED).map((p) => el("tr", {},
        el("td", {}, p.node), el("td", {}, p.plugin), el("td", { class: p.status }, p.status), el("td", {}, p.error || ""))));
    $("problems-more").textContent = d.problems.length > LISTED ? "… and " + (d.problems.length - LISTED) + " more; the node table lists them all" : "";
  }

  function drawProgress() {
    const d = derived;
    $("progress").classList.toggle("hidden", d.progress.length === 0);
    $("progress-table").replaceChildren(
      el("tr", {}, el("th", {}, "Node"), el("th", {}, "Plugin"), el("th", { class: "number" }, "Done"), el("th", {}, "Says")),
      ...d.progress.slice(0, LISTED).map((p) => el("tr", { class: "progress-row" },
        el("td", {}, p.node), el("td", {}, p.plugin),
        el("td", { class: "number" }, p.progress.total > 0 ? p.progress.completed + "/" + p.progress.total : ""),
        el("td", {}, p.progress.msg || ""))));
    $("progress-more").textContent = d.progress.length > LISTED ? "… and " + (d.progress.length - LISTED) + " more" : "";
  }

  function drawPlugins() {
    const rows = [el("tr", {}, el("th", {}, "Plugin"), ...["passed", "failed", "running", "pending", "lost or skipped"].map((h) => el("th", { class: "number" }, h)))];
    for (const name of derived.plugins) {
      const c = derived.perPlugin.get(name);
      rows.push(el("tr", {}, el("td", {}, name),
        el("td", { class: "number passed" }, c.passed), el("td", { class: "number" + (c.failed ? " failed" : "") }, c.failed),
        el("td", { class: "number" }, c.running), el("td", { class: "number" }, c.pending), el("td", { class: "number" }, c.other)));
    }
    $("plugins-table").replaceChildren(...rows);
  }

  function shownNodes() {
    const query = $("search").value.trim().toLowerCase();
    const onlyProblems = $("only-problems").checked;
    return derived.nodes.filter((n) => (!query || n.name.toLowerCase().includes(query)) &&
      (!onlyProblems || n.bad || [...n.pairs.values()].some((p) => outcome(p) !== "passed")));
  }

  function drawGrid() {
    const nodes = shownNodes();
    const pages = Math.max(1, Math.ceil(nodes.length / ROWS));
    page = Math.min(page, pages - 1);
    $("grid-title").textContent = "Nodes (" + nodes.length + (nodes.length === derived.nodes.length ? "" : " of " + derived.nodes.length) + ")";
    $("page-of").textContent = "page " + (page + 1) + " of " + pages;
    $("previous").disabled = page === 0;
    $("next").disabled = page >= pages - 1;
    $("pager").classList.toggle("hidden", pages === 1);
    const rows = [el("tr", {}, el("th", {}, "Node"), el("th", {}, "Heartbeat"), ...derived.plugins.map((p) => el("th", {}, p)))];
    for (const node of nodes.slice(page * ROWS, (page + 1) * ROWS)) {
      let heartbeat = "none yet";
      let stale = false;
      if (node.heartbeat) {
        const seconds = age(node.heartbeat);
        heartbeat = duration(seconds) + " ago";
        stale = seconds > STALE && !view.ended;
      }
      const cells = derived.plugins.map((name) => {
        const p = node.pairs.get(name);
        if (!p) return el("td", { class: "muted" }, "–");
        const o = outcome(p);
        let label = o;
        if (o === "running" && p.progress && p.progress.total > 0) label = p.progress.completed + "/" + p.progress.total;
        const title = p.error || (p.progress && p.progress.msg) || "";
        return el("td", { class: "cell " + o, title }, label);
      });
      rows.push(el("tr", {}, el("td", {}, node.name), el("td", { class: stale ? "stale" : "muted" }, heartbeat), ...cells));
    }
    $("grid-table").replaceChildren(...rows);
  }

  function draw() {
    drawBanner();
    if (!view.status) return;
    drawBand();
    drawBundle();
    drawFailures();
    drawProblems();
    drawProgress();
    drawPlugins();
    drawGrid();
  }

  // Many events in one frame draw once.
  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw(); });
  }

  const source = new EventSource("/api/v1/runs/" + encodeURIComponent(runId) + "/events");
  source.addEventListener("status", (event) => {
    view = JSON.parse(event.data);
    receivedAt = Date.now();
    events++;
    document.body.dataset.events = String(events);
    if (view.status) {
      derived = derive(view.status);
      samples.push([receivedAt, derived.work]);
      while (samples.length > 2 && samples[0][0] < receivedAt - RATE_WINDOW_MS) samples.shift();
      $("meta").textContent = view.kind + " run";
    }
    // The last event: the stream ends, and a reconnection would only repeat it.
    if (view.ended) source.close();
    schedule();
  });
  source.addEventListener("error", () => {
    if (view && view.ended) return;
    const banner = $("banner");
    banner.textContent = source.readyState === EventSource.CLOSED
      ? "This server does not know run " + runId + " (or stopped); the list of runs is one click away."
      : "Lost the connection to the status server; reconnecting…";
    banner.classList.remove("hidden");
  });
  source.addEventListener("open", () => { if (view) drawBanner(); });

  // Retrieve: the server downloads the bundle into its --out folder, as `factbuoy retrieve`.
  $("report").href = "/runs/" + encodeURIComponent(runId) + "/report";
  $("retrieve").addEventListener("click", async () => {
    const button = $("retrieve");
    button.disabled = true;
    $("retrieved").textContent = "retrieving…";
    try {
      const body = await json("/api/v1/runs/" + encodeURIComponent(runId) + "/retrieve", { method: "POST" });
      retrieved = true;
      $("retrieved").textContent = "retrieved to " + body.path + " (" + bytes(body.size) + ", sha256 checked)";
      $("report").classList.remove("hidden");
    } catch (e) {
      $("retrieved").textContent = "retrieve failed: " + e.message;
    } finally {
      button.disabled = false;
    }
  });

  $("search").addEventListener("input", () => { page = 0; if (derived) schedule(); });
  $("only-problems").addEventListener("change", () => { page = 0; if (derived) schedule(); });
  $("previous").addEventListener("click", () => { page--; schedule(); });
  $("next").addEventListener("click", () => { page++; schedule(); });
  // Heartbeat ages and the time left move on between events.
  setInterval(() => { if (derived && !view.ended) schedule(); }, 1000);
})();
