// Opens a report in headless Chromium, as a person would, and measures it through the DevTools
// protocol (bench/report.sh):
//
//   node --experimental-websocket bench/report-browser.mjs REPORT.html NODE_QUERY VALUE_QUERY [SHOT.png]
//
// Prints one JSON object: first_screen_ms (from navigation start until the frame after the page
// has drawn its band, failures, charts and first page of nodes), each search's time until the
// page says how many nodes match (the first one inflates the facts), what it said, and the
// errors the page threw or logged (a run with any prints them and is not to be trusted).
// With SHOT, a screenshot of the first screen (1280 x 900) is written there.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const [report, nodeQuery, valueQuery, shot] = process.argv.slice(2);
if (!report || !nodeQuery || !valueQuery) {
  console.error("usage: report-browser.mjs REPORT.html NODE_QUERY VALUE_QUERY [SHOT.png]");
  process.exit(2);
}

const profile = mkdtempSync(join(tmpdir(), "factbuoy-report-browser-"));
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
      if (m.method === "Runtime.exceptionThrown") errors.push(m.params.exceptionDetails.text);
      if (m.method === "Runtime.consoleAPICalled" && ["error", "warning"].includes(m.params.type)) {
        errors.push(m.params.args.map((a) => a.value ?? a.description).join(" "));
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
  await send("Emulation.setDeviceMetricsOverride", { width: 1280, height: 900, deviceScaleFactor: 1, mobile: false });
  const loaded = new Promise((r) => listeners.push((m) => { if (m.method === "Page.loadEventFired") r(); }));
  await send("Page.navigate", { url: "file://" + resolve(report) });
  await loaded;
  // The page draws its first screen synchronously before the load event: the frame after it.
  const firstScreen = await evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))");
  if (shot) {
    const { data } = await send("Page.captureScreenshot", { format: "png" });
    writeFileSync(shot, Buffer.from(data, "base64"));
  }
  const search = (query) => evaluate(`(async () => {
    const search = document.getElementById("search");
    const count = document.getElementById("search-count");
    search.value = "";
    search.dispatchEvent(new Event("input"));
    while (count.textContent !== "") await new Promise((r) => setTimeout(r, 1));
    const start = performance.now();
    search.value = ${JSON.stringify(query)};
    search.dispatchEvent(new Event("input"));
    while (count.textContent === "") await new Promise((r) => setTimeout(r, 1));
    return [performance.now() - start, count.textContent.trim(), document.querySelectorAll("tr.node-row").length];
  })()`);
  const [nodeMs, nodeSaid, nodeRows] = await search(nodeQuery);
  const [valueMs, valueSaid, valueRows] = await search(valueQuery);
  const [againMs] = await search(nodeQuery);
  const rendered = await evaluate("document.body.dataset.rendered");
  console.log(JSON.stringify({
    first_screen_ms: Math.round(firstScreen),
    search_node_ms: Math.round(nodeMs), search_node_said: nodeSaid, search_node_rows: nodeRows,
    search_value_ms: Math.round(valueMs), search_value_said: valueSaid, search_value_rows: valueRows,
    search_again_ms: Math.round(againMs),
    rendered,
    errors,
  }));
  socket.close();
} finally {
  browser.kill();
  await sleep(200);
  rmSync(profile, { recursive: true, force: true });
}
