// Opens `factbuoy status --web`'s URL in headless Chromium, as a person would, and watches the
// run's page through the DevTools protocol until the run ends (tests/all/status_web.rs; the
// approach of bench/report-browser.mjs, with no npm package):
//
//   node --experimental-websocket tests/all/status-browser.mjs URL SHOT.png [large]
//
// Prints one JSON object: where the page ended up (href, path), whether it stayed the one
// document it loaded (same_document: a marker set at the start survived), each percent and
// each progress text it showed, the first failure it showed while the run was running and which
// section was at the top then, the first estimate of the time left, the final status and
// bundle text, what its Retrieve button said and the report its link opened, the run's row in
// the list of runs its "all runs" link opens, and every error the page threw
// or logged (scripts, the Content-Security-Policy, failed loads). SHOT is a screenshot taken
// while the run was live, a failure, a progress and an estimate shown.
//
// With `large`, for a run of thousands of nodes that has ended: how long the page took from
// navigation to its first drawn frame of the run, the rows of the node table, its pager before
// and after `next`, the nodes left by "only nodes not passed", the failure groups and problem
// rows shown, and the errors; SHOT is its first screen.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [url, shot, mode] = process.argv.slice(2);
if (!url || !shot) {
  console.error("usage: status-browser.mjs URL SHOT.png [large]");
  process.exit(2);
}
const GIVE_UP_MS = 120000;

const profile = mkdtempSync(join(tmpdir(), "factbuoy-status-browser-"));
const browser = spawn("chromium", [
  "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
  `--user-data-dir=${profile}`, "about:blank",
], { stdio: "ignore" });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

try {
  // Chromium writes the port it chose into the profile, then answers on it; on a loaded
  // machine the file may be there before its line is, and the port before its page.
  const portFile = join(profile, "DevToolsActivePort");
  let page;
  for (let i = 0; !page; i++) {
    if (i === 1200) throw new Error("chromium's DevTools did not answer within 60 s");
    await sleep(50);
    const port = existsSync(portFile) ? readFileSync(portFile, "utf8").split("\n")[0] : "";
    if (!/^[0-9]+$/.test(port)) continue;
    const targets = await fetch(`http://127.0.0.1:${port}/json/list`)
      .then((r) => r.json()).catch(() => []);
    page = targets.find((t) => t.type === "page");
  }
  const socket = new WebSocket(page.webSocketDebuggerUrl);
  await new Promise((r, e) => { socket.onopen = r; socket.onerror = e; });
  let next = 0;
  const pending = new Map();
  const listeners = [];
  const errors = [];
  socket.onmessage = (message) => {
    const m = JSON.parse(message.data);
    if (m.id !== undefined) {
      const { resolve: ok, reject } = pending.get(m.id);
      pending.delete(m.id);
      if (m.error) reject(new Error(JSON.stringify(m.error))); else ok(m.result);
    } else {
      if (m.method === "Runtime.exceptionThrown") errors.push(m.params.exceptionDetails.text + " " + (m.params.exceptionDetails.exception?.description ?? ""));
      if (m.method === "Runtime.consoleAPICalled" && ["error", "warning"].includes(m.params.type)) {
        errors.push(m.params.args.map((a) => a.value ?? a.description).join(" "));
      }
      // Blocked by the policy, a failed load: the browser's own log.
      if (m.method === "Log.entryAdded" && ["error", "warning"].includes(m.params.entry.level)) {
        errors.push(m.params.entry.source + ": " + m.params.entry.text + " " + (m.params.entry.url ?? ""));
      }
      for (const l of listeners) l(m);
    }
  };
  const send = (method, params = {}) => new Promise((ok, reject) => {
    const id = ++next;
    pending.set(id, { resolve: ok, reject });
    socket.send(JSON.stringify({ id, method, params }));
  });
  const evaluate = async (expression) => {
    const { result, exceptionDetails } = await send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
    if (exceptionDetails) throw new Error(exceptionDetails.text + " " + JSON.stringify(exceptionDetails.exception));
    return result.value;
  };

  await send("Page.enable");
  await send("Runtime.enable");
  await send("Log.enable");
  await send("Emulation.setDeviceMetricsOverride", { width: 1280, height: 820, deviceScaleFactor: 1, mobile: false });
  const loaded = new Promise((r) => listeners.push((m) => { if (m.method === "Page.loadEventFired") r(); }));
  await send("Page.navigate", { url });
  await loaded;
  await evaluate("window.factbuoyMarker = 'loaded once'");
  const frame = "new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))";

  if (mode === "large") {
    const firstDraw = await evaluate(`(async () => {
      while (document.body.dataset.percent === undefined) await new Promise((r) => setTimeout(r, 5));
      await ${frame};
      return performance.now();
    })()`);
    const { data } = await send("Page.captureScreenshot", { format: "png" });
    writeFileSync(shot, Buffer.from(data, "base64"));
    const before = await evaluate(`({ rows: document.querySelectorAll("#grid-table tr").length - 1,
      pageOf: document.getElementById("page-of").textContent, title: document.getElementById("grid-title").textContent,
      groups: document.querySelectorAll("#failures .group").length,
      problems: document.querySelectorAll("#problems-table tr").length - 1,
      problemsMore: document.getElementById("problems-more").textContent,
      plugins: document.querySelectorAll("#plugins-table tr").length - 1 })`);
    const after = await evaluate(`(async () => {
      document.getElementById("next").click();
      await ${frame};
      const pageOf = document.getElementById("page-of").textContent;
      const firstNode = document.querySelector("#grid-table tr:nth-child(2) td").textContent;
      const box = document.getElementById("only-problems");
      box.checked = true;
      box.dispatchEvent(new Event("change"));
      await ${frame};
      return { pageOf, firstNode, onlyProblems: document.getElementById("grid-title").textContent };
    })()`);
    console.log(JSON.stringify({ first_draw_ms: Math.round(firstDraw), before, after, errors }));
  } else {
    const percents = [];
    const progressTexts = [];
    let failureWhileRunning = null;
    let firstSection = null;
    let shotTaken = false;
    let estimate = null;
    let seen;
    const started = Date.now();
    for (;;) {
      seen = await evaluate(`(() => {
        const body = document.body.dataset;
        const failure = document.querySelector("#failures:not(.hidden) .group");
        const sections = [...document.querySelectorAll("main > section")].filter((s) => !s.classList.contains("hidden"));
        const done = [...document.querySelectorAll("#progress:not(.hidden) tr.progress-row")].map((r) => r.textContent);
        return { status: body.status, percent: body.percent, failure: failure && failure.textContent,
                 first: sections.length ? sections[0].id : null, progress: done.join(" | "),
                 eta: document.getElementById("eta") && document.getElementById("eta").textContent,
                 bundle: document.getElementById("bundle").classList.contains("hidden") ? null : document.getElementById("bundle-body").textContent };
      })()`);
      if (seen.percent !== undefined && percents[percents.length - 1] !== Number(seen.percent)) percents.push(Number(seen.percent));
      if (seen.progress && progressTexts[progressTexts.length - 1] !== seen.progress) progressTexts.push(seen.progress);
      if (seen.failure && seen.status === "running" && !failureWhileRunning) {
        failureWhileRunning = { status: seen.status, text: seen.failure };
        firstSection = seen.first;
      }
      if (seen.eta && / left$/.test(seen.eta) && !estimate) estimate = seen.eta;
      if (!shotTaken && failureWhileRunning && seen.status === "running" && seen.progress && estimate) {
        const { data } = await send("Page.captureScreenshot", { format: "png" });
        writeFileSync(shot, Buffer.from(data, "base64"));
        shotTaken = true;
      }
      if (seen.status === "complete" || seen.status === "failed") break;
      if (Date.now() - started > GIVE_UP_MS) break;
      await sleep(100);
    }
    if (!shotTaken) {
      const { data } = await send("Page.captureScreenshot", { format: "png" });
      writeFileSync(shot, Buffer.from(data, "base64"));
    }
    // Retrieve, one click: the server downloads the bundle; the report link then shows.
    const retrieved = await evaluate(`(async () => {
      document.getElementById("retrieve").click();
      const said = document.getElementById("retrieved");
      while (!/^retrieve(d to| failed)/.test(said.textContent)) await new Promise((r) => setTimeout(r, 20));
      const report = document.getElementById("report");
      return { text: said.textContent, report_shown: !report.classList.contains("hidden"), report: report.href };
    })()`);
    const where = await evaluate("({ href: location.href, path: location.pathname, same: window.factbuoyMarker === 'loaded once', navigations: performance.getEntriesByType('navigation').length })");
    // The list of runs, one click away, with the cookie alone.
    const listed = new Promise((r) => listeners.push((m) => { if (m.method === "Page.loadEventFired") r(); }));
    await evaluate("document.querySelector('header a').click()");
    await listed;
    const runsRow = await evaluate(`(async () => {
      while (document.querySelectorAll("#runs tr").length < 2) await new Promise((r) => setTimeout(r, 20));
      return document.querySelector("#runs tr:nth-child(2)").textContent;
    })()`);
    // The bundle's HTML report, opened from the page's link with the cookie alone.
    const reported = new Promise((r) => listeners.push((m) => { if (m.method === "Page.loadEventFired") r(); }));
    await send("Page.navigate", { url: retrieved.report });
    await reported;
    const report = await evaluate("({ title: document.title, path: location.pathname, text: document.body.innerText.slice(0, 2000) })");
    console.log(JSON.stringify({
      retrieved,
      report,
      href: where.href,
      path: where.path,
      same_document: where.same,
      navigations: where.navigations,
      percents,
      progress_texts: progressTexts,
      failure_while_running: failureWhileRunning,
      first_section: firstSection,
      estimate,
      final_status: seen.status,
      bundle: seen.bundle,
      runs_row: runsRow,
      errors,
    }));
  }
  socket.close();
} finally {
  browser.kill();
  await sleep(200);
  rmSync(profile, { recursive: true, force: true });
}
